import EarthquakesKit
public import Foundation

/// The options of `earthquakes list`, parsed and checked.
///
/// ## Thread safety
/// A `Sendable` value.
public struct ListOptions: Sendable, Equatable {
    /// The order of the list (with ``near``: the order of the nearest ``limit`` earthquakes).
    public enum Sort: String, Sendable, CaseIterable {
        case time, magnitude
    }

    /// Only earthquakes of at least this magnitude.
    public var minMagnitude: Double?
    /// Only earthquakes at or after this moment.
    public var since: Date?
    /// At most this many earthquakes.
    public var limit: Int
    /// The earthquakes nearest to this point, nearest first, with their distances.
    public var near: Coordinate?
    /// Newest or strongest first.
    public var sort: Sort

    public init(
        minMagnitude: Double? = nil, since: Date? = nil, limit: Int = 20, near: Coordinate? = nil, sort: Sort = .time
    ) {
        self.minMagnitude = minMagnitude
        self.since = since
        self.limit = limit
        self.near = near
        self.sort = sort
    }
}

/// A point given as `LAT,LON` in degrees.
///
/// ## Thread safety
/// A `Sendable` value.
public struct Coordinate: Sendable, Equatable {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// Parses `"35.68,139.69"` (spaces allowed).
    ///
    /// - Throws: ``CLIError`` that shows the expected form.
    public init(parsing text: String) throws(CLIError) {
        let parts = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let latitude = Double(parts[0]), let longitude = Double(parts[1]) else {
            throw CLIError("--near expects LAT,LON in degrees, for example 35.68,139.69; got \"\(text)\"")
        }
        guard (-90...90).contains(latitude), (-180...180).contains(longitude) else {
            throw CLIError("--near \(text): latitude must be in -90...90 and longitude in -180...180")
        }
        self.init(latitude: latitude, longitude: longitude)
    }
}

/// Parses the `--since` option: an ISO 8601 date or date-time, or an age such as `7d`, `24h`, `30m`, `2w`.
///
/// ## Thread safety
/// Stateless.
public enum SinceParser {
    /// The moment `text` names, relative to `now` for ages.
    ///
    /// - Throws: ``CLIError`` that shows the accepted forms.
    public static func parse(_ text: String, now: Date) throws(CLIError) -> Date {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let age = age(trimmed) { return now.addingTimeInterval(-age) }
        if let date = isoDate(trimmed) { return date }
        throw CLIError(
            "--since expects an ISO date (2025-10-01 or 2025-10-01T12:00:00Z) or an age such as 30m, 24h, 7d or 2w; got \"\(text)\""
        )
    }

    private static func age(_ text: String) -> TimeInterval? {
        guard let unit = text.last, let count = Double(text.dropLast()), count >= 0, count.isFinite else { return nil }
        switch unit {
        case "m": return count * 60
        case "h": return count * 3600
        case "d": return count * 86_400
        case "w": return count * 7 * 86_400
        default: return nil
        }
    }

    private static func isoDate(_ text: String) -> Date? {
        let full = ISO8601DateFormatter()
        if let date = full.date(from: text) { return date }
        full.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = full.date(from: text) { return date }
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        return day.date(from: text)  // midnight UTC
    }
}
