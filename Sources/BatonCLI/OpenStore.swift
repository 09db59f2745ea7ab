public import BatonDurable
import BatonPostgres
import Foundation
import GRDB
import Logging

extension StoreAddress {
    /// Runs `body` with the store at this address open, and closes it after. Never creates a store: a
    /// SQLite file that does not exist, or holds no job store, and a PostgreSQL schema without one, are
    /// errors saying so, and nothing is written.
    ///
    /// - Throws: ``BatonCLIError`` for a store that is not there; the store's own errors otherwise.
    public func withStore<T: Sendable>(_ body: (any JobStore) async throws -> T) async throws -> T {
        switch self {
        case .sqlite(let path):
            try Self.checkSQLiteStore(path)
            let store: SQLiteJobStore
            do {
                // A file this process may not write is read only: its reads work, a repair says why it cannot.
                store = Self.mayWrite(path) ? try SQLiteJobStore(path: path) : try SQLiteJobStore(readingOnly: path)
            } catch let error as DurableError {
                throw BatonCLIError("cannot open the job store \(path): \(error.message)")
            }
            defer { try? store.close() }
            return try await body(store)
        case .postgres(let url, let schema):
            var configuration: PostgresStoreConfiguration
            do {
                configuration = try PostgresStoreConfiguration(url: url, schema: schema)
            } catch let error as PostgresStoreError {
                throw BatonCLIError.usage("--store: \(error.message)")
            }
            configuration.createsStore = false
            // The store's own log lines (reconnections, retries) are not this tool's output.
            let quiet = Logger(label: "baton") { _ in SwiftLogNoOpLogHandler() }
            do {
                return try await withPostgresJobStore(configuration: configuration, logger: quiet) { store in
                    try await body(store)
                }
            } catch let error as PostgresStoreError {
                throw BatonCLIError(error.message)
            }
        }
    }

    /// Runs `body` with the SQLite store at `path` opened to read only, as ``withStore(_:)`` opens a
    /// file this process may not write, after its checks (for tests, which run where every file is
    /// writable).
    package static func withReadOnlySQLiteStore<T: Sendable>(
        _ path: String, _ body: (any JobStore) async throws -> T
    ) async throws -> T {
        let store = try SQLiteJobStore(readingOnly: path)
        defer { try? store.close() }
        return try await body(store)
    }

    /// Whether this process may write the file at `path` and its folder, where SQLite keeps its log.
    static func mayWrite(_ path: String) -> Bool {
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return FileManager.default.isWritableFile(atPath: path) && FileManager.default.isWritableFile(atPath: folder)
    }

    /// How long a read waits for another program's lock on a SQLite store.
    static let busyTimeout: TimeInterval = 10

    /// Refuses a file that is missing, a folder, or no job store, without changing it.
    static func checkSQLiteStore(_ path: String) throws(BatonCLIError) {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
            throw BatonCLIError("there is no job store at \(path) (no such file); check the path given to --store")
        }
        guard !isFolder.boolValue else {
            throw BatonCLIError("\(path) is a folder; give the job store's file, as in sqlite:\(path)/jobs.sqlite")
        }
        // A connection that may write removes SQLite's side files when it closes; one that only reads (for
        // a file this process may not write) would leave them, so it is used only then, as the store is.
        let version: Int?
        do {
            // Waits for another program's lock as the store does, rather than failing at once.
            var configuration = Configuration()
            configuration.busyMode = .timeout(busyTimeout)
            let queue =
                mayWrite(path)
                ? try DatabaseQueue(path: path, configuration: configuration)
                : try SQLiteJobStore.readOnlyQueue(path, busyTimeout: busyTimeout)
            defer { try? queue.close() }
            version = try queue.read { db in try SQLiteJobStore.storedSchemaVersion(db, description: path) }
        } catch let error as DurableError {
            throw BatonCLIError(error.message)
        } catch let error as DatabaseError {
            switch error.resultCode {
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                throw BatonCLIError(
                    "\(path) is locked by another program (it waited \(Int(busyTimeout)) s for it); try again when it "
                        + "is done")
            case .SQLITE_NOTADB, .SQLITE_CORRUPT:
                throw BatonCLIError(
                    "\(path) is not a SQLite database, or it is damaged (\(error.message ?? "\(error.resultCode)")); "
                        + "check the path given to --store")
            default:
                throw BatonCLIError("\(path) cannot be read: \(error.message ?? "\(error.resultCode)")")
            }
        } catch {
            throw BatonCLIError("\(path) cannot be read as a SQLite database: \(error)")
        }
        guard let version else {
            throw BatonCLIError(
                "\(path) holds no Baton job store (it has no baton_ tables); check the path given to --store")
        }
        // Opening an older store upgrades it, which workers of its version would then refuse: not for this tool.
        guard version >= SQLiteJobStore.schemaVersion else {
            throw BatonCLIError(
                "the job store \(path) has schema version \(version), older than this baton's "
                    + "\(SQLiteJobStore.schemaVersion), and baton does not upgrade it; start a worker of this version "
                    + "(after stopping the older ones: it upgrades the store), or use the baton of the store's version")
        }
    }
}
