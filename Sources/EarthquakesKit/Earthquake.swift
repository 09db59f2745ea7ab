public import Foundation

/// One earthquake (or other seismic event) as published by the USGS summary feeds.
///
/// Only ``id`` and the coordinates identify an event; every other property is optional,
/// because the USGS schema changed over the years (old feeds have no `title`, a `null`
/// `tsunami`, uppercase `status`…) and third-party rewrites drop fields.
///
/// ```swift
/// let feed = try FeedParser().parse(data)
/// for quake in feed.earthquakes {
///     print(quake.displayTitle, quake.latitude, quake.longitude)
/// }
/// ```
///
/// ### Units
/// - ``latitude`` and ``longitude`` are degrees (WGS84), ``depth`` is kilometres (it can be
///   negative: above the geoid).
/// - ``time`` and ``updated`` are absolute dates; the feed's milliseconds-since-1970 values are
///   converted by ``FeedParser``.
/// - ``timeZoneOffset`` is minutes from UTC at the epicentre, when the feed gives it.
///
/// ### Thread safety
/// `Earthquake` is a value type and `Sendable`: copies can be shared freely between tasks
/// and threads.
public struct Earthquake: Sendable, Equatable, Hashable, Codable {
    /// The USGS event id, for example `"us6000rka0"`. Never empty in a parsed feed.
    public var id: String
    /// Latitude of the epicentre in degrees, -90...90.
    public var latitude: Double
    /// Longitude of the epicentre in degrees, -180...180.
    public var longitude: Double
    /// Depth of the hypocentre in kilometres. Negative values are above the geoid.
    public var depth: Double

    /// Magnitude; may be integer-valued, negative (tiny events) or unknown.
    public var magnitude: Double?
    /// The magnitude scale, for example `"ml"`, `"mb"`, `"Md"`.
    public var magnitudeType: String?
    /// A human description of the location, for example `"105 km WNW of Höfn, Iceland"`.
    public var place: String?
    /// Origin time of the event.
    public var time: Date?
    /// When the USGS last updated the event.
    public var updated: Date?
    /// Offset of the local time zone at the epicentre from UTC, in minutes.
    public var timeZoneOffset: Int?
    /// The event's web page.
    public var url: String?
    /// The event's detail GeoJSON document.
    public var detailURL: String?
    /// Number of "Did You Feel It?" reports.
    public var felt: Int?
    /// Maximum reported community intensity ("Did You Feel It?").
    public var cdi: Double?
    /// Maximum estimated instrumental intensity (ShakeMap).
    public var mmi: Double?
    /// PAGER alert level: `"green"`, `"yellow"`, `"orange"`, `"red"` (old feeds: `"pending"`).
    public var alert: String?
    /// Review status, normalised to lower case: `"automatic"`, `"reviewed"`, `"deleted"`.
    public var status: String?
    /// Whether the event is in an oceanic region that may trigger a tsunami warning.
    /// `nil` in old feeds, which published `null`.
    public var tsunami: Bool?
    /// USGS significance, 0...1000 and more: bigger is more significant.
    public var significance: Int?
    /// The contributing network, for example `"us"`, `"ak"`, `"nc"`.
    public var network: String?
    /// The network's own code for the event.
    public var code: String?
    /// The kind of event: `"earthquake"`, `"quarry blast"`, `"explosion"`, …
    public var type: String?
    /// The feed's title, for example `"M 3.6 - 23 km NW of Old Harbor, Alaska"`.
    /// Absent in old feeds; see ``displayTitle``.
    public var title: String?
    /// The other ids the feed lists for the event (its `ids` property): the USGS changes an event's
    /// preferred id when another network's solution is preferred, and an import removes the rows stored
    /// under the earlier ones. Not stored, compared nor encoded: only a parsed feed has it.
    var otherIDs = OtherIDs()

    /// The other ids of an event; equal to every other (an earthquake read back from the store has none).
    struct OtherIDs: Sendable, Hashable {
        var ids: [String] = []
        /// The ids of `list` (`",ci100,us200,"`) other than `id`, each once, in their order.
        init(_ list: String? = nil, excluding id: String = "") {
            guard let list else { return }
            var seen: Set<Substring> = [Substring(id)]
            ids = list.split(separator: ",").compactMap { part in
                let trimmed = part.trimmingCharacters(in: .whitespaces)
                guard !trimmed.isEmpty, seen.insert(Substring(trimmed)).inserted else { return nil }
                return trimmed
            }
        }
        static func == (_: OtherIDs, _: OtherIDs) -> Bool { true }
        func hash(into hasher: inout Hasher) {}
    }

    private enum CodingKeys: String, CodingKey {
        case id, latitude, longitude, depth, magnitude, magnitudeType, place, time, updated, timeZoneOffset, url
        case detailURL, felt, cdi, mmi, alert, status, tsunami, significance, network, code, type, title
    }

    /// Creates an earthquake. Only the identity and the coordinates are required.
    ///
    /// `status` is stored lower-cased, as ``FeedParser`` does.
    public init(
        id: String,
        latitude: Double,
        longitude: Double,
        depth: Double,
        magnitude: Double? = nil,
        magnitudeType: String? = nil,
        place: String? = nil,
        time: Date? = nil,
        updated: Date? = nil,
        timeZoneOffset: Int? = nil,
        url: String? = nil,
        detailURL: String? = nil,
        felt: Int? = nil,
        cdi: Double? = nil,
        mmi: Double? = nil,
        alert: String? = nil,
        status: String? = nil,
        tsunami: Bool? = nil,
        significance: Int? = nil,
        network: String? = nil,
        code: String? = nil,
        type: String? = nil,
        title: String? = nil
    ) {
        self.id = id
        self.latitude = latitude
        self.longitude = longitude
        self.depth = depth
        self.magnitude = magnitude
        self.magnitudeType = magnitudeType
        self.place = place
        self.time = time
        self.updated = updated
        self.timeZoneOffset = timeZoneOffset
        self.url = url
        self.detailURL = detailURL
        self.felt = felt
        self.cdi = cdi
        self.mmi = mmi
        self.alert = alert
        self.status = status?.lowercased()
        self.tsunami = tsunami
        self.significance = significance
        self.network = network
        self.code = code
        self.type = Self.storedType(type)
        self.title = title
    }

    /// The feed's ``title`` or, when the feed has none, one built the way the USGS builds it:
    /// `"M 2.5 - 10 km SW of Volcano, Hawaii"`.
    ///
    /// The magnitude is rounded to one decimal; a missing magnitude shows as `"M ?"`, a missing
    /// place falls back to the event id.
    public var displayTitle: String {
        if let title, !title.isEmpty { return title }
        let magnitudeText = magnitude.map(Self.oneDecimal) ?? "?"
        let location = (place?.isEmpty == false ? place : nil) ?? "event \(id)"
        return "M \(magnitudeText) - \(location)"
    }

    /// Formats a value with exactly one decimal, independent of locale:
    /// 2 → "2.0", 7.64 → "7.6", -0.38 → "-0.4", -0.04 → "0.0".
    static func oneDecimal(_ value: Double) -> String {
        guard value.isFinite else { return "?" }
        let tenths = Int((value * 10).rounded())
        let sign = tenths < 0 ? "-" : ""
        let size = tenths.magnitude
        return "\(sign)\(size / 10).\(size % 10)"
    }
}

extension Date {
    /// Creates a date from milliseconds since 1970, the unit of the USGS feeds.
    ///
    /// Every date in this module is made through this initialiser, so a value that goes
    /// through the database (stored as integer milliseconds) compares equal when it comes back.
    init(usgsMilliseconds milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// Milliseconds since 1970, rounded to the nearest millisecond.
    var usgsMilliseconds: Int64 {
        Int64((timeIntervalSince1970 * 1000).rounded())
    }
}

extension Earthquake {
    /// The type of an event whose `type` is missing or empty: the USGS feeds only earthquakes untyped.
    public static let defaultType = "earthquake"

    /// The one rule for event types, used by import counts, `list --type` and `status`: a missing or
    /// blank type is ``defaultType``; otherwise the type trimmed and lower-cased, with underscores read as
    /// spaces, so `"Earthquake"` and `"earthquake"` are the same type, and older feeds' `"quarry_blast"`
    /// is `"quarry blast"`. Older feeds' short names are read as today's (``typeAliases``: `"quarry"`).
    public static func normalizedType(_ type: String?) -> String {
        var text = (type ?? "").trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        if text.contains("_") { text = text.replacingOccurrences(of: "_", with: " ") }
        if text.isEmpty { return defaultType }
        return typeAliases[text] ?? text
    }

    /// Older names of event types, by the name the USGS uses today.
    public static let typeAliases = ["quarry": "quarry blast"]

    /// The type as stored (and kept in ``type``): trimmed of whitespace and line breaks, `nil` when blank,
    /// so that the database, its SQL queries and every display agree. Case is kept (``normalizedType(_:)``
    /// compares without it).
    public static func storedType(_ type: String?) -> String? {
        guard let type else { return nil }
        if let first = type.unicodeScalars.first, let last = type.unicodeScalars.last,
            !first.properties.isWhitespace, !last.properties.isWhitespace
        {
            return type
        }
        let trimmed = type.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? nil : trimmed
    }

    /// ``type`` by the rule of ``normalizedType(_:)``.
    public var normalizedType: String { Self.normalizedType(type) }

    /// Whether the event is an earthquake (typed so, or untyped).
    public var isEarthquakeType: Bool { normalizedType == Self.defaultType }

    /// Whether the USGS marks the event deleted (`status` "deleted"): such events are not stored.
    public var isDeleted: Bool { status?.lowercased() == "deleted" }
}
