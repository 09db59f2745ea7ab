import EarthquakesKit
import Foundation
import GRDB
import Testing

@Suite("EarthquakeStore: opening modes and clear errors")
struct EarthquakeStoreOpeningTests {
    @Test("a read-only store reads, and says it is read-only before and during an import")
    func readOnly() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("quakes.sqlite")
        try EarthquakeStore(path: path).importFeed([Quakes.tokyo])

        let store = try EarthquakeStore(path: path, mode: .readOnly)
        #expect(try store.count() == 1)
        let early = try #require(throws: StoreError.self) { try store.checkWritable() }
        #expect(early.code == .readOnly)
        #expect(early.description.contains("read-only"))
        let late = try #require(throws: StoreError.self) { try store.importFeed([Quakes.sanFrancisco]) }
        #expect(late.code == .readOnly)
        #expect(!late.description.contains("row 0"))
        #expect(try store.count() == 1)
    }

    @Test("a refresh into a read-only database fails before it downloads anything")
    func refreshChecksFirst() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("quakes.sqlite")
        try EarthquakeStore(path: path).importFeed([Quakes.tokyo])
        let store = try EarthquakeStore(path: path, mode: .readOnly)
        // Port 1 on the loopback: a download would fail with a network error, not a store error.
        let get = GetEarthquakes(source: .url(URL(string: "http://127.0.0.1:1/feed.geojson")!), store: store)
        let error = try await #require(throws: StoreError.self) { try await get.run() }
        #expect(error.code == .readOnly)
        #expect(get.jobs.allSatisfy { $0.outcomeIfDecided == nil })
    }

    @Test("closing writes the log into the file: no side file is left, the file alone holds the rows")
    func closeLeavesNoLog() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("quakes.sqlite")
        let store = try EarthquakeStore(path: path)
        try store.importFeed([Quakes.tokyo, Quakes.sanFrancisco])
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))  // open: the rows are in the log
        try store.close()
        try store.close()  // a second close does nothing
        for suffix in ["-wal", "-shm"] {
            #expect(!FileManager.default.fileExists(atPath: path + suffix), "\(suffix) left")
        }
        let error = try #require(throws: StoreError.self) { try store.count() }
        #expect(error.description.contains("closed"), "\(error)")

        let copy = directory.path("copy.sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        #expect(try EarthquakeStore(path: copy, mode: .readOnly).count() == 2)
    }

    @Test("a missing file is an error, not a new database, unless the store may create it")
    func missing() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("typo/quakes.sqlite")
        for mode in [EarthquakeStore.OpenMode.readOnly, .mustExist] {
            let error = try #require(throws: StoreError.self) { try EarthquakeStore(path: path, mode: mode) }
            #expect(error.code == .missing)
            #expect(error.description.contains("there is no such file"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path("typo")))
    }

    @Test("a folder given as the database says it is a folder")
    func folder() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let error = try #require(throws: StoreError.self) { try EarthquakeStore(path: directory.url.path) }
        #expect(error.code == .open)
        #expect(error.description.contains("it is a folder, not a file"))
    }

    @Test("a file that is not a database, or a damaged one, says so and how to recover")
    func corrupt() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("quakes.sqlite")
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: path))
        let error = try #require(throws: StoreError.self) { try EarthquakeStore(path: path) }
        #expect(error.code == .notADatabase)
        #expect(error.description.contains("not a SQLite database"))
        #expect(error.description.contains("move it aside and import the feed again"))
    }

    /// Makes the database `path` with `sql` (another program's), then opens it in every mode: each is
    /// refused as `.foreign`, and the file is left byte for byte. The errors, one per mode.
    static func refusedInEveryMode(_ path: String, made sql: String) throws -> [StoreError] {
        let other = try DatabaseQueue(path: path)
        try other.write { db in try db.execute(sql: sql) }
        try other.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        var errors: [StoreError] = []
        for mode in [EarthquakeStore.OpenMode.createIfMissing, .mustExist, .readOnly] {
            let error = try #require(throws: StoreError.self) { try EarthquakeStore(path: path, mode: mode) }
            #expect(error.code == .foreign, "\(mode)")
            errors.append(error)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the file was changed")
        return errors
    }

    @Test("another program's table named earthquake: refused in every mode, the file left byte for byte")
    func foreignTable() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("other.sqlite")
        for error in try Self.refusedInEveryMode(
            path, made: "CREATE TABLE earthquake (name TEXT, felt_at TEXT); INSERT INTO earthquake VALUES ('x', 'y')")
        {
            #expect(error.description.contains("belongs to something else"), "\(error)")
            #expect(!error.description.contains("already exists"), "\(error)")
            #expect(!error.description.contains("import a feed into it"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "switched to WAL mode")
        // This program's own database (its table made by its migration) still opens.
        let ours = directory.path("ours.sqlite")
        try EarthquakeStore(path: ours).importFeed([Quakes.tokyo])
        #expect(try EarthquakeStore(path: ours, mode: .readOnly).count() == 1)
    }

    /// A refresh added its tables beside another application's: only a table named `earthquake` made the
    /// file another program's. Tables of another program and none of this one's do now; a Baton job
    /// store's own tables do not (the tool keeps its refreshes' jobs beside its events).
    @Test("another program's database without an earthquake table: refused, the file left byte for byte")
    func foreignDatabase() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("app.sqlite")
        for error in try Self.refusedInEveryMode(
            path, made: "CREATE TABLE users (name TEXT); CREATE TABLE orders (id INTEGER)")
        {
            #expect(error.description.contains("another program's tables (orders, users)"), "\(error)")
        }
        // An empty database, and one holding only a Baton job store, are this program's to fill.
        let empty = directory.path("empty.sqlite")
        try DatabaseQueue(path: empty).close()
        try EarthquakeStore(path: empty).importFeed([Quakes.tokyo])
        let jobs = directory.path("jobs.sqlite")
        try DatabaseQueue(path: jobs).write { db in try db.execute(sql: "CREATE TABLE baton_runs (id INTEGER)") }
        try EarthquakeStore(path: jobs).importFeed([Quakes.tokyo])
        #expect(try EarthquakeStore(path: jobs, mode: .readOnly).count() == 1)
    }
}
