import BatonTesting
import Foundation
import Testing

@testable import EarthquakesKit

@Suite("FeedParser time units", .offThePool)
struct FeedParserTimeUnitsTests {
    typealias Unit = FeedParser.TimeUnit

    @Test(
        "detects seconds only when every time is small and generated does not contradict",
        arguments: [
            ([Double](), nil as Double?, Unit.milliseconds),
            ([1_761_765_129_224, 1_761_764_597_889], 1_761_770_396_000, .milliseconds),  // USGS, 2025
            ([1_688_419_585, 1_687_819_625], 1_688_421_209_000, .seconds),  // rewritten feed, 2023
            ([1_688_419_585, 1_687_819_625], nil, .seconds),  // no generated: magnitude alone decides
            ([1_688_419_585, 1_761_765_129_224], nil, .milliseconds),  // mixed: milliseconds
            ([1_000_000_000, 1_500_000_000], 1_761_770_396_000, .seconds),  // 2001 and 2017 in seconds
            ([40_000_000_000, 50_000_000_000], 60_000_000_000, .milliseconds),  // archive of 1971 events in ms
            ([40_000_000_000, 50_000_000_000], 1_761_770_396_000, .milliseconds),  // as seconds: year 3200 > 2025
            ([-100_000_000_000, 1_000], nil, .milliseconds),  // 1966 in ms: large magnitude
        ]
    )
    func detect(times: [Double], generated: Double?, expected: Unit) {
        #expect(FeedParser.detectTimeUnit(times: times, generatedMilliseconds: generated) == expected)
    }

    /// Before 1970 in milliseconds: the probe's 1968 event came out in the year 480, its `updated` time
    /// (2020, in milliseconds) multiplied by a thousand.
    @Test(
        "a pre-1970 feed in milliseconds is not read as seconds",
        arguments: [
            ([-47_000_000_000], [Double](), nil as Double?),  // 1968 in ms; as seconds the year 480
            ([-1_000_000_000], [1_600_000_000_000], nil),  // updated in ms (2020) says milliseconds
            ([-1_000_000_000], [-900_000_000], nil),  // an update before 1970 in seconds: milliseconds
            ([40_000_000], [50_000_000], 45_000_000_000),  // as seconds, updated after generated
        ]
    )
    func preEpochMilliseconds(times: [Double], updated: [Double], generated: Double?) {
        #expect(
            FeedParser.detectTimeUnit(times: times, updated: updated, generatedMilliseconds: generated)
                == .milliseconds)
    }

    @Test("a feed in seconds with a historical event and updates in seconds stays seconds")
    func historicalSeconds() {
        // 1906-04-18 (San Francisco) and 2001, updated in 2020, all in seconds.
        #expect(
            FeedParser.detectTimeUnit(
                times: [-2_010_000_000, 1_000_000_000], updated: [1_600_000_000, 1_600_000_000],
                generatedMilliseconds: 1_761_770_396_000) == .seconds)
    }

    @Test("a 1968 feed in milliseconds keeps its times")
    func parsedPreEpochFeed() throws {
        let json = """
            {"type":"FeatureCollection","metadata":{"generated":1761770396000,"count":1},"features":[
            {"type":"Feature","id":"old1","properties":{"mag":5,"time":-47000000000,"updated":1600000000000},
             "geometry":{"type":"Point","coordinates":[10,20,5]}}]}
            """
        let feed = try FeedParser().parse(Data(json.utf8))
        let quake = try #require(feed.earthquakes.first)
        #expect(quake.time == Date(timeIntervalSince1970: -47_000_000))
        #expect(quake.updated == Date(timeIntervalSince1970: 1_600_000_000))
        #expect(feed.warnings.isEmpty)
    }

    /// A 1971 archive in milliseconds with no `metadata.generated`, revised in 2020 (milliseconds): read
    /// as seconds its events fell in the years 3200–3500, long after their own revisions.
    @Test("a 1971 millisecond archive without generated keeps its times")
    func archiveWithoutGenerated() throws {
        let json = """
            {"type":"FeatureCollection","features":[
            {"type":"Feature","id":"a","properties":{"mag":5,"time":40000000000,"updated":1600000000000},
             "geometry":{"type":"Point","coordinates":[10,20,5]}},
            {"type":"Feature","id":"b","properties":{"mag":4,"time":50000000000},
             "geometry":{"type":"Point","coordinates":[10,20,5]}}]}
            """
        // Both paths: the scanner's, and the full decoding's (which a document without `type` takes).
        let untyped = json.replacingOccurrences(of: #"{"type":"FeatureCollection","#, with: "{")
        for (text, warnings) in [(json, [FeedWarning]()), (untyped, [.missingDocumentType])] {
            let feed = try FeedParser().parse(Data(text.utf8))
            #expect(feed.earthquakes.map(\.time) == [40_000_000, 50_000_000].map { Date(timeIntervalSince1970: $0) })
            #expect(!feed.hadTimesInSeconds)
            #expect(feed.warnings == warnings)
        }
        #expect(FeedParser.timeAfterRevisionAsSeconds(time: 40_000_000_000, updated: 1_600_000_000_000))
        // A rewritten feed in seconds with revisions in milliseconds is consistent: no contradiction.
        #expect(!FeedParser.timeAfterRevisionAsSeconds(time: 1_700_000_000, updated: 1_700_000_500_000))
        #expect(!FeedParser.timeAfterRevisionAsSeconds(time: 40_000_000_000, updated: nil))
        #expect(!FeedParser.timeAfterRevisionAsSeconds(time: 40_000_000_000, updated: 45_000_000_000))
    }

    @Test("generated is read as seconds when small")
    func generated() {
        #expect(FeedParser.generatedMilliseconds(nil) == nil)
        #expect(FeedParser.generatedMilliseconds(1_688_421_209) == 1_688_421_209_000)
        #expect(FeedParser.generatedMilliseconds(1_688_421_209_000) == 1_688_421_209_000)
    }

    /// Times in seconds beside `updated` in milliseconds: the whole feed was read as milliseconds (the
    /// 2023 event in 1970-01-20), with no warning. The times' unit comes from the times.
    @Test("times in seconds with updated in milliseconds")
    func mixedUnits() throws {
        let json = """
            {"type":"FeatureCollection","metadata":{"generated":1700000600000,"count":1},"features":[
            {"type":"Feature","id":"m1","properties":{"mag":5,"time":1700000000,"updated":1700000500000},
             "geometry":{"type":"Point","coordinates":[10,20,5]}}]}
            """
        let feed = try FeedParser().parse(Data(json.utf8))
        let quake = try #require(feed.earthquakes.first)
        #expect(quake.time == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(quake.updated == Date(timeIntervalSince1970: 1_700_000_500))
        #expect(feed.hadTimesInSeconds)
        #expect(
            FeedParser.detectTimeUnits(times: [1_700_000_000], updated: [1_700_000_500_000], generatedMilliseconds: nil)
                == FeedParser.TimeUnits(time: .seconds, updated: .seconds))
    }

    /// The per-value guard: an `updated` of 10¹¹ or more is never scaled, whatever the unit; a small one
    /// in the same feed is.
    @Test("an updated value of 1e11 or more is never scaled")
    func largeUpdatedIsNeverScaled() throws {
        let json = """
            {"type":"FeatureCollection","features":[
            {"type":"Feature","id":"a","properties":{"time":1700000000,"updated":1700000500000},
             "geometry":{"type":"Point","coordinates":[10,20,5]}},
            {"type":"Feature","id":"b","properties":{"time":1700000100,"updated":1700000600},
             "geometry":{"type":"Point","coordinates":[10,20,5]}}]}
            """
        let feed = try FeedParser().parse(Data(json.utf8))
        #expect(
            feed.earthquakes.map(\.updated) == [1_700_000_500, 1_700_000_600].map { Date(timeIntervalSince1970: $0) })
        #expect(feed.earthquakes.map(\.time) == [1_700_000_000, 1_700_000_100].map { Date(timeIntervalSince1970: $0) })
        let units = FeedParser.TimeUnits(time: .seconds, updated: .seconds)
        #expect(units.updated(1_700_000_500) == 1_700_000_500_000)
        #expect(units.updated(1_700_000_500_000) == 1_700_000_500_000)
        #expect(units.time(-1_000) == -1_000_000)
    }
}
