public import Foundation

/// Which earthquakes a listing keeps: every filter is applied in SQL.
///
/// ### Thread safety
/// A value type and `Sendable`.
public struct EarthquakeFilter: Sendable, Equatable, Hashable, Codable {
    /// Keep events of at least this magnitude (events without a magnitude are then excluded).
    public var minMagnitude: Double?
    /// Keep events of at most this magnitude (events without a magnitude are then excluded).
    public var maxMagnitude: Double?
    /// Keep events at or after this time (events without a time are then excluded).
    public var since: Date?
    /// Keep events before this time (events without a time are then excluded).
    public var until: Date?
    /// Keep events within a distance of a point (great-circle distance from the epicentre).
    public var within: Circle?
    /// Keep only these event types (`"earthquake"`, `"quarry blast"`, …), compared without case; empty: all.
    public var types: [String]
    /// Leave out these event types, compared without case. An event without a type is kept.
    public var excludedTypes: [String]
    /// Keep events whose PAGER alert level is this one or higher (events without one are then excluded).
    public var minimumAlert: AlertLevel?
    /// Keep events first stored after this mark of the store (``EarthquakeStore/latestMark()``); events
    /// stored by versions that kept no marks are then excluded.
    public var storedAfter: Int64?
    /// Keep events first stored at or before this mark.
    public var storedThrough: Int64?

    public init(
        minMagnitude: Double? = nil, maxMagnitude: Double? = nil, since: Date? = nil, until: Date? = nil,
        within: Circle? = nil, types: [String] = [], excludedTypes: [String] = [], minimumAlert: AlertLevel? = nil,
        storedAfter: Int64? = nil, storedThrough: Int64? = nil
    ) {
        self.minMagnitude = minMagnitude
        self.maxMagnitude = maxMagnitude
        self.since = since
        self.until = until
        self.within = within
        self.types = types
        self.excludedTypes = excludedTypes
        self.minimumAlert = minimumAlert
        self.storedAfter = storedAfter
        self.storedThrough = storedThrough
    }

    /// The USGS PAGER alert levels (estimated impact), lowest first.
    public enum AlertLevel: String, Sendable, Codable, CaseIterable, Comparable {
        case green, yellow, orange, red

        public static func < (lhs: AlertLevel, rhs: AlertLevel) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }
    }

    /// A point and a radius: the area of ``EarthquakeFilter/within``.
    ///
    /// ### Thread safety
    /// A value type and `Sendable`.
    public struct Circle: Sendable, Equatable, Hashable, Codable {
        /// The centre, in degrees.
        public var latitude: Double
        public var longitude: Double
        /// The radius, in kilometres (events at exactly this distance are kept).
        public var radiusKilometres: Double

        public init(latitude: Double, longitude: Double, radiusKilometres: Double) {
            self.latitude = latitude
            self.longitude = longitude
            self.radiusKilometres = radiusKilometres
        }
    }
}

/// The order of a listing.
///
/// ### Thread safety
/// A value type and `Sendable`.
public enum ListingOrder: Sendable, Equatable, Hashable {
    /// Newest first; events without a time last; ties by id.
    case time
    /// Strongest first; events without a magnitude last; ties newest first, then by id.
    case magnitude
    /// Nearest to the point first (great-circle distance); ties by id.
    case distance(latitude: Double, longitude: Double)
}
