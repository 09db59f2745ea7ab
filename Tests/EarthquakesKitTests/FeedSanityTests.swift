import BatonTesting
import EarthquakesKit
import Foundation
import Testing

/// Impossible values and the wording of errors, as an adversarial probe found them.
@Suite("FeedParser: impossible values and error wording", .offThePool)
struct FeedSanityTests {
    static func feed(_ features: [String]) -> Data {
        Data(#"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#.utf8)
    }

    static func feature(
        id: String = #""a""#, mag: String = "2", depth: String = "10", time: String = "1700000000000"
    )
        -> String
    {
        #"{"type":"Feature","id":\#(id),"properties":{"mag":\#(mag),"time":\#(time)},"#
            + #""geometry":{"type":"Point","coordinates":[1,2,\#(depth)]}}"#
    }

    @Test(
        "impossible magnitudes, depths and blank ids are skipped, saying which and why",
        arguments: [
            (feature(mag: "1e300"), "magnitude (properties.mag) 1e+300, outside -12...12"),
            (feature(mag: "-13"), "outside -12...12"),
            (feature(depth: "1e9"), "depth (geometry.coordinates[2]) 1000000000.0 km, outside -15...1000 km"),
            (feature(depth: "-20"), "outside -15...1000 km"),
            (feature(id: #""   ""#), "has an \"id\" of only spaces"),
        ])
    func impossibleValues(feature: String, words: String) throws {
        let parsed = try FeedParser().parse(Self.feed([feature, Self.feature(id: #""ok""#)]))
        #expect(parsed.earthquakes.map(\.id) == ["ok"])
        let warning = try #require(parsed.warnings.first).description
        #expect(warning.contains(words), "\(warning)")
        #expect(throws: FeedError.self) { try FeedParser(strict: true).parse(Self.feed([feature])) }
    }

    @Test("real-world extremes are kept")
    func extremesAreKept() throws {
        let features = [
            Self.feature(id: #""big""#, mag: "9.5", depth: "35"), Self.feature(id: #""small""#, mag: "-2", depth: "0"),
            Self.feature(id: #""deep""#, mag: "4", depth: "800"), Self.feature(id: #""high""#, mag: "1", depth: "-3.5"),
        ]
        #expect(try FeedParser().parse(Self.feed(features)).earthquakes.count == 4)
    }

    @Test("a time beyond any clock: the skip warning is one sentence")
    func hugeTime() throws {
        let parsed = try FeedParser().parse(Self.feed([Self.feature(time: "1e20"), Self.feature(id: #""ok""#)]))
        let warning = try #require(parsed.warnings.first).description
        #expect(
            warning.hasPrefix("skipped feature 0 (id \"a\") of the feed: it has an unexpected value at properties.time")
        )
    }

    @Test("a string where a number belongs is said plainly, without Swift's own words")
    func stringForNumber() throws {
        let text = Self.feed([Self.feature(mag: #""big""#), Self.feature(id: #""ok""#)])
        let warning = try #require(try FeedParser().parse(text).warnings.first).description
        #expect(warning.contains("properties.mag: a string, not a number"), "\(warning)")
        #expect(!warning.contains("Expected to decode") && !warning.contains(".."))
        let error = try #require(throws: FeedError.self) { try FeedParser(strict: true).parse(text) }
        #expect(error.description.contains("a string, not a number"), "\(error.description)")
        #expect(!error.description.contains("Expected to decode") && !error.description.contains(".."))
    }

    @Test("a null feed is named as one")
    func nullFeed() throws {
        let error = try #require(throws: FeedError.self) { try FeedParser().parse(Data("null".utf8)) }
        #expect(error.code == .notAFeatureCollection)
        #expect(error.description.contains("the feed is null"), "\(error.description)")
        #expect(!error.description.contains("Dictionary"))
    }

    @Test("a lone UTF-16 surrogate escape is named where it is, not blamed on the encoding")
    func loneSurrogate() throws {
        let text = #"{"type":"FeatureCollection","features":[{"type":"Feature","id":"x\ud800y"}]}"#
        let error = try #require(throws: FeedError.self) { try FeedParser().parse(Data(text.utf8)) }
        #expect(error.code == .malformedJSON)
        #expect(error.description.contains("invalid \\u escape \\ud800"), "\(error.description)")
        #expect(!error.description.contains("UTF-8"))
        #expect(error.position?.byteOffset == text.utf8.count - 11)
    }
}
