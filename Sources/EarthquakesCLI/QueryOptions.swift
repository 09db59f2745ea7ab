public import EarthquakesKit
public import Foundation

/// The options of `earthquakes list`, parsed and checked.
///
/// ## Thread safety
/// A `Sendable` value.
public struct ListOptions: Sendable, Equatable {
    /// The order of the list (with ``near`` and no ``within``: the order of the nearest ``limit``
    /// earthquakes).
    public enum Sort: String, Sendable, CaseIterable {
        /// Newest first.
        case time
        /// Strongest first.
        case magnitude
        /// Nearest to ``ListOptions/near`` first.
        case distance
    }

    /// Only earthquakes of at least this magnitude.
    public var minMagnitude: Double?
    /// Only earthquakes of at most this magnitude.
    public var maxMagnitude: Double?
    /// Only earthquakes at or after this moment.
    public var since: Date?
    /// Only earthquakes before this moment (`--until`: the end of its day for a date alone).
    public var until: Date?
    /// With ``near``: only earthquakes at most this many kilometres away (all of them, ordered by ``sort``,
    /// up to ``limit``). Without it, `near` keeps the nearest ``limit``.
    public var within: Double?
    /// At most this many earthquakes; nil for all.
    public var limit: Int?
    /// The earthquakes nearest to this point, nearest first, with their distances.
    public var near: Coordinate?
    /// Newest or strongest first.
    public var sort: Sort
    /// Only these event types ("earthquake", "quarry blast", …); empty for all.
    public var types: [String]
    /// Not these event types.
    public var excludedTypes: [String]
    /// CSV instead of a table.
    public var csv: Bool

    public init(
        minMagnitude: Double? = nil, maxMagnitude: Double? = nil, since: Date? = nil, limit: Int? = 20,
        near: Coordinate? = nil, sort: Sort = .time, types: [String] = [], excludedTypes: [String] = [],
        csv: Bool = false, until: Date? = nil, within: Double? = nil
    ) {
        self.minMagnitude = minMagnitude
        self.maxMagnitude = maxMagnitude
        self.since = since
        self.until = until
        self.within = within
        self.limit = limit
        self.near = near
        self.sort = sort
        self.types = types
        self.excludedTypes = excludedTypes
        self.csv = csv
    }

    /// The filters, for the store.
    public var filter: EarthquakeFilter {
        EarthquakeFilter(
            minMagnitude: minMagnitude, maxMagnitude: maxMagnitude, since: since, until: until,
            within: near.flatMap { point in
                within.map {
                    EarthquakeFilter.Circle(latitude: point.latitude, longitude: point.longitude, radiusKilometres: $0)
                }
            }, types: types, excludedTypes: excludedTypes)
    }

    /// `--type quarry\ blast,explosion --type ice\ quake` → the names, trimmed, without empties.
    public static func typeNames(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty
        }
    }

    /// Checks the magnitude range.
    ///
    /// - Throws: ``CLIError`` (a usage error) when the minimum is above the maximum.
    public func validated() throws(CLIError) -> ListOptions {
        for (option, value) in [("--min-magnitude", minMagnitude), ("--max-magnitude", maxMagnitude)] {
            if let value, !value.isFinite {
                throw CLIError.usage("\(option) must be a number such as 4.5 or -0.5; got \(value)")
            }
        }
        if let minMagnitude, let maxMagnitude, minMagnitude > maxMagnitude {
            throw CLIError.usage(
                "--min-magnitude \(minMagnitude) is above --max-magnitude \(maxMagnitude); nothing could match")
        }
        if let since, let until, since >= until {
            throw CLIError.usage(
                "--since is not before --until (\(CivilTime.minute(since.millisecondsSince1970)) UTC and "
                    + "\(CivilTime.minute(until.millisecondsSince1970)) UTC); nothing could match")
        }
        if within != nil, near == nil {
            throw CLIError.usage("--within needs --near: give the point, for example --near home --within 300km")
        }
        if sort == .distance, near == nil {
            throw CLIError.usage("--sort distance needs --near: give the point, for example --near -33.9,151.2")
        }
        if let limit, limit < 1 {
            throw CLIError.usage(
                "--limit must be at least 1 (--all lists every match); got \(limit), for example --limit 50")
        }
        return self
    }
}

/// A point given as `LAT,LON` in degrees.
///
/// ## Thread safety
/// A `Sendable` value.
public struct Coordinate: Sendable, Equatable, Codable {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// Parses `"35.68,139.69"` or `"-33.9,151.2"` (spaces allowed).
    ///
    /// - Parameter option: The option being read, for the message (`--near`, `--from`, …).
    /// - Throws: ``CLIError`` (a usage error) that shows the expected form.
    public init(parsing text: String, option: String = "--near") throws(CLIError) {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        // Decimal degrees only: `Double` also reads hexadecimal (`0x10` as 16) and exponents.
        func degrees(_ text: String) -> Double? {
            let digits = text.hasPrefix("-") || text.hasPrefix("+") ? text.dropFirst() : Substring(text)
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) else { return nil }
            return Double(text)
        }
        guard parts.count == 2, let latitude = degrees(parts[0]), let longitude = degrees(parts[1]),
            latitude.isFinite, longitude.isFinite
        else {
            throw CLIError.usage(
                "\(option) expects LAT,LON in degrees, for example 35.68,139.69 or -33.9,151.2; got \"\(text)\"")
        }
        guard (-90...90).contains(latitude), (-180...180).contains(longitude) else {
            throw CLIError.usage("\(option) \(text): latitude must be in -90...90 and longitude in -180...180")
        }
        self.init(latitude: latitude, longitude: longitude)
    }

    /// "LAT,LON" as ``init(parsing:option:)`` reads it back: decimal degrees, never an exponent (Swift
    /// writes 0.00001 as "1e-05"), to ten decimals (about 0.01 mm), without trailing zeros.
    var storedText: String { "\(Self.decimal(latitude)),\(Self.decimal(longitude))" }

    private static func decimal(_ degrees: Double) -> String {
        var text = String(format: "%.10f", locale: Locale(identifier: "en_US_POSIX"), degrees)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text == "-0" ? "0" : text
    }
}
