public import Foundation
import GRDB

extension EarthquakeStore {
    /// The order of ``EarthquakeStore/list(minMagnitude:since:limit:sort:)``.
    ///
    /// ### Thread safety
    /// A value type and `Sendable`.
    public enum Sort: Sendable, Hashable {
        /// Newest first; events without a time last. Ties: by id.
        case time
        /// Strongest first; events without a magnitude last. Ties: newest first, then by id.
        case magnitude
    }

    /// The newest earthquakes, newest first.
    ///
    /// - Parameter limit: the most rows to return.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    public func recent(limit: Int = 20) throws(StoreError) -> [Earthquake] {
        try list(limit: limit, sort: .time)
    }

    /// Earthquakes matching optional filters, in the chosen order.
    ///
    /// - Parameters:
    ///   - minMagnitude: keep events of at least this magnitude (events without a magnitude
    ///     are then excluded).
    ///   - since: keep events at or after this time (events without a time are then excluded).
    ///   - limit: the most rows to return; `nil` for all.
    ///   - sort: ``Sort/time`` (newest first) or ``Sort/magnitude`` (strongest first).
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    /// - Complexity: uses the `time` and `magnitude` indexes.
    public func list(
        minMagnitude: Double? = nil,
        since: Date? = nil,
        limit: Int? = nil,
        sort: Sort = .time
    ) throws(StoreError) -> [Earthquake] {
        var (sql, arguments) = Self.filteredSelect(minMagnitude: minMagnitude, since: since)
        switch sort {
        case .time: sql += " ORDER BY time IS NULL, time DESC, id"
        case .magnitude: sql += " ORDER BY magnitude IS NULL, magnitude DESC, time IS NULL, time DESC, id"
        }
        if let limit {
            sql += " LIMIT ?"
            arguments += [max(0, limit)]
        }
        return try read("list earthquakes in") { db in
            try Row.fetchAll(db, sql: sql, arguments: arguments).map(Earthquake.init(row:))
        }
    }

    /// The earthquakes nearest to a point, nearest first, with their great-circle distance.
    ///
    /// ```swift
    /// // The five closest M4+ events to Tokyo this week:
    /// let nearby = try store.near(latitude: 35.68, longitude: 139.69, limit: 5,
    ///                             minMagnitude: 4, since: .now.addingTimeInterval(-7 * 86_400))
    /// ```
    ///
    /// Filters are applied in SQL (with the latitude band of `within`, when given); the
    /// distances are computed in Swift with ``GreatCircle`` and ranked there.
    ///
    /// - Parameters:
    ///   - latitude: the point's latitude in degrees.
    ///   - longitude: the point's longitude in degrees.
    ///   - limit: the most rows to return.
    ///   - minMagnitude: keep events of at least this magnitude.
    ///   - since: keep events at or after this time.
    ///   - within: keep events at most this many kilometres away; `nil` for no limit.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    /// - Complexity: O(*m* log *m*) for *m* rows passing the filters.
    public func near(
        latitude: Double,
        longitude: Double,
        limit: Int = 20,
        minMagnitude: Double? = nil,
        since: Date? = nil,
        within: Double? = nil
    ) throws(StoreError) -> [NearbyEarthquake] {
        var (sql, arguments) = Self.filteredSelect(minMagnitude: minMagnitude, since: since)
        if let within {
            // One degree of latitude is the same length everywhere: a cheap, index-free band.
            let band = within / GreatCircle.kilometersPerDegree
            sql += (sql.contains(" WHERE ") ? " AND" : " WHERE") + " latitude BETWEEN ? AND ?"
            arguments += [latitude - band, latitude + band]
        }
        let point = (latitude: latitude, longitude: longitude)
        let candidates = try read("find earthquakes near \(latitude), \(longitude) in") { db in
            try Row.fetchAll(db, sql: sql, arguments: arguments).map(Earthquake.init(row:))
        }
        var ranked: [NearbyEarthquake] = []
        ranked.reserveCapacity(candidates.count)
        for quake in candidates {
            let distance = GreatCircle.distanceKilometers(from: point, to: (quake.latitude, quake.longitude))
            if let within, distance > within { continue }
            ranked.append(NearbyEarthquake(earthquake: quake, distanceKilometers: distance))
        }
        ranked.sort { ($0.distanceKilometers, $0.earthquake.id) < ($1.distanceKilometers, $1.earthquake.id) }
        return Array(ranked.prefix(max(0, limit)))
    }

    /// `SELECT * FROM earthquake` with the common filters.
    private static func filteredSelect(minMagnitude: Double?, since: Date?) -> (String, StatementArguments) {
        var conditions: [String] = []
        var arguments = StatementArguments()
        if let minMagnitude {
            conditions.append("magnitude >= ?")
            arguments += [minMagnitude]
        }
        if let since {
            conditions.append("time >= ?")
            arguments += [since.usgsMilliseconds]
        }
        let filter = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        return ("SELECT * FROM earthquake" + filter, arguments)
    }
}
