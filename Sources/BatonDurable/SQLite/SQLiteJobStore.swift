import Baton
public import Foundation
package import GRDB
import GRDBSQLite

/// The embedded job store: one SQLite file (WAL mode), shared safely by the worker processes of one
/// machine.
///
/// ```swift
/// let store = try SQLiteJobStore(path: "jobs.sqlite")
/// let run = try await store.submit(graph, uniqueKey: "refresh-2.5_day")
/// ```
///
/// Every method is one short `BEGIN IMMEDIATE` transaction; concurrent writers wait up to
/// ``busyTimeout`` for one another. Commits use `synchronous = NORMAL`: a committed transaction
/// survives the crash of any process (the case this store is built for), while a power loss may lose
/// the last transactions — which then simply run again (execution is at-least-once).
///
/// Wake-ups are immediate for workers that share this `SQLiteJobStore` instance; workers in other
/// processes see new work at their polling interval (``DurableWorker/Configuration/pollInterval``).
///
/// The tables are named `baton_…`, so the store may live in an application's own database file.
///
/// ## Thread safety
/// All methods may be called from any task, concurrently; GRDB serializes the writes.
public final class SQLiteJobStore: JobStore {
    /// The schema this version writes. A file written by a newer version is refused.
    /// Version 2 added the runs' trace context; version 5 marks the jobs that wait for their time
    /// (claims pass them over until they are due). An older file is migrated when it is opened for
    /// writing, and an older program then refuses it.
    public static let schemaVersion = 5

    public let clock: DurableClock
    /// The file's path, as given to ``init(path:clock:busyTimeout:)``; nil for a store in memory.
    public var path: String? { (writer as? DatabasePool)?.path }
    /// How long a transaction waits for another process's write to finish before failing.
    public let busyTimeout: TimeInterval
    let writer: any DatabaseWriter
    /// For a store opened to read only: the connection reads go through (``ReadOnlyConnection``).
    let readOnly: ReadOnlyConnection?
    let wakeupHub = WakeupHub()
    /// Set by ``close()``: later calls are refused with a clear error rather than reaching a closed connection.
    private let closed = Protected(false)
    /// The file's path, or "memory", for messages.
    private let location: String
    let outcomeHub = WakeupHub()

    /// Opens (or creates) the store in the SQLite file at `path`.
    ///
    /// - Throws: ``DurableError`` with code ``DurableError/Code/notAStore`` when the file is not a SQLite
    ///   database (or is corrupt), ``DurableError/Code/newerSchema`` when a newer version wrote it.
    public convenience init(path: String, clock: DurableClock = .system, busyTimeout: TimeInterval = 10) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        try Self.checkFilePath(path)
        // A file of a newer version is refused before anything opens it for writing (a pool would set
        // up its write-ahead log, and write, first).
        try Self.refuseNewerSchema(at: path)
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw Self.storeError(error, location: path, doing: "open")
        }
        try self.init(writer: pool, clock: clock, busyTimeout: busyTimeout, description: path)
    }

    /// Opens the store in the SQLite file at `path` to read it only, for a tool that inspects a file this
    /// process may not write (`baton` on another user's store, or a copy on read-only media). The schema
    /// is neither created nor upgraded: the caller has checked that the file holds a store of this
    /// version. A call that writes fails with ``DurableError/Code/storeFailure`` saying so.
    ///
    /// A file opened immutable (no connection used it) is opened again at a later read once it may have
    /// changed — another process opened it (its log appeared), or the file itself changed —, so that a
    /// long-lived reader such as `baton dashboard` follows the store instead of showing the file as it
    /// was at the start (found by a probe, 7 December 2026).
    package convenience init(readingOnly path: String, busyTimeout: TimeInterval = 10) throws {
        let connection: ReadOnlyConnection
        let queue: DatabaseQueue
        let version: Int?
        do {
            connection = try ReadOnlyConnection(path: path, busyTimeout: busyTimeout)
            queue = try connection.current()
            // (Through this connection: ``refuseNewerSchema(at:)``'s own would leave side files.)
            version = try queue.read { db in try Self.storedSchemaVersion(db, description: path) }
        } catch {
            throw Self.storeError(error, location: path, doing: "open")
        }
        if let version, version > Self.schemaVersion { throw Self.newerSchema(path, version) }
        try self.init(
            writer: queue, clock: .system, busyTimeout: busyTimeout, description: path, prepares: false,
            readOnly: connection)
    }

    /// A connection that only reads the SQLite file at `path`. When no connection uses the file (no log
    /// beside it) it is opened immutable: SQLite then needs no `-shm` beside it, which it could not
    /// create in a folder this process may not write, and would leave in one it may, with the file's
    /// read-only permissions, where it stops the owner's next worker. Otherwise it is opened read-only,
    /// and reads what the log holds.
    package static func readOnlyQueue(_ path: String, busyTimeout: TimeInterval = 10) throws -> DatabaseQueue {
        try openReadOnly(path, busyTimeout: busyTimeout).queue
    }

    /// ``readOnlyQueue(_:busyTimeout:)``, and whether it opened the file immutable.
    static func openReadOnly(
        _ path: String, busyTimeout: TimeInterval
    ) throws -> (queue: DatabaseQueue, immutable: Bool) {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(busyTimeout)
        let unused =
            !FileManager.default.fileExists(atPath: path + "-wal")
            && !FileManager.default.fileExists(atPath: path + "-shm")
        let immutable = unused ? immutableURI(path) : nil
        return (try DatabaseQueue(path: immutable ?? path, configuration: configuration), immutable != nil)
    }

    /// The URI that opens `path` immutable (`file:…?immutable=1`), or `nil` when this SQLite does not
    /// read file names as URIs.
    private static func immutableURI(_ path: String) -> String? {
        guard sqlite3_compileoption_used("USE_URI") == 1 else { return nil }
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "/-._~")
        return "file://" + (absolute.addingPercentEncoding(withAllowedCharacters: allowed) ?? absolute)
            + "?immutable=1"
    }

    /// Refuses a path that cannot hold a store, saying what to give instead: SQLite's words for these
    /// ("could not activate WAL mode", "disk I/O error") named none of them.
    static func checkFilePath(_ path: String) throws {
        if path.isEmpty || path == ":memory:" || path.hasPrefix("file:") {
            throw DurableError(
                code: .misuse,
                message:
                    "SQLiteJobStore(path:) takes the path of a file, not \(path.isEmpty ? "an empty path" : "'\(path)'"); for a store in memory, use SQLiteJobStore.inMemory()"
            )
        }
        var status = stat()
        guard stat(path, &status) == 0 else { return }  // missing: created, or its folder's absence said
        switch status.st_mode & S_IFMT {
        case S_IFREG: return
        case S_IFDIR:
            throw DurableError(
                code: .storeFailure,
                message:
                    "cannot open the job store at '\(path)': it is a directory. Give the path of a file in it, for example '\(path)/jobs.sqlite'."
            )
        default:
            throw DurableError(
                code: .storeFailure,
                message:
                    "cannot open the job store at '\(path)': it is not a regular file (a device, a pipe or a socket). Give the path of a database file."
            )
        }
    }

    /// Throws ``DurableError/Code/newerSchema`` when the file at `path` holds a store of a newer
    /// version, read through a read-only connection. Anything else (no file, not a database, a file it
    /// cannot read) is left to the normal opening, which reports it.
    static func refuseNewerSchema(at path: String) throws {
        guard FileManager.default.fileExists(atPath: path) else { return }
        let version: Int?
        do {
            // Immutable when no connection uses the file: a read-only connection of a file in WAL mode
            // would leave `-wal` and `-shm` beside a file it then refuses as "not changed".
            let queue = try openReadOnly(path, busyTimeout: 0).queue
            defer { try? queue.close() }
            version = try queue.read { db in try storedSchemaVersion(db, description: path) }
        } catch {
            return
        }
        if let version, version > schemaVersion { throw newerSchema(path, version) }
    }

    /// The refusal of a file that a newer version wrote.
    private static func newerSchema(_ path: String, _ version: Int) -> DurableError {
        DurableError(
            code: .newerSchema,
            message:
                "the job store at '\(path)' has schema version \(version), written by a newer BatonDurable (this one knows version \(schemaVersion)). Upgrade this program; the store was not changed."
        )
    }

    /// A store in memory, for tests and previews: gone when the value is released.
    public static func inMemory(clock: DurableClock = .system) throws -> SQLiteJobStore {
        try SQLiteJobStore(writer: DatabaseQueue(), clock: clock, busyTimeout: 0, description: "memory")
    }

    init(
        writer: any DatabaseWriter, clock: DurableClock, busyTimeout: TimeInterval, description: String,
        prepares: Bool = true, readOnly: ReadOnlyConnection? = nil
    ) throws {
        self.writer = writer
        self.readOnly = readOnly
        self.location = description
        self.clock = clock
        self.busyTimeout = busyTimeout
        guard prepares else { return }
        do {
            if try writer.read(Self.isPrepared) { return }
            try writer.write { db in try Self.prepareSchema(db, description: description) }
        } catch {
            throw Self.storeError(error, location: description, doing: "prepare")
        }
    }

    /// A failure of SQLite as a ``DurableError`` that says what is wrong and what to do: a file that is
    /// not a database or is damaged (``DurableError/Code/notAStore``), one this process may not open or
    /// write, a full disk, a lock held too long by another process (``DurableError/Code/storeFailure``).
    /// Errors that are already ``DurableError``s, and cancellations, pass through.
    static func storeError(_ error: any Error, location: String, doing action: String) -> any Error {
        if error is DurableError || error is CancellationError || error is ApplicationWritesError { return error }
        if let decoding = error as? RowDecodingError {
            return DurableError(
                code: .storeFailure,
                message:
                    "cannot \(action) the job store at '\(location)': it holds a value of a type this store never writes (\(decoding)). Something other than BatonDurable changed that row; correct it or restore the store from a copy.",
                underlying: error)
        }
        guard let database = error as? DatabaseError else {
            return DurableError(
                code: .storeFailure, message: "cannot \(action) the job store at '\(location)': \(error)",
                underlying: error)
        }
        let detail = database.message ?? "\(database)"
        func failure(_ advice: String) -> DurableError {
            DurableError(
                code: .storeFailure, message: "cannot \(action) the job store at '\(location)' (\(detail)). \(advice)",
                underlying: error)
        }
        switch database.resultCode {
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            return DurableError(
                code: .notAStore,
                message:
                    "the job store at '\(location)' is not a SQLite database, or it is damaged (\(detail)). Move the file away to start a new store.",
                underlying: error)
        case .SQLITE_CANTOPEN, .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_AUTH:
            return failure(
                "Check that its directory exists and that this process may read and write the file and its directory (SQLite keeps -wal and -shm files beside it)."
            )
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return failure(
                "Another connection held the database longer than the busy timeout; retry, or open the store with a longer busyTimeout."
            )
        case .SQLITE_FULL:
            return failure("The disk is full; free space and retry.")
        case .SQLITE_IOERR:
            return failure("The disk or file system failed; check it, then retry.")
        default:
            return failure("SQLite refused the operation.")
        }
    }

    /// Closes the file. SQLite first copies its write-ahead log into it and removes the `-wal` and
    /// `-shm` side files, so the file alone holds the store (to copy or move it). Without a close, the
    /// connections close when the store is released; a process that exits first leaves the log beside
    /// the file (nothing is lost: SQLite reads it when the file is next opened).
    ///
    /// Call it once no worker uses the store (after ``DurableWorker/run(until:)`` returned or the
    /// worker shut down); closing twice does nothing. Every later call fails with
    /// ``DurableError/Code/storeFailure``.
    ///
    /// - Throws: ``DurableError`` with code ``DurableError/Code/storeFailure`` when SQLite cannot close
    ///   a connection now (a statement is still running); the store then stays open.
    public func close() throws {
        let first = closed.withLock { isClosed -> Bool in
            defer { isClosed = true }
            return !isClosed
        }
        guard first else { return }
        do {
            // The last connection to close copies the log into the file and removes it, and only a
            // connection that may write can: the pool's readers are read-only, so they close first.
            (writer as? DatabasePool)?.releaseMemory()
            try writer.close()
            try readOnly?.close()
        } catch {
            closed.withLock { $0 = false }
            throw DurableError(
                code: .storeFailure, message: "cannot close the job store at '\(location)': \(error)", underlying: error
            )
        }
    }

    /// Throws once ``close()`` ran.
    /// Whether ``close()`` was called: every later call throws.
    public var isClosed: Bool { closed.withLock { $0 } }

    func checkOpen() throws {
        if closed.withLock({ $0 }) {
            throw DurableError(
                code: .storeFailure,
                message: "the job store at '\(location)' was closed (SQLiteJobStore.close()); open it again to use it")
        }
    }

    /// Runs a read, once the store is known to be open.
    func reading<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try checkOpen()
        do {
            if let readOnly { return try await readOnly.current().read(body) }
            return try await writer.read(body)
        } catch {
            throw Self.storeError(error, location: location, doing: "read")
        }
    }

    public func wakeups() -> AsyncStream<Void> { wakeupHub.stream() }

    /// Wakes after each transaction of this process that changed the state of jobs (recorded outcomes —
    /// completions, failures, retries —, cancellations, submissions), whether or not it made work ready
    /// (``wakeups()`` skips a completion whose dependent the same transaction claimed): for a program
    /// that shows progress as jobs finish. Like ``wakeups()``, each stream holds at most one pending wake-up;
    /// read the store to see what changed.
    public func outcomes() -> AsyncStream<Void> { outcomeHub.stream() }

    /// Runs `body` in a write transaction and wakes this process's workers if `wake` is set.
    func write<T: Sendable>(wake: Bool, _ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try checkOpen()
        let result: T
        do {
            result = try await writer.write(body)
        } catch {
            throw Self.storeError(error, location: location, doing: "write to")
        }
        if wake {
            wakeupHub.wake()
            outcomeHub.wake()
        }
        return result
    }
}

extension Row {
    /// The value of `column` as `T` (an optional for a column that may be NULL). Throws where GRDB's
    /// subscript stops the program: on a value of another type, which only something other than this
    /// store can have written (a store edited by hand, another program's table of the same name).
    func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
        try decode(T.self, forColumn: column)
    }

    /// The value at `index` of the selection, as ``value(_:)``.
    func value<T: DatabaseValueConvertible>(at index: Int) throws -> T {
        try decode(T.self, atIndex: index)
    }
}

/// The connection of a store opened to read only. One opened immutable — SQLite then reads the file as
/// it is and never looks again — is replaced at the next read once the file may have changed: its log
/// appeared beside it (another process opened it), or its size, time or identity changed. A connection
/// replaced is released, not closed: it closes when the last read using it ends (the first one is also
/// the store's `writer`, closed by the store's ``SQLiteJobStore/close()``, with the current one).
final class ReadOnlyConnection: Sendable {
    private struct State: Sendable {
        var queue: DatabaseQueue
        var immutable: Bool
        var stamp: [Int]
    }

    let path: String
    let busyTimeout: TimeInterval
    private let state: Protected<State>

    init(path: String, busyTimeout: TimeInterval) throws {
        self.path = path
        self.busyTimeout = busyTimeout
        let stamp = Self.stamp(path)
        let (queue, immutable) = try SQLiteJobStore.openReadOnly(path, busyTimeout: busyTimeout)
        state = Protected(State(queue: queue, immutable: immutable, stamp: stamp))
    }

    /// The connection to read through now.
    func current() throws -> DatabaseQueue {
        let (queue, immutable, stamp) = state.withLock { ($0.queue, $0.immutable, $0.stamp) }
        guard immutable else { return queue }
        let now = Self.stamp(path)
        let sideFiles =
            FileManager.default.fileExists(atPath: path + "-wal")
            || FileManager.default.fileExists(atPath: path + "-shm")
        guard sideFiles || now != stamp else { return queue }
        // Opened outside the lock; if two reads race, the later one's connection is kept.
        let (fresh, freshImmutable) = try SQLiteJobStore.openReadOnly(path, busyTimeout: busyTimeout)
        let replaced = state.withLock { state -> DatabaseQueue in
            defer { state = State(queue: fresh, immutable: freshImmutable, stamp: now) }
            return state.queue
        }
        _ = replaced  // released here, outside the lock
        return fresh
    }

    /// Closes the connection reads go through now.
    func close() throws {
        let queue = state.withLock { $0.queue }
        try queue.close()
    }

    /// What identifies the file's content as `stat` sees it: device, inode, size, modification time.
    private static func stamp(_ path: String) -> [Int] {
        var status = stat()
        guard stat(path, &status) == 0 else { return [] }
        #if canImport(Darwin)
        let modified = status.st_mtimespec
        #else
        let modified = status.st_mtim
        #endif
        return [
            Int(status.st_dev), Int(status.st_ino), Int(status.st_size), Int(modified.tv_sec), Int(modified.tv_nsec),
        ]
    }
}
