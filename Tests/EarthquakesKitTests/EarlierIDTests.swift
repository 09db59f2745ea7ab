import BatonTesting
import EarthquakesTestData
import Foundation
import GRDB
import Testing

@testable import EarthquakesKit

/// The USGS changes an event's preferred id when another network's solution is preferred, and lists
/// every id the event had in `ids` (",ci100,us200,"). A probe (7 December 2026) found the same event
/// stored twice, once under each id: 307 of the 1,349 features of a recorded month list several ids.
@Suite("Import: an event under an earlier id is the same event")
struct EarlierIDTests {
    static func feature(_ id: String, ids: String?, magnitude: Double, updated: Int64, extra: String = "") -> String {
        let list = ids.map { #","ids":"\#($0)""# } ?? ""
        return #"{"type":"Feature","properties":{"mag":\#(magnitude),"place":"10 km N of Somewhere","#
            + #""time":1700000000000,"updated":\#(updated),"type":"earthquake"\#(list)\#(extra)},"#
            + #""geometry":{"type":"Point","coordinates":[-117.5,35.25,5]},"id":"\#(id)"}"#
    }

    static func feed(_ features: String...) -> Data {
        Data(
            (#"{"type":"FeatureCollection","metadata":{"count":\#(features.count)},"#
                + #""features":[\#(features.joined(separator: ","))]}"#).utf8)
    }

    static func importing(_ data: Data, into store: EarthquakeStore) throws -> ImportSummary {
        try store.importFeed(try store.parseForImport(data, parser: FeedParser()))
    }

    /// A store holding "ci100" (magnitude 4.1, no other id) updated at `updated`.
    static func storeHoldingCI100(updated: Int64) throws -> EarthquakeStore {
        let store = try EarthquakeStore.inMemory()
        _ = try importing(feed(feature("ci100", ids: ",ci100,", magnitude: 4.1, updated: updated)), into: store)
        return store
    }

    @Test(
        "a newer copy under a new preferred id replaces the row of the earlier id, and an older feed does not bring it back"
    )
    func replacesTheEarlierRow() throws {
        let store = try EarthquakeStore.inMemory()
        let first = Self.feed(Self.feature("ci100", ids: ",ci100,", magnitude: 4.1, updated: 1_700_000_100_000))
        _ = try Self.importing(first, into: store)
        let second = Self.feed(
            Self.feature("us200", ids: ",ci100,us200,", magnitude: 4.3, updated: 1_700_000_500_000))
        let summary = try Self.importing(second, into: store)
        #expect(summary.inserted == 1 && summary.merged == 1, "\(summary)")
        #expect(summary.description.contains("1 stored under an earlier id replaced"), "\(summary)")
        #expect(try store.list().map(\.id) == ["us200"])

        // The older feed again: its copy under the earlier id is older than what replaced it.
        let again = try Self.importing(first, into: store)
        #expect(again.unchanged == 1 && again.inserted == 0, "\(again)")
        #expect(try store.list().map(\.id) == ["us200"])

        // The USGS prefers the first network again, with a newer copy: it replaces the other.
        let back = Self.feed(
            Self.feature("ci100", ids: ",us200,ci100,", magnitude: 4.2, updated: 1_700_000_900_000))
        let third = try Self.importing(back, into: store)
        #expect(third.inserted == 1 && third.merged == 1, "\(third)")
        #expect(try store.list().map(\.id) == ["ci100"])
        #expect(try store.list().first?.magnitude == 4.2)
    }

    @Test("a stored copy newer than the feature that lists its id is kept")
    func aNewerStoredCopyIsKept() throws {
        let store = try Self.storeHoldingCI100(updated: 1_700_000_900_000)
        let older = try Self.importing(
            Self.feed(Self.feature("us200", ids: ",ci100,us200,", magnitude: 4.3, updated: 1_700_000_500_000)),
            into: store)
        #expect(older.merged == 0, "\(older)")
        #expect(try store.list().map(\.id).sorted() == ["ci100", "us200"])
    }

    @Test("the full parse reads ids as the scanner does (a repeated member sends a feature to it)")
    func bothParsePaths() throws {
        let store = try EarthquakeStore.inMemory()
        _ = try Self.importing(
            Self.feed(Self.feature("ci100", ids: nil, magnitude: 4.1, updated: 1_700_000_100_000)), into: store)
        // `"net"` twice: the scanner gives way to JSONDecoder for this feed.
        let repeated = Self.feature(
            "us200", ids: ",ci100,us200,", magnitude: 4.3, updated: 1_700_000_500_000, extra: #","net":"us","net":"us""#
        )
        let summary = try Self.importing(Self.feed(repeated), into: store)
        #expect(summary.merged == 1, "\(summary)")
        #expect(try store.list().map(\.id) == ["us200"])
        // An `ids` that is not text is no reason to skip the event.
        let odd = Self.feature("nc300", ids: nil, magnitude: 2.0, updated: 1_700_000_500_000, extra: #","ids":42"#)
        #expect(try Self.importing(Self.feed(odd), into: store).inserted == 1)
    }

    /// A review: the merge ran even when a recorded deletion kept the feature out, and deleted the row
    /// it stood for; with no `updated` time it also removed a stored copy that had one.
    @Test("a feature kept out by a recorded deletion, or without an updated time, removes nothing")
    func nothingRemovedByAFeatureThatIsNotStored() throws {
        let store = try EarthquakeStore.inMemory()
        _ = try Self.importing(
            Self.feed(
                Self.feature("ci100", ids: ",ci100,", magnitude: 4.1, updated: 1_700_000_900_000),
                Self.feature(
                    "us200", ids: nil, magnitude: 4.0, updated: 1_700_000_100_000, extra: #","status":"deleted""#)
            ), into: store)
        #expect(try store.list().map(\.id) == ["ci100"])
        // An old copy of the deleted event, listing the stored one's id: kept out, and ci100 stays.
        let stale = try Self.importing(
            Self.feed(Self.feature("us200", ids: ",us200,ci100,", magnitude: 4.0, updated: 1_700_000_050_000)),
            into: store)
        #expect(stale.merged == 0, "\(stale)")
        #expect(try store.list().map(\.id) == ["ci100"])
        // A copy with no time cannot be shown newer than a stored copy with one.
        let untimed =
            #"{"type":"FeatureCollection","metadata":{"count":1},"features":[{"type":"Feature","#
            + #""properties":{"mag":4.2,"time":1700000000000,"ids":",ci100,nc300,"},"#
            + #""geometry":{"type":"Point","coordinates":[-117.5,35.25,5]},"id":"nc300"}]}"#
        let third = try Self.importing(Data(untimed.utf8), into: store)
        #expect(third.merged == 0 && third.inserted == 1, "\(third)")
        #expect(try store.list().map(\.id).sorted() == ["ci100", "nc300"])
    }

    @Test("a deleted event's rows under its earlier ids go too, and a later feature of the feed under one stays out")
    func deletionsAndLaterFeatures() throws {
        let store = try Self.storeHoldingCI100(updated: 1_700_000_100_000)
        let deleted = try Self.importing(
            Self.feed(
                Self.feature(
                    "us200", ids: ",ci100,us200,", magnitude: 4.3, updated: 1_700_000_500_000,
                    extra: #","status":"deleted""#)), into: store)
        #expect(deleted.merged == 1, "\(deleted)")
        #expect(try store.list().isEmpty)

        // In one feed into an empty store: the new id first, then an older copy under the earlier one.
        let fresh = try EarthquakeStore.inMemory()
        let both = try Self.importing(
            Self.feed(
                Self.feature("us200", ids: ",ci100,us200,", magnitude: 4.3, updated: 1_700_000_500_000),
                Self.feature("ci100", ids: ",ci100,", magnitude: 4.1, updated: 1_700_000_100_000)), into: fresh)
        #expect(try fresh.list().map(\.id) == ["us200"], "\(both)")
    }

    /// A watch alerts once per event and id: when the USGS changed an event's id, the event was news
    /// again under the new one, and a watch alerted twice for one earthquake.
    @Test("a watch's alert of an event moves to its new id: not delivered twice")
    func alertsFollowTheEvent() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("quakes.sqlite")
        let store = try EarthquakeStore(path: path)
        let now = Date()
        let time = Int64((now.timeIntervalSince1970 - 3_600) * 1000)
        func feature(_ id: String, ids: String, magnitude: Double, updated: Int64) -> String {
            #"{"type":"Feature","properties":{"mag":\#(magnitude),"place":"near","time":\#(time),"#
                + #""updated":\#(updated),"type":"earthquake","ids":"\#(ids)"},"#
                + #""geometry":{"type":"Point","coordinates":[-117.5,35.25,5]},"id":"\#(id)"}"#
        }
        func decide() throws -> EarthquakeStore.AlertDecision {
            try DatabaseQueue(path: path).write { db in
                try store.decideAlerts(watch: "w", filter: EarthquakeFilter(), freshWithin: 86_400, in: db)
            }
        }
        #expect(try decide().started)
        _ = try Self.importing(
            Self.feed(feature("ci100", ids: ",ci100,", magnitude: 4.1, updated: time + 1)), into: store)
        #expect(try decide().queued == 1)
        #expect(try store.pendingAlerts(watch: "w", maxAttempts: 3).map(\.id) == ["ci100"])
        try store.recordAlert(watch: "w", id: "ci100", deliveredAt: now)

        let merged = try Self.importing(
            Self.feed(feature("us200", ids: ",ci100,us200,", magnitude: 4.3, updated: time + 2)), into: store)
        #expect(merged.merged == 1, "\(merged)")
        #expect(try decide().queued == 0)
        #expect(try store.pendingAlerts(watch: "w", maxAttempts: 3).isEmpty)
        #expect(try store.alertCounts(watch: "w", maxAttempts: 3).delivered == 1)

        // An alert queued but not delivered yet is delivered once, under the new id.
        _ = try Self.importing(
            Self.feed(feature("nc300", ids: ",nc300,", magnitude: 3.0, updated: time + 3)), into: store)
        #expect(try decide().queued == 1)
        _ = try Self.importing(
            Self.feed(feature("us400", ids: ",nc300,us400,", magnitude: 3.1, updated: time + 4)), into: store)
        #expect(try decide().queued == 0)
        #expect(try store.pendingAlerts(watch: "w", maxAttempts: 3).map(\.id) == ["us400"])
    }

    @Test("ids are split on commas, trimmed, kept once, without the event's own")
    func parsing() {
        #expect(Earthquake.OtherIDs(",ci100, us200 ,,ci100,", excluding: "us200").ids == ["ci100"])
        #expect(Earthquake.OtherIDs(nil, excluding: "x").ids.isEmpty)
        #expect(Earthquake.OtherIDs(",x,", excluding: "x").ids.isEmpty)
    }
}
