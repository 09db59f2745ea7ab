public import Foundation
public import GRDB

#if canImport(GRDBSQLite)
import GRDBSQLite
#else
import SQLite3
#endif

/// One row of a listing, read straight from SQLite without copying its text.
///
/// - Important: The text fields point into SQLite's memory and are valid only during the call
///   that receives the row; copy what you keep (`String(decoding: row.id, as: UTF8.self)`).
///
/// ### Thread safety
/// Not `Sendable`: use it only inside the callback.
public struct EarthquakeRowView {
    /// The event id, UTF-8.
    public var id: UnsafeBufferPointer<UInt8>
    /// Origin time in milliseconds since 1970, as stored.
    public var timeMilliseconds: Int64?
    public var magnitude: Double?
    public var depth: Double
    public var latitude: Double
    public var longitude: Double
    /// The place, UTF-8; nil when unknown.
    public var place: UnsafeBufferPointer<UInt8>?
    /// The feed's title, UTF-8; nil when absent.
    public var title: UnsafeBufferPointer<UInt8>?
    /// The event type, UTF-8; nil when unknown.
    public var type: UnsafeBufferPointer<UInt8>?
    /// Kilometres from the point of a ``ListingOrder/distance(latitude:longitude:)`` listing; nil otherwise.
    public var distanceKilometers: Double?
    /// "Did You Feel It?" reports (``Earthquake/felt``).
    public var felt: Int?
    /// The largest reported intensity (``Earthquake/cdi``).
    public var cdi: Double?
    /// The largest estimated instrumental intensity (``Earthquake/mmi``).
    public var mmi: Double?
    /// The USGS significance (``Earthquake/significance``).
    public var significance: Int?
    /// The PAGER alert level, UTF-8 (``Earthquake/alert``).
    public var alert: UnsafeBufferPointer<UInt8>?

    public init(
        id: UnsafeBufferPointer<UInt8>, timeMilliseconds: Int64?, magnitude: Double?, depth: Double,
        latitude: Double, longitude: Double, place: UnsafeBufferPointer<UInt8>?, title: UnsafeBufferPointer<UInt8>?,
        type: UnsafeBufferPointer<UInt8>?, distanceKilometers: Double?, felt: Int? = nil, cdi: Double? = nil,
        mmi: Double? = nil, significance: Int? = nil, alert: UnsafeBufferPointer<UInt8>? = nil
    ) {
        self.felt = felt
        self.cdi = cdi
        self.mmi = mmi
        self.significance = significance
        self.alert = alert
        self.id = id
        self.timeMilliseconds = timeMilliseconds
        self.magnitude = magnitude
        self.depth = depth
        self.latitude = latitude
        self.longitude = longitude
        self.place = place
        self.title = title
        self.type = type
        self.distanceKilometers = distanceKilometers
    }
}

/// When a database was last refreshed, and from where.
///
/// ### Thread safety
/// A value type and `Sendable`.
public struct RefreshRecord: Sendable, Equatable, Hashable {
    /// When the refresh finished.
    public var date: Date
    /// The feed: a URL or a file path.
    public var source: String
    /// What the import did.
    public var summary: ImportSummary

    public init(date: Date, source: String, summary: ImportSummary) {
        self.date = date
        self.source = source
        self.summary = summary
    }
}

extension EarthquakeStore {
    /// Calls `body` with each matching earthquake in order, reading rows one at a time: memory stays
    /// constant whatever the count, and no `Earthquake` value or `String` is made per row.
    ///
    /// With ``ListingOrder/distance(latitude:longitude:)`` the distance is computed in SQL (a function
    /// registered on the connection) and SQLite's ORDER BY … LIMIT keeps only `limit` rows while it scans.
    ///
    /// - Parameters:
    ///   - filter: Which earthquakes.
    ///   - order: The order of the rows.
    ///   - limit: the most rows; `nil` for all.
    ///   - body: Called with each row; the view is valid only during the call.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``, or what `body` throws.
    public func forEachRow(
        matching filter: EarthquakeFilter, order: ListingOrder, limit: Int?,
        _ body: (EarthquakeRowView) throws -> Void
    ) throws {
        let (sql, arguments) = Self.listingSQL(
            columns:
                "id, time, magnitude, depth, latitude, longitude, place, title, type, felt, cdi, mmi, significance, alert",
            filter: filter, order: order, limit: limit)
        var bodyError: (any Error)?
        try read("list earthquakes in") { db in
            if Self.measuresDistance(filter, order) { db.add(function: Self.distanceFunction) }
            let statement = try db.makeStatement(sql: sql)
            try statement.setArguments(arguments)
            let cursor = try Row.fetchCursor(statement)
            let raw = statement.sqliteStatement
            let hasDistance = statement.columnCount > 14
            func double(_ column: Int32) -> Double? {
                sqlite3_column_type(raw, column) == SQLITE_NULL ? nil : sqlite3_column_double(raw, column)
            }
            func int(_ column: Int32) -> Int? {
                sqlite3_column_type(raw, column) == SQLITE_NULL ? nil : Int(sqlite3_column_int64(raw, column))
            }
            // SQLite reads any value as a number (text as 0): a value of another type, which only another
            // program can have written, is refused as `Earthquake(row:)` refuses it, not shown made up.
            let numbers: [(Int32, String, Bool)] = [
                (1, "time", true), (2, "magnitude", false), (3, "depth", false), (4, "latitude", false),
                (5, "longitude", false), (9, "felt", true), (10, "cdi", false), (11, "mmi", false),
                (12, "significance", true),
            ]
            while let selected = try cursor.next() {
                for (column, name, whole) in numbers {
                    let type = sqlite3_column_type(raw, column)
                    let fits =
                        type == SQLITE_NULL || type == SQLITE_INTEGER
                        || (type == SQLITE_FLOAT
                            && (!whole || Int64(exactly: sqlite3_column_double(raw, column)) != nil))
                    if !fits {
                        throw UnreadableValue(
                            id: String.fromDatabaseValue(selected["id"] as DatabaseValue? ?? .null),
                            column: name, value: selected[name] as DatabaseValue? ?? .null,
                            expected: whole ? "whole numbers" : "numbers")
                    }
                }
                let row = EarthquakeRowView(
                    id: Self.text(raw, 0) ?? UnsafeBufferPointer(start: nil, count: 0),
                    timeMilliseconds: sqlite3_column_type(raw, 1) == SQLITE_NULL ? nil : sqlite3_column_int64(raw, 1),
                    magnitude: sqlite3_column_type(raw, 2) == SQLITE_NULL ? nil : sqlite3_column_double(raw, 2),
                    depth: sqlite3_column_double(raw, 3),
                    latitude: sqlite3_column_double(raw, 4),
                    longitude: sqlite3_column_double(raw, 5),
                    place: Self.text(raw, 6),
                    title: Self.text(raw, 7),
                    type: Self.text(raw, 8),
                    distanceKilometers: hasDistance ? sqlite3_column_double(raw, 14) : nil,
                    felt: int(9), cdi: double(10), mmi: double(11), significance: int(12), alert: Self.text(raw, 13))
                do {
                    try body(row)
                } catch {
                    bodyError = error
                    return
                }
            }
        }
        if let bodyError { throw bodyError }
    }

    /// The matching earthquakes as values, in order, with their distances for a distance order.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func earthquakes(
        matching filter: EarthquakeFilter, order: ListingOrder, limit: Int?
    ) throws(StoreError) -> [(earthquake: Earthquake, distanceKilometers: Double?)] {
        let (sql, arguments) = Self.listingSQL(columns: "*", filter: filter, order: order, limit: limit)
        return try read("list earthquakes in") { db in
            if Self.measuresDistance(filter, order) { db.add(function: Self.distanceFunction) }
            return try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in
                (try Earthquake(row: row), row["distance"] as Double?)
            }
        }
    }

    /// The number of earthquakes matching `filter`.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func count(matching filter: EarthquakeFilter) throws(StoreError) -> Int {
        let (conditions, arguments) = Self.conditions(filter)
        return try read("count the earthquakes in") { db in
            if filter.within != nil { db.add(function: Self.distanceFunction) }
            return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM earthquake" + conditions, arguments: arguments) ?? 0
        }
    }

    /// How many earthquakes there are of each type, most common first. Types follow
    /// ``Earthquake/normalizedType(_:)`` (no type or an empty one is "earthquake"; lower case), as the
    /// import's counts and `--type` do, so the type is never `nil`.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func typeCounts() throws(StoreError) -> [(type: String?, count: Int)] {
        try read("count the event types in") { db in
            try Row.fetchAll(
                db,
                sql:
                    "SELECT \(Self.normalizedType) AS kind, COUNT(*) AS n FROM earthquake GROUP BY kind ORDER BY n DESC, kind"
            ).map { (try $0.value("kind"), try $0.value("n")) }
        }
    }

    /// ``Earthquake/normalizedType(_:)`` in SQL: the type trimmed and lower-cased, underscores read as
    /// spaces, "earthquake" when missing or empty, older names (``Earthquake/typeAliases``) read as today's.
    /// (Tabs, line breaks and spaces are trimmed, as ``Earthquake/storedType(_:)`` trims them on import, for
    /// rows stored before it did.)
    static let normalizedType: String = {
        let plain =
            "COALESCE(NULLIF(replace(lower(trim(type, char(9, 10, 13, 32))), '_', ' '), ''), '\(Earthquake.defaultType)')"
        let aliases = Earthquake.typeAliases.sorted { $0.key < $1.key }.map { "WHEN '\($0.key)' THEN '\($0.value)'" }
        return "(CASE \(plain) \(aliases.joined(separator: " ")) ELSE \(plain) END)"
    }()

    /// The number of events whose time is before `date`: what ``deleteEarthquakes(before:)`` would delete.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func countEarthquakes(before date: Date) throws(StoreError) -> Int {
        try read("count old earthquakes in") { db in
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM earthquake WHERE time < ?", arguments: [date.usgsMilliseconds]) ?? 0
        }
    }

    /// The number of events without a time, which ``deleteEarthquakes(before:)`` never deletes.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func countEarthquakesWithoutTime() throws(StoreError) -> Int {
        try read("count the earthquakes without a time in") { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM earthquake WHERE time IS NULL") ?? 0
        }
    }

    /// Deletes the earthquakes whose time is before `date` (events without a time are kept), and the
    /// record of USGS deletions made before `date` (kept so that an older copy of a deleted event is not
    /// imported again; a pruned event's older copy comes back all the same). Without the second, that
    /// record grew with every deletion a refresh ever saw.
    ///
    /// - Returns: how many earthquakes were deleted.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/write``, ``StoreError/Code/busy`` (another
    ///   program held the database past ``busyTimeout``) or ``StoreError/Code/readOnly``; nothing is
    ///   deleted then.
    @discardableResult
    public func deleteEarthquakes(before date: Date) throws(StoreError) -> Int {
        try write("delete old earthquakes from") { db in
            try db.execute(sql: "DELETE FROM earthquake WHERE time < ?", arguments: [date.usgsMilliseconds])
            let deleted = db.changesCount
            try db.execute(
                sql: "DELETE FROM \(Self.deletedTable) WHERE updated < ?", arguments: [date.usgsMilliseconds])
            return deleted
        }
    }

    /// Deletes the made-up events of ``SampleFeed`` that older versions of the tool imported into
    /// users' databases (network `sample`, ids `sample…`).
    ///
    /// - Returns: how many were deleted.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/write``.
    @discardableResult
    public func deleteSampleEarthquakes() throws(StoreError) -> Int {
        try write("delete sample earthquakes from") { db in
            try db.execute(sql: "DELETE FROM earthquake WHERE network = 'sample' AND id LIKE 'sample%'")
            return db.changesCount
        }
    }

    /// Remembers a refresh (in a table of its own, created on first use), for ``lastRefresh()``.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/write``.
    public func recordRefresh(_ record: RefreshRecord) throws(StoreError) {
        try write("record the refresh in") { db in try Self.recordRefresh(record, in: db) }
    }

    /// Records a refresh as ``recordRefresh(_:)`` does, in a transaction the caller owns on another
    /// connection to this store's file (with ``importFeed(_:in:commitGate:)``, so that the import and its
    /// record commit together).
    ///
    /// - Throws: GRDB's errors, which the caller's transaction handles.
    public func recordRefresh(_ record: RefreshRecord, in db: Database) throws {
        try Self.recordRefresh(record, in: db)
    }

    private static func recordRefresh(_ record: RefreshRecord, in db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS refresh_log (
                    time INTEGER NOT NULL, source TEXT NOT NULL,
                    inserted INTEGER NOT NULL, updated INTEGER NOT NULL, unchanged INTEGER NOT NULL);
                INSERT INTO refresh_log VALUES (?, ?, ?, ?, ?);
                DELETE FROM refresh_log WHERE rowid NOT IN (SELECT rowid FROM refresh_log ORDER BY time DESC LIMIT 100);
                """,
            arguments: [
                record.date.usgsMilliseconds, record.source, record.summary.inserted, record.summary.updated,
                record.summary.unchanged,
            ])
    }

    /// The latest refresh recorded with ``recordRefresh(_:)``, or nil. Never writes.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func lastRefresh() throws(StoreError) -> RefreshRecord? {
        try read("read the refresh log of") { db in
            guard try db.tableExists("refresh_log") else { return nil }
            return try Row.fetchOne(db, sql: "SELECT * FROM refresh_log ORDER BY time DESC LIMIT 1").map { row in
                RefreshRecord(
                    date: Date(usgsMilliseconds: try row.value("time")), source: try row.value("source"),
                    summary: ImportSummary(
                        inserted: try row.value("inserted"), updated: try row.value("updated"),
                        unchanged: try row.value("unchanged")))
            }
        }
    }

    // MARK: SQL

    static let distanceFunction = DatabaseFunction("baton_distance_km", argumentCount: 4, pure: true) {
        values in
        guard let lat1 = Double.fromDatabaseValue(values[0]), let lon1 = Double.fromDatabaseValue(values[1]),
            let lat2 = Double.fromDatabaseValue(values[2]), let lon2 = Double.fromDatabaseValue(values[3])
        else { return nil }
        return GreatCircle.distanceKilometers(from: (lat1, lon1), to: (lat2, lon2))
    }

    /// Whether a listing computes distances (registering the function that does).
    static func measuresDistance(_ filter: EarthquakeFilter, _ order: ListingOrder) -> Bool {
        if case .distance = order { return true }
        return filter.within != nil
    }

    static func listingSQL(
        columns: String, filter: EarthquakeFilter, order: ListingOrder, limit: Int?
    ) -> (String, StatementArguments) {
        var (conditions, arguments) = conditions(filter)
        var select = columns
        // The distance from the point of the order, or of the area: a column of every row.
        var point: (latitude: Double, longitude: Double)?
        if let within = filter.within { point = (within.latitude, within.longitude) }
        let orderBy: String
        switch order {
        // NULLs sort first in SQLite, so DESC puts events without a time or magnitude last.
        case .time: orderBy = "time DESC, id"
        case .magnitude: orderBy = "magnitude DESC, time DESC, id"
        case .distance(let latitude, let longitude):
            point = (latitude, longitude)
            orderBy = "distance, id"
        }
        if let point {
            select += ", baton_distance_km(?, ?, latitude, longitude) AS distance"
            arguments = [point.latitude, point.longitude] + arguments
        }
        var sql = "SELECT \(select) FROM earthquake\(conditions) ORDER BY \(orderBy)"
        if let limit {
            sql += " LIMIT ?"
            arguments += [max(0, limit)]
        }
        return (sql, arguments)
    }

    static func conditions(_ filter: EarthquakeFilter) -> (String, StatementArguments) {
        var conditions: [String] = []
        var arguments = StatementArguments()
        if let minMagnitude = filter.minMagnitude {
            conditions.append("magnitude >= ?")
            arguments += [minMagnitude]
        }
        if let maxMagnitude = filter.maxMagnitude {
            conditions.append("magnitude <= ?")
            arguments += [maxMagnitude]
        }
        if let since = filter.since {
            conditions.append("time >= ?")
            arguments += [since.usgsMilliseconds]
        }
        if let until = filter.until {
            conditions.append("time < ?")
            arguments += [until.usgsMilliseconds]
        }
        if let within = filter.within {
            conditions.append("baton_distance_km(?, ?, latitude, longitude) <= ?")
            arguments += [within.latitude, within.longitude, within.radiusKilometres]
        }
        if !filter.types.isEmpty {
            conditions.append("\(normalizedType) IN (\(filter.types.map { _ in "?" }.joined(separator: ", ")))")
            arguments += StatementArguments(filter.types.map(Earthquake.normalizedType))
        }
        if !filter.excludedTypes.isEmpty {
            let marks = filter.excludedTypes.map { _ in "?" }.joined(separator: ", ")
            conditions.append("\(normalizedType) NOT IN (\(marks))")
            arguments += StatementArguments(filter.excludedTypes.map(Earthquake.normalizedType))
        }
        if let level = filter.minimumAlert {
            let levels = EarthquakeFilter.AlertLevel.allCases.filter { $0 >= level }.map(\.rawValue)
            conditions.append("lower(alert) IN (\(levels.map { _ in "?" }.joined(separator: ", ")))")
            arguments += StatementArguments(levels)
        }
        if let storedAfter = filter.storedAfter {
            conditions.append("added > ?")
            arguments += [storedAfter]
        }
        if let storedThrough = filter.storedThrough {
            conditions.append("added <= ?")
            arguments += [storedThrough]
        }
        return (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "), arguments)
    }

    private static func text(_ statement: OpaquePointer, _ column: Int32) -> UnsafeBufferPointer<UInt8>? {
        guard let bytes = sqlite3_column_text(statement, column) else { return nil }
        return UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(statement, column)))
    }

    /// Runs a write transaction, wrapping failures in a ``StoreError`` that names `operation`.
    func write<T>(_ operation: String, _ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            return try onConnection { db in
                var result: T?
                try db.inTransaction {
                    result = try body(db)
                    return .commit
                }
                return result!
            }
        } catch {
            // Another program's lock, a read-only file, a full disk: said as such, not as SQLite's code.
            throw StoreError.classified(path: path, error: error, timeout: busyTimeout)
                ?? StoreError(.write, path: path, doing: operation, error: error)
        }
    }
}
