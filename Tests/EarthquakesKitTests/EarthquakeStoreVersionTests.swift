import BatonTesting
import Foundation
import GRDB
import Testing

@testable import EarthquakesKit

/// Which copy of an event an import keeps: `updated` times and USGS deletions.
@Suite("EarthquakeStore.importFeed: newer copies and deletions", .offThePool)
struct EarthquakeStoreVersionTests {
    static func copy(_ quake: Earthquake, magnitude: Double, updated: TimeInterval?) -> Earthquake {
        var copy = quake
        copy.magnitude = magnitude
        copy.updated = updated.map { Quakes.reference.addingTimeInterval($0) }
        return copy
    }

    @Test("an older copy of an event does not overwrite the stored newer one")
    func olderCopyKeepsTheStoredRow() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.4, updated: 200)])
        let summary = try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.1, updated: 100)])
        #expect(summary == ImportSummary(unchanged: 1))
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.4)
        // A newer copy replaces it.
        #expect(try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.5, updated: 300)]).updated == 1)
        // One without an updated time does not (a trimmed feed wiped the fields it lacked), as within a
        // feed; a deletion without one still removes it.
        var trimmed = Self.copy(Quakes.tokyo, magnitude: 6.6, updated: nil)
        trimmed.magnitudeType = nil
        #expect(try store.importFeed([trimmed]) == ImportSummary(unchanged: 1))
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.5)
        #expect(try store.earthquake(id: "tokyo")?.magnitudeType == Quakes.tokyo.magnitudeType)
        // Nor does one whose updated time is no clock's reading (more than a day ahead): unknown.
        var ahead = Self.copy(Quakes.tokyo, magnitude: 6.7, updated: nil)
        ahead.updated = Date().addingTimeInterval(3 * 86_400)
        ahead.magnitudeType = nil
        #expect(try store.importFeed([ahead]) == ImportSummary(unchanged: 1))
        #expect(try store.earthquake(id: "tokyo")?.magnitudeType == Quakes.tokyo.magnitudeType)
        // A row stored without an updated time is replaced by any copy.
        try store.importFeed([Self.copy(Quakes.sanFrancisco, magnitude: 4.0, updated: nil)])
        #expect(try store.importFeed([Self.copy(Quakes.sanFrancisco, magnitude: 4.2, updated: nil)]).updated == 1)
        #expect(try store.importFeed([Self.copy(Quakes.sanFrancisco, magnitude: 4.3, updated: 10)]).updated == 1)
        var gone = Self.copy(Quakes.tokyo, magnitude: 6.6, updated: nil)
        gone.status = "deleted"
        #expect(try store.importFeed([gone]).removed == 1)
    }

    @Test("within one feed the newest copy of an id wins, whatever its position; on a tie the last")
    func newestCopyInOneFeed() throws {
        let store = try EarthquakeStore.inMemory()
        let summary = try store.importFeed([
            Self.copy(Quakes.tokyo, magnitude: 6.4, updated: 200),
            Self.copy(Quakes.tokyo, magnitude: 6.1, updated: 100),
            Self.copy(Quakes.sanFrancisco, magnitude: 4.0, updated: 50),
            Self.copy(Quakes.sanFrancisco, magnitude: 4.5, updated: 50),
        ])
        #expect(summary == ImportSummary(inserted: 2, duplicates: 2, duplicateIDs: ["tokyo", "sf"]))
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.4)
        #expect(try store.earthquake(id: "sf")?.magnitude == 4.5)
    }

    @Test("an event marked deleted is not stored, removes its stored copy, and is counted")
    func deletedEvents() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed([Quakes.tokyo, Quakes.sanFrancisco])
        var gone = Quakes.tokyo
        gone.status = "deleted"
        var neverStored = Quakes.anchorage
        neverStored.status = "DELETED"
        let summary = try store.importFeed([gone, neverStored, Quakes.sanFrancisco])
        #expect(summary == ImportSummary(unchanged: 1, deleted: 2, removed: 1))
        #expect(summary.total == 1)
        #expect(try store.earthquake(id: "tokyo") == nil)
        #expect(try store.earthquake(id: "anchorage") == nil)
        #expect(try store.count() == 1)
    }

    /// A deletion kept nothing of the event, so a stale or saved feed imported after it stored the event
    /// again (a hostile-feed probe, 7 December 2026).
    @Test("a copy not newer than a deletion does not store the event again; a newer one does")
    func deletionOutlivesOlderCopies() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.1, updated: 100)])
        var gone = Self.copy(Quakes.tokyo, magnitude: 6.1, updated: 200)
        gone.status = "deleted"
        #expect(try store.importFeed([gone]) == ImportSummary(deleted: 1, removed: 1))
        // The copy the deletion replaced, again (a saved feed), and one as old as the deletion.
        #expect(
            try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.1, updated: 100)]) == ImportSummary(unchanged: 1)
        )
        #expect(
            try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.1, updated: 200)]) == ImportSummary(unchanged: 1)
        )
        #expect(
            try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.1, updated: nil)]) == ImportSummary(unchanged: 1)
        )
        #expect(try store.earthquake(id: "tokyo") == nil)
        // A deletion of an event never stored holds too; an older deletion does not move it back.
        var never = Self.copy(Quakes.anchorage, magnitude: 5, updated: 500)
        never.status = "deleted"
        var older = never
        older.updated = Quakes.reference.addingTimeInterval(50)
        try store.importFeed([never])
        try store.importFeed([older])
        #expect(try store.importFeed([Self.copy(Quakes.anchorage, magnitude: 5, updated: 400)]).unchanged == 1)
        #expect(try store.earthquake(id: "anchorage") == nil)
        // A copy newer than the deletion (the USGS restored the event) is stored, and the deletion forgotten.
        #expect(try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.3, updated: 300)]).inserted == 1)
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.3)
        try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.2, updated: 250)])
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.3, "an older copy than the stored one, as before")
        // A deletion with no time yields to a copy with one, not to a copy without.
        var untimed = Quakes.quito
        untimed.status = "deleted"
        try store.importFeed([untimed])
        #expect(try store.importFeed([Quakes.quito]).unchanged == 1)
        #expect(try store.importFeed([Self.copy(Quakes.quito, magnitude: 1, updated: 10)]).inserted == 1)
    }

    /// The record of deletions was never pruned: it grew with every deletion a refresh ever saw.
    @Test("pruning before a date forgets the deletions made before it, and keeps the later ones")
    func pruneForgetsOldDeletions() throws {
        let store = try EarthquakeStore.inMemory()
        var early = Self.copy(Quakes.tokyo, magnitude: 6.1, updated: 100)
        early.status = "deleted"
        var late = Self.copy(Quakes.anchorage, magnitude: 5, updated: 500)
        late.status = "deleted"
        var untimed = Quakes.quito
        untimed.status = "deleted"
        try store.importFeed([early, late, untimed])
        try store.deleteEarthquakes(before: Quakes.reference.addingTimeInterval(300))
        let kept = try store.read("read the deletions of") { db in
            try String.fetchAll(db, sql: "SELECT id FROM \(EarthquakeStore.deletedTable) ORDER BY id")
        }
        #expect(kept == ["anchorage", "quito"])
        // The later deletion still holds against an older copy.
        #expect(try store.importFeed([Self.copy(Quakes.anchorage, magnitude: 5, updated: 400)]).unchanged == 1)
    }

    @Test("a feed of deleted events parsed from GeoJSON imports none of them")
    func deletedFromAFeed() throws {
        let json = """
            {"type":"FeatureCollection","features":[
            {"type":"Feature","id":"a","properties":{"mag":2,"time":1700000000000,"status":"deleted"},
             "geometry":{"type":"Point","coordinates":[1,2,3]}},
            {"type":"Feature","id":"b","properties":{"mag":2,"time":1700000000000,"status":"reviewed"},
             "geometry":{"type":"Point","coordinates":[1,2,3]}}]}
            """
        let store = try EarthquakeStore.inMemory()
        let summary = try store.importFeed(try FeedParser().parse(Data(json.utf8)))
        #expect(summary.inserted == 1)
        #expect(summary.deleted == 1)
        #expect(try store.earthquake(id: "a") == nil)
    }

    /// A row stored with an `updated` time in the year 52 000 (1.6e15 ms, from the old seconds bug) made
    /// every later copy "older": the bad row stayed for good. Such a time is unknown for the comparison;
    /// an incoming one is stored as unknown.
    @Test("an updated time far in the future blocks no correction, and is stored as unknown")
    func futureUpdatedIsUnknown() throws {
        let store = try EarthquakeStore.inMemory()
        var bad = Self.copy(Quakes.tokyo, magnitude: 9.9, updated: nil)
        bad.updated = Date(usgsMilliseconds: 1_600_000_000_000_000)
        try store.importFeed([bad])
        #expect(try store.earthquake(id: "tokyo")?.updated == bad.updated, "kept as given")
        // It blocks no correction, and a far-future copy replaces no known one.
        let known = Self.copy(Quakes.tokyo, magnitude: 6.0, updated: 50)
        #expect(try store.importFeed([known]).updated == 1)
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.0)
        // A row such a time was stored in by an older version.
        try store.write("set updated in") { db in
            try db.execute(sql: "UPDATE earthquake SET updated = 1600000000000000 WHERE id = 'tokyo'")
        }
        let summary = try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.1, updated: 100)])
        #expect(summary.updated == 1, "\(summary)")
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.1)
        // An incoming far-future copy is no newer than a known time either.
        var future = Self.copy(Quakes.tokyo, magnitude: 9.8, updated: nil)
        future.updated = Date().addingTimeInterval(3 * 86_400)
        #expect(try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.1, updated: 100), future]).duplicates == 1)
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.1, "the known time wins within a feed")
    }

    /// Copies A (updated T+5s), B (no updated), C (T+3s): B replaced A (unknown), then C replaced B, so
    /// the oldest known copy was stored. Copies are ranked: the latest known time wins; unknown below.
    @Test("the newest-copy rule is transitive: a copy without updated ranks below every copy with one")
    func unknownUpdatedRanksLowest() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed([
            Self.copy(Quakes.tokyo, magnitude: 6.5, updated: 5),
            Self.copy(Quakes.tokyo, magnitude: 6.0, updated: nil),
            Self.copy(Quakes.tokyo, magnitude: 6.3, updated: 3),
            Self.copy(Quakes.sanFrancisco, magnitude: 4.0, updated: nil),
            Self.copy(Quakes.sanFrancisco, magnitude: 4.1, updated: nil),
        ])
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.5)
        #expect(try store.earthquake(id: "sf")?.magnitude == 4.1, "among unknown times, the last")
    }
}
