import BatonDurable
import Foundation
import GRDB

/// The job store of versions before 2026-11: `<database>.jobs`, a file of its own beside the database.
/// The graphs of refreshes now live in the database itself (see ``FeedRefresh``), and the first refresh
/// of a database that still has the old file moves its runs in — an interrupted refresh among them is
/// then resumed like any other — and deletes the file.
enum LegacyJobStore {
    /// `<database>.jobs`.
    static func path(forDatabase database: String) -> String { database + ".jobs" }

    /// Moves every run of `<database>.jobs` into the job store in the database (whose tables `opened`
    /// made), in one transaction, then deletes the old file and its SQLite side files. Nothing to do
    /// without the old file.
    ///
    /// - Returns: A note for the user when the runs could not be moved (the database already holds
    ///   runs, whose identities could collide with theirs): the old file is then left as it is.
    static func migrate(database: String, opened: SQLiteJobStore) throws -> String? {
        let legacy = path(forDatabase: database)
        guard FileManager.default.fileExists(atPath: legacy) else { return nil }
        // The old file's schema brought to this version's, so that both files have the same tables.
        try SQLiteJobStore(path: legacy).close()
        var configuration = Configuration()
        configuration.busyMode = .timeout(opened.busyTimeout)
        let queue = try DatabaseQueue(path: database, configuration: configuration)
        defer { try? queue.close() }
        let moved = try queue.writeWithoutTransaction { db -> Bool in
            try db.execute(sql: "ATTACH DATABASE ? AS legacy", arguments: [legacy])
            defer { try? db.execute(sql: "DETACH DATABASE legacy") }
            var moved = false
            try db.inTransaction(.immediate) {
                // Moved already, by a refresh that then could not delete the file (or stopped first): the runs
                // must not come back (they may have been pruned since).
                if try String.fetchOne(
                    db, sql: "SELECT value FROM main.baton_durable_meta WHERE key = ?", arguments: [movedKey]) != nil
                {
                    moved = true
                    return .commit
                }
                // Every old run already here: moved by an earlier refresh that stopped before deleting the file.
                let notHere =
                    try Int.fetchOne(
                        db,
                        sql: """
                            SELECT count(*) FROM legacy.baton_runs AS old WHERE NOT EXISTS
                                (SELECT 1 FROM main.baton_runs AS new WHERE new.id = old.id AND new.created = old.created)
                            """) ?? 0
                if notHere == 0 {
                    moved = true
                    return .commit
                }
                guard try Int.fetchOne(db, sql: "SELECT count(*) FROM main.baton_runs") == 0 else { return .rollback }
                let tables = try String.fetchAll(
                    db,
                    sql: """
                        SELECT name FROM legacy.sqlite_master
                        WHERE type = 'table' AND name LIKE 'baton\\_%' ESCAPE '\\' AND name != 'baton_durable_meta'
                        """)
                // Runs before jobs (a job's run is a foreign key), the rest in any order.
                for table in tables.sorted(by: { rank($0) < rank($1) }) {
                    let columns = try Row.fetchAll(db, sql: "PRAGMA main.table_info(\(table))")
                        .map { "\"\($0["name"] as String)\"" }.joined(separator: ", ")
                    guard !columns.isEmpty else { continue }  // (a table this version does not have)
                    try db.execute(
                        sql: "INSERT OR IGNORE INTO main.\(table) (\(columns)) SELECT \(columns) FROM legacy.\(table)")
                }
                try db.execute(
                    sql: "INSERT OR REPLACE INTO main.baton_durable_meta (key, value) VALUES (?, ?)",
                    arguments: [movedKey, legacy])
                moved = true
                return .commit
            }
            return moved
        }
        guard moved else {
            return "note: \(legacy), the job store of an older version of earthquakes, was left as it is: the "
                + "database already holds refreshes of its own, so its runs were not moved in. An interrupted "
                + "refresh in it is not resumed; refresh its feeds again, and delete the file.\n"
        }
        for file in [legacy, legacy + "-wal", legacy + "-shm"] { try? FileManager.default.removeItem(atPath: file) }
        return nil
    }

    /// The key, in the job store's meta table, that records that the old file's runs were moved in.
    static let movedKey = "earthquakes.legacy-jobs-moved"

    private static func rank(_ table: String) -> Int {
        switch table {
        case "baton_runs": 0
        case "baton_jobs": 1
        default: 2
        }
    }
}
