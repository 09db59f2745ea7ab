import Foundation
import GRDB

extension EarthquakeStore {
    /// What ``compact()`` did to the file.
    ///
    /// ### Thread safety
    /// A value type and `Sendable`.
    public struct Compaction: Sendable, Equatable {
        /// The file's size before and after, in bytes (the database file with its write-ahead log).
        public var bytesBefore: Int64
        public var bytesAfter: Int64
    }

    /// Gives the room of deleted rows back to the file system: SQLite keeps the pages of deleted rows
    /// for later rows, so deleting most of a database (`prune`) leaves its file as big as before.
    ///
    /// Runs SQLite's `VACUUM` (which rewrites the database into fewer pages, in a transaction: an
    /// interruption leaves it as it was) when at least a tenth of the file, and at least 64 pages, is
    /// free; then moves the write-ahead log into the file, so that the file shrinks now. Readers in other
    /// processes go on reading meanwhile; another writer waits (up to ``busyTimeout``).
    ///
    /// - Returns: the sizes before and after, or `nil` when there was too little room to give back.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/write`` (for example when the disk has no room
    ///   for the rewritten copy, which VACUUM needs); the data is unchanged then.
    @discardableResult
    public func compact() throws(StoreError) -> Compaction? {
        do {
            return try onConnection { db -> Compaction? in
                let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
                let free = try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
                guard free >= 64, free * 10 >= pages else { return nil }
                let before = fileSize()
                try db.execute(sql: "VACUUM")
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                return Compaction(bytesBefore: before, bytesAfter: fileSize())
            }
        } catch {
            throw StoreError.classified(path: path, error: error, timeout: busyTimeout)
                ?? StoreError(
                    .write, path: path, doing: "compact", error: error,
                    advice: "The rows are as they were; the file keeps its free room for later imports.")
        }
    }

    /// The database file's size with its write-ahead log, in bytes (0 in memory).
    func fileSize() -> Int64 {
        guard let path else { return 0 }
        return [path, path + "-wal"].reduce(0) { total, file in
            let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)??.int64Value
            return total + (size ?? 0)
        }
    }
}
