import BatonTesting
import EarthquakesKit
import EarthquakesTestData
import Foundation
import Testing

@Suite("EarthquakeStore.importFeed", .offThePool)
struct EarthquakeStoreImportTests {
    @Test("a first import inserts everything")
    func insertsNew() throws {
        let store = try EarthquakeStore.inMemory()
        let summary = try store.importFeed(Quakes.all)
        #expect(summary == ImportSummary(inserted: 5, updated: 0, unchanged: 0))
        #expect(summary.description == "5 earthquakes: 5 inserted, 0 updated, 0 unchanged")
        #expect(try store.count() == 5)
    }

    @Test("upsert: changed rows are updated, identical rows left alone, new rows inserted")
    func upsert() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed([Quakes.tokyo, Quakes.sanFrancisco])

        var revised = Quakes.tokyo
        revised.magnitude = 6.3
        revised.status = "reviewed"
        let summary = try store.importFeed([revised, Quakes.sanFrancisco, Quakes.anchorage])
        #expect(summary == ImportSummary(inserted: 1, updated: 1, unchanged: 1))
        #expect(try store.count() == 3)
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.3)
        #expect(try store.earthquake(id: "tokyo")?.status == "reviewed")
    }

    @Test("re-importing the same feed changes nothing")
    func idempotent() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(Quakes.all)
        #expect(try store.importFeed(Quakes.all) == ImportSummary(unchanged: 5))
    }

    @Test("the same id twice in one import: the later one wins, and the summary says so")
    func duplicateInOneImport() throws {
        let store = try EarthquakeStore.inMemory()
        var later = Quakes.tokyo
        later.magnitude = 7
        let summary = try store.importFeed([Quakes.tokyo, Quakes.sanFrancisco, later, Quakes.sanFrancisco])
        #expect(
            summary == ImportSummary(inserted: 2, duplicates: 2, duplicateIDs: ["tokyo", "sf"]))
        #expect(summary.description.contains("2 repeated ids (the newest of each kept: tokyo, sf)"))
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 7)
        #expect(try store.count() == 2)
    }

    @Test("all or nothing: a refused row in the middle leaves the table exactly as it was", arguments: [0, 2, 4])
    func allOrNothing(badIndex: Int) throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed([Quakes.tokyo, Quakes.sanFrancisco])
        let before = try store.list()

        var changedTokyo = Quakes.tokyo
        changedTokyo.magnitude = 1
        var batch = [changedTokyo, Quakes.anchorage, Quakes.quito, Quakes.undated]
        batch.insert(Quakes.make("bad", latitude: 123), at: badIndex)  // violates the latitude CHECK

        let error = try #require(throws: StoreError.self) { try store.importFeed(batch) }
        #expect(error.code == .write)
        #expect(error.description.contains("row \(badIndex) (id \"bad\")"))
        #expect(error.description.contains("CHECK constraint failed"))
        #expect(error.description.contains("Nothing was changed"))
        #expect(try store.list() == before)
        #expect(try store.earthquake(id: "tokyo")?.magnitude == 6.1)
    }

    @Test("all or nothing on a file database, also after reopening")
    func allOrNothingOnDisk() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("quakes.sqlite")
        let store = try EarthquakeStore(path: path)
        try store.importFeed([Quakes.tokyo])

        let batch = [Quakes.sanFrancisco, Quakes.anchorage, Quakes.make("", latitude: 1)]  // empty id
        let error = try #require(throws: StoreError.self) { try store.importFeed(batch) }
        #expect(error.path == path)
        #expect(error.description.contains(path))
        #expect(try EarthquakeStore(path: path).list() == [Quakes.tokyo])
    }

    @Test("a NaN coordinate is refused, not stored as NULL")
    func nanCoordinate() throws {
        let store = try EarthquakeStore.inMemory()
        #expect(throws: StoreError.self) { try store.importFeed([Quakes.make("nan", latitude: .nan)]) }
        #expect(try store.count() == 0)
    }

    @Test("dates keep millisecond precision; finer precision is rounded, and counts as unchanged")
    func millisecondPrecision() throws {
        let store = try EarthquakeStore.inMemory()
        var quake = Quakes.tokyo
        quake.time = Date(timeIntervalSince1970: 1_700_000_000.1234567)
        try store.importFeed([quake])
        #expect(try store.earthquake(id: "tokyo")?.time == Date(timeIntervalSince1970: 1_700_000_000.123))
        #expect(try store.importFeed([quake]) == ImportSummary(unchanged: 1))
    }

    @Test("importing a whole recorded feed", .enabled(if: USGSData.isAvailable, USGSData.skipMessage))
    func recordedFeed() throws {
        let feed = try FeedParser().parse(USGSData.data("2.5_month-2025-10.geojson"))
        let store = try EarthquakeStore.inMemory()
        let clock = ContinuousClock()
        var summary = ImportSummary()
        let first = try clock.measure { summary = try store.importFeed(feed) }
        let firstCounts: [Int] = [summary.inserted, summary.updated, summary.unchanged, summary.duplicates]
        #expect(firstCounts == [1349, 0, 0, 0])
        #expect(summary.earthquakes + summary.otherTypes.values.reduce(0, +) == 1349)
        let second = try clock.measure { summary = try store.importFeed(feed) }
        let secondCounts: [Int] = [summary.inserted, summary.updated, summary.unchanged]
        #expect(secondCounts == [0, 0, 1349])
        print("EarthquakeStore: imported 1349 earthquakes in \(first) (in memory), re-imported unchanged in \(second)")
        #expect(try store.earthquake(id: "ak025dvromz5") == feed.earthquakes.first)
    }
}
