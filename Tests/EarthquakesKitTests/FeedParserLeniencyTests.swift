import BatonTesting
import EarthquakesKit
import Foundation
import Testing

@Suite("FeedParser: one bad feature does not reject the feed", .offThePool)
struct FeedParserLeniencyTests {
    static let good1 =
        #"{"type":"Feature","properties":{"mag":4,"time":1700000000000,"type":"earthquake"},"geometry":{"type":"Point","coordinates":[139.7,35.7,10]},"id":"good1"}"#
    static let good2 =
        #"{"type":"Feature","properties":{"mag":2.1,"time":1700000100000,"type":"quarry blast"},"geometry":{"type":"Point","coordinates":[-120,40,0.5]},"id":"good2"}"#

    /// A feed of `good1`, `bad`, `good2`.
    static func feed(bad: String) -> Data {
        Data(#"{"type":"FeatureCollection","metadata":{"count":3},"features":[\#(good1),\#(bad),\#(good2)]}"#.utf8)
    }

    static let badFeatures: [(feature: String, id: String?, problem: String)] = [
        (#"{"id":"nulldepth","geometry":{"type":"Point","coordinates":[1,2,null]}}"#, "nulldepth", "null depth"),
        (#"{"id":"nogeometry","geometry":null}"#, "nogeometry", "has no geometry.coordinates"),
        (#"{"geometry":{"coordinates":[1,2,3]}}"#, nil, "has no \"id\""),
        (#"{"id":"swapped","geometry":{"coordinates":[35,139,2]}}"#, "swapped", "latitude 139.0"),
        // (Named by its id although it could not be decoded: the id is read on its own.)
        (
            #"{"id":"stringmag","properties":{"mag":"4.5"},"geometry":{"coordinates":[1,2,3]}}"#, "stringmag",
            "properties.mag"
        ),
        (#"{"id":"absurd","properties":{"time":1e300},"geometry":{"coordinates":[1,2,3]}}"#, "absurd", "time"),
        (#"{"id":"hugemag","properties":{"mag":1e999},"geometry":{"coordinates":[1,2,3]}}"#, "hugemag", "magnitude"),
        (#"{"id":"hugedepth","geometry":{"coordinates":[1,2,-1e400]}}"#, "hugedepth", "depth (geometry"),
        (
            #"{"id":"hugecdi","properties":{"cdi":2e308},"geometry":{"coordinates":[1,2,3]}}"#, "hugecdi",
            "properties.cdi"
        ),
    ]

    @Test("the good features are read and each bad one is named in a warning", arguments: 0..<badFeatures.count)
    func skipsBadFeature(case index: Int) throws {
        let bad = Self.badFeatures[index]
        let feed = try FeedParser().parse(Self.feed(bad: bad.feature))
        #expect(feed.earthquakes.map(\.id) == ["good1", "good2"])
        let skipped = try #require(feed.skippedFeatures.first)
        #expect(feed.skippedFeatures.count == 1)
        #expect(skipped.index == 1)
        if let id = bad.id { #expect(skipped.id == id) }
        #expect(skipped.problem.contains(bad.problem), "\(skipped.problem)")
        let warning = try #require(feed.warnings.first { if case .skippedFeature = $0 { true } else { false } })
        #expect(warning.description.contains("skipped feature 1"))
        #expect(warning.description.contains(bad.problem))
    }

    @Test("strict mode rejects the same feeds", arguments: 0..<badFeatures.count)
    func strictRejects(case index: Int) throws {
        let error = try #require(throws: FeedError.self) {
            try FeedParser(strict: true).parse(Self.feed(bad: Self.badFeatures[index].feature))
        }
        #expect(error.featureIndex == 1)
        #expect(error.code == .invalidFeature || error.code == .unexpectedValue)
    }

    @Test("a well-formed feed has no skipped features")
    func noneSkipped() throws {
        let feed = try FeedParser().parse(Self.feed(bad: Self.good1.replacingOccurrences(of: "good1", with: "good3")))
        #expect(feed.skippedFeatures.isEmpty)
        #expect(feed.warnings.isEmpty)
        #expect(feed.earthquakes.count == 3)
    }

    @Test("the import summary counts the skipped features and the events that are not earthquakes")
    func summaryCounts() throws {
        let feed = try FeedParser().parse(Self.feed(bad: Self.badFeatures[0].feature))
        let summary = try EarthquakeStore.inMemory().importFeed(feed)
        #expect(summary.inserted == 2)
        #expect(summary.skipped == 1)
        #expect(summary.otherTypes == ["quarry blast": 1])
        #expect(summary.earthquakes == 1)
        #expect(summary.description.hasSuffix("; 1 feature skipped"))
    }

    @Test(
        "an HTML page served in place of the feed says so",
        arguments: [
            "<!DOCTYPE html>\n<html><head><title>Sign in</title></head></html>",
            "\u{FEFF}  <html><body>Moved</body></html>",
        ])
    func htmlPage(text: String) throws {
        let error = try #require(throws: FeedError.self) { try FeedParser().parse(Data(text.utf8)) }
        #expect(error.code == .notGeoJSON)
        #expect(error.description.contains("HTML page"))
        #expect(error.description.contains("not a GeoJSON feed"))
        #expect(error.description.contains(String(text.drop { $0 == "\u{FEFF}" || $0 == " " }.prefix(10))))
    }
}
