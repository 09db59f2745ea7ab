import EarthquakesKit
import Foundation
import Testing

@Suite("EarthquakeStore: opening, schema, lookups")
struct EarthquakeStoreTests {
    @Test("a new in-memory store is empty")
    func emptyStore() throws {
        let store = try EarthquakeStore.inMemory()
        #expect(try store.count() == 0)
        #expect(try store.earthquake(id: "nope") == nil)
        #expect(store.path == nil)
    }

    @Test("earthquake(id:) returns what was imported, every field intact")
    func roundTrip() throws {
        let store = try EarthquakeStore.inMemory()
        let full = Earthquake(
            id: "us7000abcd", latitude: -20.5, longitude: 178.25, depth: 563.1, magnitude: 6.4,
            magnitudeType: "mww", place: "Fiji region — Höfn-like ünïcode",
            time: Date(timeIntervalSince1970: 1_700_000_000.123),
            updated: Date(timeIntervalSince1970: 1_700_000_900.456), timeZoneOffset: 720, url: "https://example.org/e",
            detailURL: "https://example.org/d", felt: 12, cdi: 3.4, mmi: 4.56, alert: "green", status: "REVIEWED",
            tsunami: true, significance: 630, network: "us", code: "7000abcd", type: "earthquake",
            title: "M 6.4 - Fiji region"
        )
        try store.importFeed([full, Quakes.quito])
        #expect(try store.earthquake(id: "us7000abcd") == full)
        #expect(try store.earthquake(id: "quito") == Quakes.quito)
        #expect(try store.count() == 2)
    }

    @Test("reopening a file database keeps the data and does not re-run the migration")
    func reopenFileDatabase() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("quakes.sqlite")

        do {
            let store = try EarthquakeStore(path: path)
            #expect(store.path == path)
            try store.importFeed(Quakes.all)
        }
        #expect(FileManager.default.fileExists(atPath: path))
        for _ in 0..<2 {
            let reopened = try EarthquakeStore(path: path)
            #expect(try reopened.count() == Quakes.all.count)
            #expect(try reopened.earthquake(id: "tokyo") == Quakes.tokyo)
        }
    }

    @Test("opening in a missing folder names the file and says what to check")
    func missingFolder() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("no/such/folder/quakes.sqlite")
        let error = try #require(throws: StoreError.self) { try EarthquakeStore(path: path) }
        #expect(error.code == .open)
        #expect(error.path == path)
        #expect(error.description.contains(path))
        #expect(error.description.contains("exists and is writable"))
    }

    @Test("a file that is not a database is refused with its path")
    func notADatabase() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("notes.txt")
        try Data(String(repeating: "this is not a SQLite database\n", count: 100).utf8).write(
            to: URL(fileURLWithPath: path))
        let error = try #require(throws: StoreError.self) { try EarthquakeStore(path: path) }
        #expect(error.path == path)
        #expect(error.description.contains(path))
        #expect(error.underlying.contains("not a database"))
    }

    @Test("one store is shared by concurrent tasks (it is Sendable)")
    func concurrentUse() async throws {
        let store = try EarthquakeStore.inMemory()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    let batch = (0..<25).map { Quakes.make("w\(writer)-\($0)", latitude: Double($0)) }
                    try store.importFeed(batch)
                    _ = try store.recent(limit: 5)
                }
            }
            try await group.waitForAll()
        }
        #expect(try store.count() == 200)
    }
}
