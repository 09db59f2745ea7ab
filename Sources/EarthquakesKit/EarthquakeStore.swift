import Baton
import Foundation
import GRDB
import GRDBSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

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
/// ### Several processes, one file
/// A file database is kept in SQLite's WAL mode: readers (`list`, `show`) never wait for an
/// import running in another process, and see the data as it was before that import until it
/// commits. Two imports take turns: the second waits up to ``busyTimeout`` for the first one's
/// transaction to end, calling the observer given to ``importFeed(_:whileWaiting:commitGate:)-([Earthquake],_,_)``
/// once when it starts waiting, and fails with ``StoreError/Code/busy`` if the database is still
/// locked after that.
///
/// Every failure is a ``StoreError`` naming the database file and the operation.
///
/// ### Thread safety
/// `EarthquakeStore` is `Sendable`: its only state is a GRDB `DatabaseQueue`, which serialises
/// every access, and a lock-guarded observer. Call it from any thread or task; calls are
/// synchronous and block the caller while the database works, so keep them off the main actor for
/// big imports.
public final class EarthquakeStore: Sendable {
    /// The database file, or `nil` for an in-memory store. (A store opened ``OpenMode/readOnly`` on a
    /// file with nothing in it reads an empty store in memory, and still names the file.)
    public let path: String?
    /// How long an operation waits for another connection (another process) to release the database
    /// before failing with ``StoreError/Code/busy``.
    public let busyTimeout: Duration
    let database: DatabaseQueue
    /// Opened ``OpenMode/readOnly``: every change is refused, whether or not the connection could write.
    let refusesWrites: Bool
    /// Told once when an operation starts waiting for another connection's lock; set for the
    /// duration of an import.
    let lockWait: LockWait

    /// How to open the file.
    ///
    /// ### Thread safety
    /// A `Sendable` value.
    public enum OpenMode: Sendable {
        /// Read and write; create the file if it does not exist (its folder must exist).
        case createIfMissing
        /// Read and write; fail with ``StoreError/Code/missing`` if the file does not exist.
        case mustExist
        /// Only read: fail with ``StoreError/Code/missing`` if the file does not exist, never create it or
        /// change its data (imports fail with ``StoreError/Code/readOnly``). For commands that only read.
        /// The connection is opened for writing when this process may write the file and its folder (so
        /// that ``EarthquakeStore/close()`` can remove SQLite's log), and SQLite refuses every change.
        /// A file with nothing in it (zero bytes, or no table at all) reads as an empty store, as it is
        /// when opened; events a writer adds to it later are seen by a store opened after them.
        case readOnly
    }

    /// Opens (creating if needed) the database file at `path` and brings its schema up to date (a
    /// ``OpenMode/readOnly`` store never changes the file: see there).
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - mode: Whether a missing file is created (default) or is an error, and whether the store may write.
    ///   - busyTimeout: How long to wait for another process that holds the database's write lock.
    ///   - onLongWait: Called (on the waiting thread) once a wait for such a process has lasted a second,
    ///     once per wait: to say why nothing seems to happen.
    /// - Important: The folder that contains `path` must exist and be writable.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/open``, ``StoreError/Code/missing``,
    ///   ``StoreError/Code/notADatabase``, ``StoreError/Code/busy``, ``StoreError/Code/migrate`` or
    ///   ``StoreError/Code/foreign`` (another program's database: the file is not changed).
    public convenience init(
        path: String, mode: OpenMode = .createIfMissing, busyTimeout: Duration = .seconds(60),
        onLongWait: (@Sendable () -> Void)? = nil
    ) throws(StoreError) {
        var isFolder: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
        if exists && isFolder.boolValue {
            throw StoreError(
                .open, path: path, doing: "open", reason: "it is a folder, not a file",
                advice: "Give the path of a database file, for example \(path)/earthquakes.sqlite."
            )
        }
        // A device, a pipe or a socket (`/dev/null`, `/dev/zero`): SQLite reads one as an empty database,
        // so `list` said "No earthquakes stored yet" and a refresh failed with a disk I/O error. (`stat`
        // follows a symbolic link: a link to a database file is a database file.) A file of `/proc` is
        // refused too: it reads as empty and cannot be written.
        var status = stat()
        if exists, stat(path, &status) == 0, status.st_mode & S_IFMT != S_IFREG || Self.isProcFile(path) {
            throw StoreError(
                .open, path: path, doing: "open",
                reason: "it is not a database file (it is a device, a pipe or a file of /proc)",
                advice: "Give the path of a database file, for example ~/earthquakes.sqlite."
            )
        }
        if !exists && mode != .createIfMissing {
            throw StoreError(
                .missing, path: path, doing: "open", reason: "there is no such file",
                advice: "Check the path, or import a feed first to create it."
            )
        }
        let lockWait = LockWait(timeout: busyTimeout, onLongWait: onLongWait)
        var queue: DatabaseQueue
        do {
            // A connection opened read-only can neither copy SQLite's log into the file nor remove the log
            // when it closes: every read command would leave `-wal` and `-shm` files beside the database.
            // So when the file and its folder may be written, a read-only store opens the file for writing
            // and has SQLite refuse every change of its own (see ``onConnection(_:)``); otherwise it opens
            // it read-only.
            let opensForWriting = mode != .readOnly || Self.mayWrite(path)
            var configuration = Self.configuration(lockWait: lockWait, wal: mode != .readOnly)
            configuration.readonly = !opensForWriting
            // A file this process may not write (a read-only file system, a folder or file without write
            // permission) and that no connection is using is opened immutable: SQLite then needs no `-shm`
            // beside it, which it could not create (on a read-only file system) or would leave behind with
            // the file's read-only permissions (in a writable folder), where it stops the next writer.
            let immutable = !opensForWriting && Self.isUnused(path) ? Self.immutableURI(path) : nil
            queue = try DatabaseQueue(path: immutable ?? path, configuration: configuration)
            // A database with nothing in it (an empty file that `touch` or an interrupted first run made,
            // or one made by `sqlite3` and left empty) holds no events: a reader reads it as an empty store,
            // as it reads a missing one, rather than failing for want of a table only a writer would make.
            // It reads an empty store in memory; the file is not touched.
            if mode == .readOnly,
                try queue.read({ db in try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") }) == 0
            {
                try queue.close()
                queue = try DatabaseQueue(configuration: Self.configuration(lockWait: lockWait, wal: false))
                try Self.migrator.migrate(queue)
            }
        } catch {
            throw StoreError.opening(path: path, error: error, timeout: busyTimeout)
        }
        try self.init(
            queue: queue, path: path, busyTimeout: busyTimeout, lockWait: lockWait, readOnly: mode == .readOnly)
    }

    /// Creates an empty store in memory, for tests, previews and one-shot tools.
    ///
    /// - Throws: ``StoreError`` if SQLite cannot be set up (in practice: never).
    public static func inMemory() throws(StoreError) -> EarthquakeStore {
        let lockWait = LockWait(timeout: .zero)
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(configuration: configuration(lockWait: lockWait, wal: false))
        } catch {
            throw StoreError(.open, path: nil, doing: "open", error: error)
        }
        return try EarthquakeStore(queue: queue, path: nil, busyTimeout: .zero, lockWait: lockWait, readOnly: false)
    }

    private init(
        queue: DatabaseQueue, path: String?, busyTimeout: Duration, lockWait: LockWait, readOnly: Bool
    ) throws(StoreError) {
        self.database = queue
        self.refusesWrites = readOnly
        self.path = path
        self.busyTimeout = busyTimeout
        self.lockWait = lockWait
        let upToDate: Bool
        var readable = false
        var superseded = false
        var foreign: StoreError?
        do {
            // Only write when the schema is behind: a reader must not need the write lock while
            // another process imports.
            (upToDate, readable, superseded, foreign) = try queue.read { db in
                // One snapshot (a `DatabaseQueue` read is no transaction): another connection (another first
                // refresh of a new file) may create the tables between two of these statements, and GRDB
                // reads "no such table: grdb_migrations" as an error when the table exists a moment later.
                var facts: (Bool, Bool, Bool, StoreError?) = (false, false, false, nil)
                try db.inSavepoint {
                    Self.loadCurrentSchema(db)
                    // Every later migration only adds what imports use: a reader needs the table.
                    facts = (
                        try Self.migrator.hasCompletedMigrations(db),
                        try Self.migrator.appliedIdentifiers(db).contains(Self.createTable),
                        try Self.migrator.hasBeenSuperseded(db),
                        try Self.hasForeignTable(db) ? try Self.foreignError(db, path: path) : nil
                    )
                    return .commit
                }
                return facts
            }
            // Another program's database: never touched (the migration would fail on its `earthquake`).
            if let foreign { throw foreign }
            if !upToDate && !readOnly { try Self.migrateUnderWriteLock(queue, path: path) }
        } catch {
            if let failure = error as? StoreError { throw failure }
            if let failure = StoreError.classified(path: path, error: error, timeout: busyTimeout) { throw failure }
            throw StoreError(
                .migrate, path: path, doing: "create or upgrade the earthquake table in", error: error,
                advice: "The file may belong to another program or to a newer version of this one."
            )
        }
        // A newer version's rules for its columns are unknown here: read such a file, never write it.
        if superseded && !readOnly {
            throw StoreError(
                .migrate, path: path, doing: "write to",
                reason: "it was written by a newer version of earthquakes, whose schema this version does not know",
                advice:
                    "Upgrade earthquakes, or give another database with --database (list and show can still read it)."
            )
        }
        if !upToDate && readOnly && !readable {
            throw StoreError(
                .migrate, path: path, doing: "read",
                reason: "it has no earthquake table, or one from an older version of this program",
                advice: "Check the path, or import a feed into it first (which creates or upgrades the table)."
            )
        }
    }

    /// Whether `path` (symbolic links resolved) is in `/proc`.
    private static func isProcFile(_ path: String) -> Bool {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        return resolved.hasPrefix("/proc/")
    }

    private static func configuration(lockWait: LockWait, wal: Bool) -> Configuration {
        var configuration = Configuration()
        configuration.label = "EarthquakeStore"
        if wal {
            // Not GRDB's `journalMode = .wal`, which writes to the file at every opening: switch only a
            // file that is not yet in WAL mode, so opening never needs a lock another process holds.
            configuration.prepareDatabase { db in
                // (Nor another program's database: see ``hasForeignTable(_:)``.)
                guard !db.configuration.readonly,
                    try String.fetchOne(db, sql: "PRAGMA journal_mode")?.lowercased() != "wal",
                    try !hasForeignTable(db)
                else { return }
                // SQLite answers "database is locked" at once, without its busy handler, when another
                // connection holds the file meanwhile (another first refresh of a new file): wait as the
                // handler would.
                var tries = 0
                while true {
                    do {
                        try db.execute(sql: "PRAGMA journal_mode = WAL")
                        return
                    } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                        guard lockWait.shouldRetry(tries: tries) else { throw error }
                        tries += 1
                    }
                }
            }
            // In WAL mode, NORMAL is durable across application crashes and much faster to commit.
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        }
        configuration.busyMode = .callback { tries in lockWait.shouldRetry(tries: tries) }
        return configuration
    }

    /// Closes the database. SQLite first copies its write-ahead log into the file and removes the
    /// `-wal` and `-shm` side files, so the file alone holds every row (to copy or move it). Without a
    /// close, the connection closes when the store is released; a process that exits first leaves the
    /// log beside the file (nothing is lost: SQLite reads the log when the file is next opened, but a
    /// copy of the file alone lacks those rows).
    ///
    /// A store opened ``OpenMode/readOnly`` does the same when this process may write the file and its
    /// folder; otherwise SQLite cannot remove the log, and the files are left as they were.
    ///
    /// Call it once you are done; closing twice does nothing. Every later call on the store fails
    /// with a ``StoreError`` that says the connection is closed.
    ///
    /// - Throws: ``StoreError`` when SQLite cannot close the connection now (a statement is still
    ///   running); the connection is then closed when the store is released.
    public func close() throws(StoreError) {
        do {
            try database.close()
        } catch {
            throw StoreError(.write, path: path, doing: "close", error: error)
        }
    }

    /// Checks, without changing anything, that an import could write to the database: that the
    /// connection is not read-only and that the folder (where SQLite keeps its journal) is writable.
    /// Call it before a long download to fail early.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/readOnly``.
    public func checkWritable() throws(StoreError) {
        guard let path else { return }
        let readOnly: Bool
        do {
            readOnly = try refusesWrites || onConnection { db in sqlite3_db_readonly(db.sqliteConnection, "main") == 1 }
        } catch {
            throw StoreError(.read, path: path, doing: "check", error: error)
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        if readOnly || access(path, W_OK) != 0 {
            throw StoreError(
                .readOnly, path: path, doing: "write to", reason: "the file is read-only",
                advice: "Make it writable (chmod u+w \(path)) or use another database file."
            )
        }
        if access(folder, W_OK) != 0 {
            throw StoreError(
                .readOnly, path: path, doing: "write to",
                reason: "its folder \(folder) is not writable (SQLite keeps its journal next to the file)",
                advice: "Make the folder writable or use a database file in another folder."
            )
        }
    }

    /// Whether no connection uses the database at `path`: it has neither a write-ahead log nor its index
    /// beside it. (A connection in WAL mode keeps both while it is open, and the last one to close removes
    /// them; a log left by a process that ended holds changes, which an immutable reader would not see.)
    private static func isUnused(_ path: String) -> Bool {
        !FileManager.default.fileExists(atPath: path + "-wal") && !FileManager.default.fileExists(atPath: path + "-shm")
    }

    /// The URI that opens `path` immutable (`file:…?immutable=1`), or `nil` when this SQLite does not read
    /// file names as URIs.
    static func immutableURI(_ path: String) -> String? {
        guard sqlite3_compileoption_used("USE_URI") == 1 else { return nil }
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "/-._~")
        let escaped = absolute.addingPercentEncoding(withAllowedCharacters: allowed) ?? absolute
        return "file://" + escaped + "?immutable=1"
    }

    /// Whether this process may write the file at `path` and its folder (where SQLite keeps its log).
    private static func mayWrite(_ path: String) -> Bool {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return access(path, W_OK) == 0 && access(folder, W_OK) == 0
    }

    /// Brings the schema up to date in one `BEGIN IMMEDIATE` transaction that decides what to run only
    /// once it holds the write lock. Two processes that open a new file at once (two first refreshes)
    /// take turns: the second finds the migrations recorded and runs none. (GRDB's migrator reads what is
    /// applied before it takes the lock, then runs each migration in a transaction of its own: the second
    /// process created the table again and failed, "table earthquake already exists".)
    ///
    /// The migrations are recorded in GRDB's table `grdb_migrations`, as ``migrator`` reads them.
    static func migrateUnderWriteLock(_ queue: DatabaseQueue, path: String?) throws {
        try queue.writeWithoutTransaction { db in
            try db.inTransaction(.immediate) {
                Self.loadCurrentSchema(db)
                // Checked again under the lock: another program's table is never touched.
                if try hasForeignTable(db) { throw try foreignError(db, path: path) }
                try db.execute(sql: "CREATE TABLE IF NOT EXISTS grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
                let applied = try migrator.appliedIdentifiers(db)
                for (identifier, migrate) in migrations where !applied.contains(identifier) {
                    try migrate(db)
                    try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES (?)", arguments: [identifier])
                }
                return .commit
            }
        }
    }

    /// Starts the transaction's snapshot and reads the schema as it is in it. Another connection (another
    /// first refresh of a new file) may have changed the schema since this connection last read it: SQLite
    /// would compile a statement against the schema it knows ("no such table") without looking, and GRDB
    /// answers from its own cache of the schema.
    private static func loadCurrentSchema(_ db: Database) {
        db.clearSchemaCache()
        _ = try? Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master")
    }

    /// The schema as GRDB's migrator (to read which migrations a file has, and for tests that make old files).
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for (identifier, migrate) in migrations {
            migrator.registerMigration(identifier) { db in try migrate(db) }
        }
        return migrator
    }

    /// The schema, as a list of migrations applied once each, in order.
    static let migrations: [(identifier: String, migrate: @Sendable (Database) throws -> Void)] = [
        (
            createTable,
            { db in
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
        ),
        (
            "v2: earthquake fingerprint",
            { db in
                // The fingerprint of the feature each row was read from (see `FeatureFingerprint`).
                try db.execute(sql: "ALTER TABLE earthquake ADD COLUMN fingerprint BLOB")
            }
        ),
        (
            "v3: fingerprint cleared by other writers",
            { db in
                // A fingerprint says "this row holds exactly what these feature bytes say". This version
                // replaces or clears it with every write of other values; an older version of this program
                // (which knows nothing of the column) would change the values and leave a stale fingerprint
                // behind, and a later re-import of the older bytes would then count the row unchanged.
                // The trigger clears the fingerprint of a row whose values changed while it did not.
                let values = [
                    "latitude", "longitude", "depth", "magnitude", "magnitudeType", "place", "time", "updated",
                    "timeZoneOffset", "url", "detailURL", "felt", "cdi", "mmi", "alert", "status", "tsunami",
                    "significance", "network", "code", "type", "title",
                ]
                try db.execute(
                    sql: """
                        CREATE TRIGGER earthquake_stale_fingerprint AFTER UPDATE ON earthquake
                        WHEN NEW.fingerprint IS NOT NULL AND NEW.fingerprint IS OLD.fingerprint
                            AND (\(values.map { "NEW.\($0) IS NOT OLD.\($0)" }.joined(separator: " OR ")))
                        BEGIN
                            UPDATE earthquake SET fingerprint = NULL WHERE rowid = NEW.rowid;
                        END
                        """)
            }
        ),
        (
            "v4: fingerprint key",
            { db in
                // The secret key of the database's fingerprints (see `FingerprintKey`), made here at random.
                let key = FingerprintKey.random()
                var blob = Data(count: 16)
                blob.withUnsafeMutableBytes { bytes in
                    bytes.storeBytes(of: key.k0.littleEndian, toByteOffset: 0, as: UInt64.self)
                    bytes.storeBytes(of: key.k1.littleEndian, toByteOffset: 8, as: UInt64.self)
                }
                try db.execute(sql: "CREATE TABLE \(fingerprintKeyTable) (key BLOB NOT NULL)")
                try db.execute(sql: "INSERT INTO \(fingerprintKeyTable) (key) VALUES (?)", arguments: [blob])
            }
        ),
        (
            "v5: stored and changed marks",
            { db in
                // When each row was first stored and last changed, as marks of this file: every import that
                // writes takes one mark, above every mark the file holds (see `nextMark`), so a row with a
                // higher mark committed later. `list --new` and `watch` find what came since by them. Rows
                // stored before this version have neither: they are never new.
                try db.execute(
                    sql: """
                        ALTER TABLE earthquake ADD COLUMN added INTEGER;
                        ALTER TABLE earthquake ADD COLUMN changed INTEGER;
                        CREATE INDEX earthquake_changed ON earthquake(changed);
                        """)
            }
        ),
        (
            "v6: deleted earthquakes",
            { db in
                // The events the USGS marked deleted, with the `updated` time of the deletion (NULL: unknown):
                // a copy older than the deletion, from a stale or saved feed, does not store the event again.
                try db.execute(
                    sql: "CREATE TABLE \(deletedTable) (id TEXT PRIMARY KEY NOT NULL, updated INTEGER) WITHOUT ROWID")
            }
        ),
    ]

    /// The table of the events the USGS marked deleted (see the import).
    static let deletedTable = "earthquake_deleted"

    /// The table that holds the key of the database's fingerprints.
    static let fingerprintKeyTable = "earthquake_fingerprint_key"

    /// The first migration, which creates the table that readers need.
    static let createTable = "v1: create earthquake"

    /// Whether the file belongs to another program: it holds a table named `earthquake` that this
    /// program did not create (every version creates it by the migration ``createTable``, so a table
    /// without that migration recorded is another program's), or tables of another program and none of
    /// this one's (a refresh added its tables beside another application's `users`). Such a file is
    /// never changed (not even switched to WAL mode). A Baton job store's tables (`baton_…`) are not
    /// another program's: the tool keeps its refreshes' jobs beside its events.
    static func hasForeignTable(_ db: Database) throws -> Bool { !(try foreignTables(db)).isEmpty }

    /// The tables that make the file another program's (see ``hasForeignTable(_:)``); empty when it is not.
    ///
    /// The names come from one statement: this also runs outside a transaction (as a connection opens),
    /// while another process may be creating the schema, and a look at `grdb_migrations` there failed
    /// with "no such table" when it was not about an `earthquake` table (this program creates that table
    /// and records its migration in one transaction, so a file without it holds none of its tables).
    static func foreignTables(_ db: Database) throws -> [String] {
        let names = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name")
        if names.contains("earthquake") {
            return try migrator.appliedIdentifiers(db).contains(createTable) ? [] : ["earthquake"]
        }
        return names.filter { name in
            !name.hasPrefix("sqlite_") && !name.hasPrefix("baton_") && name != "grdb_migrations"
                && name != "refresh_log"
        }
    }

    /// The error for a file of another program, naming what makes it one.
    static func foreignError(_ db: Database, path: String?) throws -> StoreError {
        let tables = try foreignTables(db)
        let reason =
            tables == ["earthquake"]
            ? "it holds a table named earthquake that this program did not create, so the database belongs to something else"
            : "it holds another program's tables (\(tables.prefix(5).joined(separator: ", "))"
                + "\(tables.count > 5 ? ", …" : "")) and none of this program's, so the database belongs to something else"
        return StoreError(
            .foreign, path: path, doing: "use", reason: reason,
            advice: "Nothing was changed; choose another database file (--database PATH).")
    }

    /// Creates a database file as versions before the `fingerprint` column made it (tests of upgrades).
    static func createVersion1Database(at path: String) throws {
        try migrator.migrate(DatabaseQueue(path: path), upTo: createTable)
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

    /// Whether the store remembers `id` as gone: an event the USGS deleted, or an earlier id of an event
    /// the USGS now lists under another (both kept until ``deleteEarthquakes(before:)`` drops them).
    public func remembersAsGone(id: String) throws(StoreError) -> Bool {
        try read("look up earthquake \"\(id)\" in") { db in
            guard try Self.hasTable(Self.deletedTable, db) else { return false }
            return try Bool.fetchOne(db, sql: "SELECT 1 FROM \(Self.deletedTable) WHERE id = ?", arguments: [id]) != nil
        }
    }

    /// Runs `body` on the connection, or throws ``StoreClosed`` once ``close()`` ran. The check runs on
    /// the connection's own queue, as `close()` does: a call racing with a close runs before it or is
    /// refused, never on a closed connection (which GRDB does not check for every call).
    ///
    /// A store opened ``OpenMode/readOnly`` runs `body` in SQLite's `query_only` mode, so that SQLite
    /// refuses every change even when the connection was opened for writing.
    func onConnection<T>(_ body: (Database) throws -> T) throws -> T {
        try database.writeWithoutTransaction { db in
            guard db.sqliteConnection != nil else { throw StoreClosed() }
            return refusesWrites ? try db.readOnly { try body(db) } : try body(db)
        }
    }

    /// Runs a read, wrapping failures in a ``StoreError`` that names `operation` (ending with
    /// its preposition, as in `"list earthquakes in"`).
    func read<T>(_ operation: String, _ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try onConnection { db in
                // As GRDB's `read`: read-only, in one transaction (one snapshot of the file).
                try db.readOnly {
                    var result: T?
                    try db.inSavepoint {
                        result = try body(db)
                        return .commit
                    }
                    return result!
                }
            }
        } catch let error as UnreadableValue {
            throw StoreError(
                .read, path: path, doing: operation, reason: error.reason, advice: error.advice(path: path),
                error: error)
        } catch {
            throw StoreError.classified(path: path, error: error, timeout: busyTimeout)
                ?? StoreError(.read, path: path, doing: operation, error: error)
        }
    }
}

/// The busy handler of a store's connection: waits for another connection's lock up to a timeout,
/// telling an observer once per wait.
///
/// ### Thread safety
/// `Sendable`; the observer is guarded by a lock and called without holding it.
final class LockWait: Sendable {
    let timeout: Duration
    private let state = Protected<State>(State())

    /// Told once per wait that has lasted ``longWait`` (a command that waits in silence looks hung).
    let onLongWait: (@Sendable () -> Void)?
    static let longWait = Duration.seconds(1)

    private struct State {
        var observer: (@Sendable () -> Void)?
        /// Asked at each try: yes ends the wait at once (a cancelled import: Ctrl-C).
        var stop: (@Sendable () -> Bool)?
        var started: ContinuousClock.Instant?
        var toldLong = false
    }

    init(timeout: Duration, onLongWait: (@Sendable () -> Void)? = nil) {
        self.timeout = timeout
        self.onLongWait = onLongWait
    }

    /// What the next operations' waits tell and ask: the observer told when a wait starts, and whether to
    /// stop waiting.
    typealias Hooks = (observer: (@Sendable () -> Void)?, stop: (@Sendable () -> Bool)?)

    /// Sets the hooks of the next operations' waits; returns the previous ones.
    func setHooks(_ hooks: Hooks) -> Hooks {
        state.withLock { state in
            defer { (state.observer, state.stop) = hooks }
            return (state.observer, state.stop)
        }
    }

    /// SQLite's busy handler: `true` to try again (after a short sleep), `false` to give up.
    func shouldRetry(tries: Int) -> Bool {
        let now = ContinuousClock.now
        let onLongWait = onLongWait
        let (started, observer, long, stop) = state.withLock { state in
            if tries == 0 {
                state.started = now
                state.toldLong = false
            }
            let started = state.started ?? now
            let long = onLongWait != nil && !state.toldLong && now - started >= Self.longWait
            if long { state.toldLong = true }
            return (started, tries == 0 ? state.observer : nil, long, state.stop)
        }
        if stop?() == true { return false }
        observer?()
        if long { onLongWait?() }
        guard now - started < timeout else { return false }
        // Short sleeps at first (the other transaction may be about to end), then up to 50 ms.
        usleep(useconds_t(min(50, 1 + tries * 5) * 1000))
        return true
    }
}
