import BatonTesting
import EarthquakesTestData
import Foundation
import Testing

@testable import EarthquakesKit

/// The byte-level scanner reads exactly what `JSONDecoder` reads, and gives way to it for anything else.
@Suite("FeedScanner", .offThePool)
struct FeedScannerTests {
    static let slow: FeedParser = {
        var parser = FeedParser()
        parser.usesScanner = false
        return parser
    }()

    static func scans(_ text: String) -> Bool {
        Array(text.utf8).withUnsafeBufferPointer { FeedScanner.scan($0) != nil }
    }

    @Test(
        "every recorded USGS feed is read by the scanner, with the same result as JSONDecoder",
        .enabled(if: USGSData.isAvailable, USGSData.skipMessage), arguments: USGSData.realFeeds.map(\.file))
    func recordedFeeds(file: String) throws {
        let data = try USGSData.data(file)
        #expect(data.withUnsafeBytes { FeedScanner.scan($0.bindMemory(to: UInt8.self)) != nil })
        #expect(try FeedParser().parse(data) == Self.slow.parse(data))
    }

    @Test("the sample feed is read by the scanner, with the same result as JSONDecoder")
    func sampleFeed() throws {
        let data = SampleFeed.geoJSON(count: 300)
        #expect(data.withUnsafeBytes { FeedScanner.scan($0.bindMemory(to: UInt8.self)) != nil })
        #expect(try FeedParser().parse(data) == Self.slow.parse(data))
    }

    static let tricky: [String] = [
        // escapes, non-ASCII text, surrogate pairs
        #"{"id":"e1","properties":{"place":"caf\u00e9 \"quoted\" \\ \/ \n tab\t","title":"Höfn 😀 \ud83d\ude00"},"geometry":{"coordinates":[1,2,3]}}"#,
        #"{"id":"e2","properties":{"url":"https:\/\/example.org\/a\/b","title":"\u00e9\b\f\r\u0000\uffff\u20ac","place":"\\"},"geometry":{"coordinates":[1,2,3]}}"#,
        // numbers: exponents, negative zero, long fractions, large and small values
        #"{"id":"n1","properties":{"mag":-0.0,"time":1.7e12,"updated":1700000000123,"cdi":1E-3,"mmi":3.14159265358979323846},"geometry":{"coordinates":[-179.99999999999999,89.123456789012345,-2.5e-1]}}"#,
        // numeric id, boolean and integer tsunami, nulls everywhere, unknown members of every kind
        #"{"id":12345,"properties":{"tsunami":true,"felt":null,"extra":{"a":[1,{"b":null},"x"],"c":[]},"tz":-480},"geometry":{"type":"Point","coordinates":[1,2,3],"bbox":[]}}"#,
        #"{"id":"t0","properties":{"tsunami":0,"sig":0},"geometry":{"coordinates":[1,2,3]}}"#,
        // bad features the parser skips: null depth, null geometry, no id
        #"{"id":"nd","geometry":{"coordinates":[1,2,null]}}"#,
        #"{"id":"ng","geometry":null,"properties":null}"#,
        #"{"geometry":{"coordinates":[1,2,3]}}"#,
    ]

    @Test("tricky but valid features read the same both ways", arguments: tricky)
    func trickyFeatures(feature: String) throws {
        let text =
            #"{"type":"FeatureCollection","metadata":{"count":1,"generated":1700000000000},"features":[\#(feature)]}"#
        #expect(Self.scans(text))
        #expect(try FeedParser().parse(Data(text.utf8)) == Self.slow.parse(Data(text.utf8)))
    }

    @Test(
        "the scanner gives way to JSONDecoder for what it does not read exactly",
        arguments: [
            #"{"type":"FeatureCollection","features":[{"id":"a","properties":{"mag":"4.5"},"geometry":{"coordinates":[1,2,3]}}]}"#,
            #"{"type":"FeatureCollection","features":[1,]}"#,
            #"{"type":"Feature","id":"x","properties":{}}"#,
            #"{"type":"FeatureCollection","features":[{"id":1.5}]}"#,
            #"{"type":"FeatureCollection","features":[]} x"#,
            #"{"type":"FeatureCollection","features":[{"id":"a","properties":{"tz":4.5}}]}"#,
            #"{"type":"FeatureCollection","features":[{"id":"a","geometry":{"coordinates":[01,2,3]}}]}"#,
            #"{"type":"FeatureCollection","features":[{"id":"a\u12"}]}"#,
            #"{"type":"FeatureCollection","features":[{"id":"a\q"}]}"#,
            #"{"type":"FeatureCollection","features":[{"id":"a\udc00b"}]}"#,
            #"{"type":"FeatureCollection","features":[{"id":"a\ud83d b"}]}"#,
            #"{"type":"FeatureCollection","features":[{"id":"a\ud83d\u0041"}]}"#,
            #"{"type":"FeatureCollection","features":[{"id":"\/\ud83d"}]}"#,
            #"{"type":"FeatureCollection","features":[{"id":"a\"}]}"#,
        ])
    func givesWay(text: String) {
        #expect(!Self.scans(text))
    }
}

/// Big features arrays are read in two halves at once; the result is exactly that of one pass.
@Suite("FeedScanner halves")
struct FeedScannerHalvesTests {
    /// The ids of the features `FeedScanner` reads from `text`, split at `split` when given; `nil` when it
    /// gives way to `JSONDecoder`.
    static func ids(_ text: String, splittingAt split: Int? = nil) -> [String?]? {
        Array(text.utf8).withUnsafeBufferPointer { bytes in
            FeedScanner.scan(bytes, splittingAt: split)?.features?.map { entry in
                if case .feature(let feature) = entry { return feature.id }
                return "unreadable"
            }
        }
    }

    /// The byte offset of `marker` in `text`, plus `plus`.
    static func offset(of marker: String, in text: String, plus: Int = 0) throws -> Int {
        let range = try #require(text.range(of: marker))
        return text.utf8.distance(from: text.utf8.startIndex, to: range.lowerBound) + plus
    }

    static func feature(_ id: String, properties: String = #""mag":1.5"#) -> String {
        #"{"type":"Feature","properties":{\#(properties)},"geometry":{"type":"Point","coordinates":[1,2,3]},"id":"\#(id)"}"#
    }

    static func collection(_ features: [String]) -> String {
        #"{"type":"FeatureCollection","metadata":{"count":\#(features.count)},"features":["#
            + features.joined(separator: ",") + "]}"
    }

    @Test("a feed of more than a megabyte is split, and reads the same as with JSONDecoder")
    func bigFeed() throws {
        let data = SampleFeed.geoJSON(count: 4_000)
        try #require(data.count > FeedScanner.parallelMinimumBytes)
        let split = data.withUnsafeBytes { FeedScanner.splitPoint($0.bindMemory(to: UInt8.self), from: 0) }
        #expect(split != nil, "the sample feed separates its features as the USGS does")
        #expect(try FeedParser().parse(data) == FeedScannerTests.slow.parse(data))
    }

    @Test("a feed of thousands of features, bad ones in both halves: converted in order, as in one pass")
    func bigFeedWithBadFeatures() throws {
        let count = FeedParser.parallelConversionMinimum + 100
        let bad: Set = [3, count / 2 - 1, count / 2, count - 1]
        let features = (0..<count).map { index in
            bad.contains(index)
                ? #"{"type":"Feature","geometry":{"type":"Point","coordinates":[1,2,null]},"id":"e\#(index)"}"#
                : Self.feature("e\(index)")
        }
        let data = Data(Self.collection(features).utf8)
        let feed = try FeedParser().parse(data)
        #expect(feed.earthquakes.map(\.id) == (0..<count).filter { !bad.contains($0) }.map { "e\($0)" })
        #expect(feed.skippedFeatures.map(\.index) == bad.sorted())
        #expect(feed.skippedFeatures.map(\.id) == bad.sorted().map { "e\($0)" })
        #expect(try feed == FeedScannerTests.slow.parse(data))
        // Strict: the first bad feature in the feed's order is the one reported, whichever half it is in.
        for first in [3, count / 2, count - 1] {
            let onlyLater = features.enumerated().map { index, text in
                bad.contains(index) && index < first ? Self.feature("e\(index)") : text
            }
            let error = #expect(throws: FeedError.self) {
                try FeedParser(strict: true).parse(Data(Self.collection(onlyLater).utf8))
            }
            #expect(error?.description.contains("\"e\(first)\"") == true, "\(String(describing: error))")
        }
    }

    @Test("a split where a feature starts gives the features of one pass, in order")
    func splitAtFeature() throws {
        let text = Self.collection(["a", "b", "c", "d"].map { Self.feature($0) })
        let split = try Self.offset(
            of:
                #",{"type":"Feature","properties":{"mag":1.5},"geometry":{"type":"Point","coordinates":[1,2,3]},"id":"c""#,
            in: text, plus: 1)
        #expect(Self.ids(text, splittingAt: split) == ["a", "b", "c", "d"])
        #expect(Self.ids(text) == ["a", "b", "c", "d"])
    }

    @Test("a split inside a nested value (a guess that was wrong) is not trusted")
    func splitInsideFeature() throws {
        let nested = #""products":[{"type":"Feature","id":"inner1"},{"type":"Feature","id":"inner2"}]"#
        let text = Self.collection([Self.feature("a"), Self.feature("b", properties: nested), Self.feature("c")])
        // Just after the comma between the two nested objects: the pattern the guess looks for.
        let split = try Self.offset(of: #",{"type":"Feature","id":"inner2""#, in: text, plus: 1)
        #expect(Self.ids(text, splittingAt: split) == ["a", "b", "c"])
    }

    @Test("a second half that the scanner cannot read makes the whole scan give way to JSONDecoder")
    func secondHalfGivesWay() throws {
        let text = Self.collection([
            Self.feature("a"), Self.feature("b"), Self.feature("c", properties: #""mag":"4.5""#),
        ])
        let split = try Self.offset(
            of:
                #",{"type":"Feature","properties":{"mag":1.5},"geometry":{"type":"Point","coordinates":[1,2,3]},"id":"b""#,
            in: text, plus: 1)
        #expect(Self.ids(text, splittingAt: split) == nil)
        #expect(Self.ids(text) == nil)
    }

    @Test("an empty features array is read without a split")
    func emptyArray() {
        #expect(Self.ids(Self.collection([])) == [])
    }
}
