public import Foundation
public import GRDB

/// What came into the store since a moment: marks, looks (`list --new`) and alerts (`watch`).
///
/// ## Marks
/// Every import that adds or changes rows takes one *mark*: the time in milliseconds, or one more than
/// the highest mark in the file when that is later (a clock set back never goes back here). It is taken
/// inside the import's write transaction, so a row with a higher mark was committed later, and a reader
/// that saw mark *m* has seen every row marked *m* or below. A row keeps the mark of its first storing
/// (`added`) and of its last change (`changed`).
extension EarthquakeStore {
    /// The mark the next import in `db`'s write transaction gives its rows.
    static func nextMark(_ db: Database, now: Date = Date()) throws -> Int64 {
        let highest = try Int64.fetchOne(db, sql: "SELECT max(changed) FROM earthquake") ?? 0
        return max(now.usgsMilliseconds, highest + 1)
    }

    /// The highest mark of the file: every row stored or changed so far has one at most this high; 0 for a
    /// file where no import has marked a row (also one that an older version made and no import of this
    /// one has upgraded yet).
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func latestMark() throws(StoreError) -> Int64 {
        try read("read the latest import mark of") { db in
            guard try Self.hasColumn("changed", db) else { return 0 }
            return try Int64.fetchOne(db, sql: "SELECT max(changed) FROM earthquake") ?? 0
        }
    }

    // MARK: Looks

    /// A look at the store that is remembered: its mark (what had been stored) and when it was.
    public struct Look: Sendable, Equatable {
        public var mark: Int64
        public var date: Date

        public init(mark: Int64, date: Date) {
            self.mark = mark
            self.date = date
        }
    }

    /// The last look named `name` remembered by ``recordLook(named:_:)``, or nil. Never writes.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func lastLook(named name: String) throws(StoreError) -> Look? {
        try read("read the last look at") { db in
            guard try Self.hasTable("earthquake_look", db) else { return nil }
            return try Row.fetchOne(db, sql: "SELECT mark, time FROM earthquake_look WHERE name = ?", arguments: [name])
                .map { Look(mark: try $0.value("mark"), date: Date(usgsMilliseconds: try $0.value("time"))) }
        }
    }

    /// Remembers a look (in a table of its own, created on first use). A look with a lower mark than the
    /// one remembered (two `list --new` at once) does not move it back.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/write``.
    public func recordLook(named name: String, _ look: Look) throws(StoreError) {
        try write("remember the look at") { db in
            try db.execute(
                sql: """
                    CREATE TABLE IF NOT EXISTS earthquake_look (
                        name TEXT PRIMARY KEY NOT NULL, mark INTEGER NOT NULL, time INTEGER NOT NULL);
                    INSERT INTO earthquake_look (name, mark, time) VALUES (?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET mark = excluded.mark, time = excluded.time
                    WHERE excluded.mark >= earthquake_look.mark;
                    """, arguments: [name, look.mark, look.date.usgsMilliseconds])
        }
    }

    // MARK: Alerts

    /// What ``decideAlerts(watch:filter:freshWithin:now:in:)`` decided.
    public struct AlertDecision: Sendable, Equatable, Codable {
        /// The watch was new: nothing was alerted, and what the store held is its starting point.
        public var started: Bool
        /// With `started`: the stored events that match the filter (not alerted).
        public var matchingAtStart: Int
        /// Events queued for an alert by this decision.
        public var queued: Int

        public init(started: Bool, matchingAtStart: Int, queued: Int) {
            self.started = started
            self.matchingAtStart = matchingAtStart
            self.queued = queued
        }
    }

    /// Queues an alert, once per watch and event, for each event that came in or changed since the
    /// watch's last decision and now matches `filter`, and happened at most `freshWithin` before it came
    /// in or changed (an old event found in a bigger feed is news to the database, not to the world).
    /// The first decision of a watch queues nothing: it starts the watch from what the store holds.
    ///
    /// Runs in a write transaction the caller owns on a connection to this store's file (a durable job's
    /// completion), so that the decision and the job's record commit together.
    ///
    /// - Throws: GRDB's errors, which the caller's transaction handles; ``StoreError`` when `db` is not in
    ///   a transaction on this file.
    public func decideAlerts(
        watch: String, filter: EarthquakeFilter, freshWithin: TimeInterval, now: Date = Date(), in db: Database
    ) throws -> AlertDecision {
        guard db.isInsideTransaction, let path, Self.isSameFile(db, as: path) else {
            throw StoreError(
                .open, path: path, doing: "decide alerts in",
                reason: "the connection given is not in a transaction on this store's file",
                advice:
                    "Call decideAlerts(watch:filter:freshWithin:in:) inside a write transaction on \(path ?? "the file")."
            )
        }
        try Self.createAlertTables(db)
        if filter.within != nil { db.add(function: Self.distanceFunction) }
        let latest = try Int64.fetchOne(db, sql: "SELECT max(changed) FROM earthquake") ?? 0
        let (conditions, arguments) = Self.conditions(filter)
        // (A watch whose settings were saved has a row, and no mark until its first decision.)
        guard
            let mark = try Int64.fetchOne(
                db, sql: "SELECT mark FROM earthquake_watch WHERE name = ?", arguments: [watch])
        else {
            try db.execute(
                sql: """
                    INSERT INTO earthquake_watch (name, mark, started) VALUES (?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET mark = excluded.mark, started = excluded.started
                    """,
                arguments: [watch, latest, now.usgsMilliseconds])
            let matching =
                try Int.fetchOne(db, sql: "SELECT count(*) FROM earthquake" + conditions, arguments: arguments) ?? 0
            // The events a later revision could make news (those of the last `freshWithin`), matching or
            // not, are recorded as known and never alerted: a watch alerts on what comes in after it
            // started, not on the USGS revising what the database held then.
            try db.execute(
                sql: """
                    INSERT INTO earthquake_alert (watch, id, queued, sent, error)
                    SELECT ?, id, ?, ?, ? FROM earthquake WHERE time >= ?
                    ON CONFLICT (watch, id) DO NOTHING
                    """,
                arguments: [
                    watch, now.usgsMilliseconds, now.usgsMilliseconds, Self.knownAtStart,
                    now.usgsMilliseconds - Int64(freshWithin * 1000),
                ])
            return AlertDecision(started: true, matchingAtStart: matching, queued: 0)
        }
        guard latest > mark else { return AlertDecision(started: false, matchingAtStart: 0, queued: 0) }
        let since =
            (conditions.isEmpty ? " WHERE " : conditions + " AND ")
            + "changed > ? AND changed <= ? AND time IS NOT NULL AND time >= changed - ?"
        try db.execute(
            sql: """
                INSERT INTO earthquake_alert (watch, id, queued) SELECT ?, id, ? FROM earthquake\(since)
                ON CONFLICT (watch, id) DO NOTHING
                """,
            arguments: [watch, now.usgsMilliseconds] + arguments + [mark, latest, Int64(freshWithin * 1000)])
        let queued = db.changesCount
        try db.execute(sql: "UPDATE earthquake_watch SET mark = ? WHERE name = ?", arguments: [latest, watch])
        return AlertDecision(started: false, matchingAtStart: 0, queued: queued)
    }

    /// Stores what a watch alerts on and how (opaque to the store: the tool's encoded settings), so that
    /// checks left over from an earlier start use what the watch was started with last.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/write``.
    public func saveWatchSettings(_ settings: Data, watch: String) throws(StoreError) {
        try write("save the settings of a watch in") { db in
            try Self.createAlertTables(db)
            try db.execute(
                sql: """
                    INSERT INTO earthquake_watch (name, settings) VALUES (?, ?)
                    ON CONFLICT (name) DO UPDATE SET settings = excluded.settings
                    """, arguments: [watch, settings])
        }
    }

    /// The settings saved for `watch` by ``saveWatchSettings(_:watch:)``, read in `db` (any connection to
    /// this file); nil when there are none.
    public static func watchSettings(_ watch: String, in db: Database) throws -> Data? {
        guard try hasTable("earthquake_watch", db) else { return nil }
        return try Data.fetchOne(db, sql: "SELECT settings FROM earthquake_watch WHERE name = ?", arguments: [watch])
    }

    /// The settings saved for `watch`, or nil.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func watchSettings(_ watch: String) throws(StoreError) -> Data? {
        try read("read the settings of a watch in") { db in try Self.watchSettings(watch, in: db) }
    }

    /// The names of every watch that has saved settings or decided alerts in this file.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func watchNames() throws(StoreError) -> [String] {
        try read("list the watches of") { db in
            guard try Self.hasTable("earthquake_watch", db) else { return [] }
            return try String.fetchAll(db, sql: "SELECT name FROM earthquake_watch ORDER BY name")
        }
    }

    /// An alert queued by ``decideAlerts(watch:filter:freshWithin:now:in:)`` and not yet delivered.
    public struct PendingAlert: Sendable {
        public var id: String
        /// The event as stored now; nil when it was deleted since (the USGS withdrew it, or `prune`).
        public var earthquake: Earthquake?
        /// Deliveries tried and failed so far.
        public var failedAttempts: Int
    }

    /// The alerts of `watch` not yet delivered, oldest event first, leaving out those that failed
    /// `maxAttempts` times. Never writes.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func pendingAlerts(watch: String, maxAttempts: Int) throws(StoreError) -> [PendingAlert] {
        try read("read the pending alerts of") { db in
            guard try Self.hasTable("earthquake_alert", db) else { return [] }
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT a.id AS alertID, a.attempts AS attempts, e.* FROM earthquake_alert a
                    LEFT JOIN earthquake e ON e.id = a.id
                    WHERE a.watch = ? AND a.sent IS NULL AND a.attempts < ?
                    ORDER BY e.time, a.id
                    """, arguments: [watch, maxAttempts]
            ).map { row in
                PendingAlert(
                    id: try row.value("alertID"),
                    earthquake: (row["id"] as DatabaseValue?)?.isNull ?? true ? nil : try Earthquake(row: row),
                    failedAttempts: try row.value("attempts"))
            }
        }
    }

    /// Records how the delivery of an alert went: delivered (it is never delivered again), or failed
    /// with `error` (it is tried again until it failed `maxAttempts` times in all).
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/write``.
    public func recordAlert(watch: String, id: String, deliveredAt date: Date?, error: String? = nil) throws(StoreError)
    {
        try write("record an alert in") { db in
            if let date {
                try db.execute(
                    sql: "UPDATE earthquake_alert SET sent = ?, error = NULL WHERE watch = ? AND id = ?",
                    arguments: [date.usgsMilliseconds, watch, id])
            } else {
                try db.execute(
                    sql: "UPDATE earthquake_alert SET attempts = attempts + 1, error = ? WHERE watch = ? AND id = ?",
                    arguments: [error, watch, id])
            }
        }
    }

    /// The counts of a watch's alerts: delivered, waiting, and given up after failing every attempt.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func alertCounts(
        watch: String, maxAttempts: Int
    ) throws(StoreError) -> (
        delivered: Int, waiting: Int, givenUp: Int
    ) {
        try read("count the alerts in") { db in
            guard try Self.hasTable("earthquake_alert", db) else { return (0, 0, 0) }
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT coalesce(sum(sent IS NOT NULL AND (error IS NULL OR error != ?)), 0),
                        coalesce(sum(sent IS NULL AND attempts < ?), 0), coalesce(sum(sent IS NULL AND attempts >= ?), 0)
                    FROM earthquake_alert WHERE watch = ?
                    """, arguments: [Self.knownAtStart, maxAttempts, maxAttempts, watch])
            return (row?[0] ?? 0, row?[1] ?? 0, row?[2] ?? 0)
        }
    }

    /// Whether the file has a table named `name`, asked of SQLite itself: GRDB's `tableExists` answers from
    /// a cache of the connection's, which does not learn of tables another connection (the job store's,
    /// in a watch) made since.
    static func hasTable(_ name: String, _ db: Database) throws -> Bool {
        try Bool.fetchOne(
            db, sql: "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?)", arguments: [name])
            ?? false
    }

    /// Whether the earthquake table has a column named `name` (the marks came with schema v5), asked of SQLite.
    static func hasColumn(_ name: String, _ db: Database) throws -> Bool {
        try Bool.fetchOne(
            db, sql: "SELECT EXISTS (SELECT 1 FROM pragma_table_info('earthquake') WHERE name = ?)", arguments: [name])
            ?? false
    }

    /// The note of an event the watch knew when it started (recorded as sent, never alerted).
    static let knownAtStart = "known when the watch started"

    private static func createAlertTables(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS earthquake_watch (
                    name TEXT PRIMARY KEY NOT NULL, mark INTEGER, started INTEGER, settings BLOB);
                CREATE TABLE IF NOT EXISTS earthquake_alert (
                    watch TEXT NOT NULL, id TEXT NOT NULL, queued INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0, sent INTEGER, error TEXT,
                    PRIMARY KEY (watch, id));
                """)
    }
}
