import Foundation
import GRDB

/// A SQLite database of earthquakes, built on GRDB.
///
/// ```swift
/// let store = try EarthquakeStore(path: "/var/lib/quakes/earthquakes.sqlite")
/// let feed = try FeedParser().parse(data)
/// let summary = try store.importFeed(feed.earthquakes)
/// print(summary)  // "1349 earthquakes: 1349 inserted, 0 updated, 0 unchanged"
/// let strongest = try store.list(minMagnitude: 6, sort: .magnitude)
/// ```
///
/// The schema lives in the table `earthquake` (one row per event id, indexes on `time` and
/// `magnitude`) and is created or upgraded by migrations when the store opens, so opening an
/// existing file again is safe. Times are stored as integer milliseconds since 1970, like the
/// USGS feeds; a ``Earthquake/time`` with sub-millisecond precision comes back rounded.
///
/// Every failure is a ``StoreError`` naming the database file and the operation.
///
/// ### Thread safety
/// `EarthquakeStore` is `Sendable`: its only state is a GRDB `DatabaseQueue`, which serialises
/// every access. Call it from any thread or task; calls are synchronous and block the caller
/// while the database works, so keep them off the main actor for big imports.
public final class EarthquakeStore: Sendable {
    /// The database file, or `nil` for an in-memory store.
    public let path: String?
    let database: DatabaseQueue

    /// Opens (creating if needed) the database file at `path` and brings its schema up to date.
    ///
    /// - Important: The folder that contains `path` must exist and be writable.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/open`` or ``StoreError/Code/migrate``.
    public convenience init(path: String) throws(StoreError) {
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: Self.configuration)
        } catch {
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
            throw StoreError(
                .open, path: path, doing: "open", error: error,
                advice: "Check that the folder \(folder) exists and is writable, "
                    + "and that the file is a SQLite database."
            )
        }
        try self.init(queue: queue, path: path)
    }

    /// Creates an empty store in memory, for tests, previews and one-shot tools.
    ///
    /// - Throws: ``StoreError`` if SQLite cannot be set up (in practice: never).
    public static func inMemory() throws(StoreError) -> EarthquakeStore {
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(configuration: configuration)
        } catch {
            throw StoreError(.open, path: nil, doing: "open", error: error)
        }
        return try EarthquakeStore(queue: queue, path: nil)
    }

    private init(queue: DatabaseQueue, path: String?) throws(StoreError) {
        self.database = queue
        self.path = path
        do {
            try Self.migrator.migrate(queue)
        } catch {
            throw StoreError(
                .migrate, path: path, doing: "create or upgrade the earthquake table in", error: error,
                advice: "The file may belong to another program or to a newer version of this one."
            )
        }
    }

    private static var configuration: Configuration {
        var configuration = Configuration()
        configuration.label = "EarthquakeStore"
        return configuration
    }

    /// The schema, as a list of migrations that GRDB applies once each, in order.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: create earthquake") { db in
            try db.execute(
                sql: """
                    CREATE TABLE earthquake (
                        id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
                        latitude REAL NOT NULL CHECK (latitude BETWEEN -90 AND 90),
                        longitude REAL NOT NULL CHECK (longitude BETWEEN -180 AND 180),
                        depth REAL NOT NULL,
                        magnitude REAL,
                        magnitudeType TEXT,
                        place TEXT,
                        time INTEGER,
                        updated INTEGER,
                        timeZoneOffset INTEGER,
                        url TEXT,
                        detailURL TEXT,
                        felt INTEGER,
                        cdi REAL,
                        mmi REAL,
                        alert TEXT,
                        status TEXT,
                        tsunami INTEGER,
                        significance INTEGER,
                        network TEXT,
                        code TEXT,
                        type TEXT,
                        title TEXT
                    );
                    CREATE INDEX earthquake_time ON earthquake(time);
                    CREATE INDEX earthquake_magnitude ON earthquake(magnitude);
                    """
            )
        }
        return migrator
    }

    /// The number of earthquakes stored.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func count() throws(StoreError) -> Int {
        try read("count the earthquakes in") { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM earthquake") ?? 0 }
    }

    /// The earthquake with this USGS id, or `nil` when the store has none.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func earthquake(id: String) throws(StoreError) -> Earthquake? {
        try read("look up earthquake \"\(id)\" in") { db in
            try Row.fetchOne(db, sql: "SELECT * FROM earthquake WHERE id = ?", arguments: [id]).map(
                Earthquake.init(row:))
        }
    }

    /// Runs a read, wrapping failures in a ``StoreError`` that names `operation` (ending with
    /// its preposition, as in `"list earthquakes in"`).
    func read<T>(_ operation: String, _ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try database.read(body)
        } catch {
            throw StoreError(.read, path: path, doing: operation, error: error)
        }
    }
}
