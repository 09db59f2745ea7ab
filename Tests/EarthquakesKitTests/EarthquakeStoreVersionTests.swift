import EarthquakesKit
import Foundation
import Testing

/// Which copy of an event an import keeps: `updated` times and USGS deletions.
@Suite("EarthquakeStore.importFeed: newer copies and deletions")
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
        // A newer copy, or one whose updated time is unknown, still replaces it.
        #expect(try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.5, updated: 300)]).updated == 1)
        #expect(try store.importFeed([Self.copy(Quakes.tokyo, magnitude: 6.6, updated: nil)]).updated == 1)
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.6)
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
}
