import EarthquakesTestData
import Foundation
import Testing

@testable import EarthquakesKit

/// The byte-level scanner reads exactly what `JSONDecoder` reads, and gives way to it for anything else.
@Suite("FeedScanner")
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
        ])
    func givesWay(text: String) {
        #expect(!Self.scans(text))
    }
}
