import Foundation
import Testing

@testable import EarthquakesKit

/// The USGS sometimes moves an event to another network's id (its preferred origin changes): the next feeds
/// publish it under the new `id`, with the old one still in its `ids` list. The store keeps one row per event.
@Suite("An event whose id changed is one row")
struct ChangedIDTests {
    /// A feature with an `ids` list (`nil`: none), as the USGS writes it.
    static func feature(
        _ id: String, ids: String?, magnitude: Double = 4.2, updated: Int64 = 1_761_700_100_000
    )
        -> String
    {
        let list = ids.map { #""ids":"\#($0)","# } ?? ""
        return #"{"type":"Feature","properties":{"mag":\#(magnitude),"place":"10 km N of Somewhere","#
            + #""time":1761700000000,"updated":\#(updated),"tz":null,\#(list)"status":"reviewed","type":"earthquake"},"#
            + #""geometry":{"type":"Point","coordinates":[-150.25,61.5,30.1]},"id":"\#(id)"}"#
    }

    static func feed(_ features: String...) -> Data {
        Data(
            (#"{"type":"FeatureCollection","metadata":{"generated":1761800000000,"count":\#(features.count)},"#
                + #""features":[\#(features.joined(separator: ",\n"))]}"#).utf8)
    }

    static func ids(_ store: EarthquakeStore) throws -> [String] {
        try store.list().map(\.id).sorted()
    }

    @Test("a later feed listing the stored id in `ids` under a new id replaces the stored row")
    func newIDReplacesOld() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(try FeedParser().parse(Self.feed(Self.feature("ak0251", ids: ",ak0251,"))))
        let moved = try FeedParser().parse(
            Self.feed(
                Self.feature("us7000abcd", ids: ",ak0251,us7000abcd,", magnitude: 4.4, updated: 1_761_700_200_000)))
        let summary = try store.importFeed(moved)
        #expect(try Self.ids(store) == ["us7000abcd"])
        #expect(summary.inserted == 1)
        #expect(summary.replaced == 1)
        #expect(summary.description.contains("1 stored under an older id replaced"))
        #expect(try store.earthquake(id: "us7000abcd")?.magnitude == 4.4)
        // Importing the same feed again changes nothing.
        let again = try store.importFeed(
            try FeedParser().parse(
                Self.feed(
                    Self.feature("us7000abcd", ids: ",ak0251,us7000abcd,", magnitude: 4.4, updated: 1_761_700_200_000)),
                known: try store.knownFeatures()))
        #expect(again == ImportSummary(unchanged: 1))
        #expect(try Self.ids(store) == ["us7000abcd"])
    }

    @Test("the same, through the re-import path that skips known features, with other events unchanged")
    func newIDReplacesOldWhenReimporting() throws {
        let store = try EarthquakeStore.inMemory()
        let other = Self.feature("nc1", ids: ",nc1,")
        try store.importFeed(try FeedParser().parse(Self.feed(other, Self.feature("ak0251", ids: ",ak0251,"))))
        let data = Self.feed(other, Self.feature("us7000abcd", ids: ",us7000abcd,ak0251,", updated: 1_761_700_200_000))
        let feed = try FeedParser().parse(data, known: try store.knownFeatures())
        #expect(feed.undecodedCount == 1)
        let summary = try store.importFeed(feed)
        #expect(summary.replaced == 1 && summary.inserted == 1 && summary.unchanged == 1)
        #expect(try Self.ids(store) == ["nc1", "us7000abcd"])
    }

    @Test("a stored row newer than the feed's copy under another id is kept, and the copy is not stored")
    func olderCopyUnderNewIDIsNotStored() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(
            try FeedParser().parse(
                Self.feed(Self.feature("ak0251", ids: ",ak0251,us7000abcd,", updated: 1_761_700_900_000))))
        let summary = try store.importFeed(
            try FeedParser().parse(
                Self.feed(Self.feature("us7000abcd", ids: ",ak0251,us7000abcd,", updated: 1_761_700_200_000))))
        #expect(summary == ImportSummary(unchanged: 1))
        #expect(try Self.ids(store) == ["ak0251"])
    }

    @Test("an id that is itself an event of the feed is not replaced; a deleted event removes its old id's row")
    func otherIDsInTheFeedAndDeletions() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(
            try FeedParser().parse(
                Self.feed(
                    Self.feature("a1", ids: ",a1,"), Self.feature("b1", ids: ",b1,"), Self.feature("c1", ids: nil))))
        var deleted = Self.feature("c2", ids: ",c1,c2,", updated: 1_761_700_200_000)
        deleted = deleted.replacingOccurrences(of: #""status":"reviewed""#, with: #""status":"deleted""#)
        let summary = try store.importFeed(
            try FeedParser().parse(
                Self.feed(
                    Self.feature("a1", ids: ",a1,b1,"), Self.feature("b1", ids: ",b1,a1,"), deleted,
                    Self.feature("d1", ids: " , d1,,x9 ,"))))
        #expect(try Self.ids(store) == ["a1", "b1", "d1"])
        #expect(summary.replaced == 1 && summary.deleted == 1)
    }

    @Test("an `ids` member of another JSON type is ignored, in both readers")
    func idsOfAnotherType() throws {
        let text = Self.feature("a1", ids: nil).replacingOccurrences(
            of: #""tz":null,"#, with: #""tz":null,"ids":["a1","b1"],"#)
        for parser in [
            FeedParser(),
            {
                var p = FeedParser(); p.usesScanner = false; return p
            }(),
        ] {
            let feed = try parser.parse(Self.feed(text))
            #expect(feed.earthquakes.map(\.id) == ["a1"])
            #expect(feed.warnings.isEmpty)
        }
    }

    @Test("the other ids a feature lists: trimmed, without its own, each once")
    func otherIDsOfAList() {
        #expect(FeedParser.otherIDs(",ak0251,us7000abcd,", of: "us7000abcd") == ["ak0251"])
        #expect(FeedParser.otherIDs(",us7000abcd,", of: "us7000abcd") == [])
        #expect(FeedParser.otherIDs(" a , b,,a,c", of: "c") == ["a", "b"])
        #expect(FeedParser.otherIDs(nil, of: "c") == [])
    }
}
