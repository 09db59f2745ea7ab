import EarthquakesKit
import Foundation

/// The JSON the tool prints with `--json`: stable field names, ISO 8601 times, `null` for unknowns. The
/// `type` is never `null`: an event the feed left untyped is an earthquake, as filters and `status` count it.
/// `distanceKm` is the exception: it is there only when a distance was measured (`--near`, `--from`,
/// a home), and left out otherwise.
struct QuakeJSON: Encodable {
    var id: String
    var time: String?
    var updated: String?
    var magnitude: Double?
    var magnitudeType: String?
    var place: String?
    var title: String
    var latitude: Double
    var longitude: Double
    var depthKm: Double
    var distanceKm: Double?
    var type: String
    var status: String?
    var tsunami: Bool?
    var alert: String?
    /// "Did You Feel It?" reports.
    var felt: Int?
    /// The largest reported (community) intensity, and the largest estimated instrumental one.
    var cdi: Double?
    var mmi: Double?
    /// The USGS significance (0 to about 3000: bigger is more significant).
    var significance: Int?
    var network: String?
    var url: String?

    init(_ quake: Earthquake, distanceKm: Double? = nil) {
        id = quake.id
        time = quake.time.map(Self.iso)
        updated = quake.updated.map(Self.iso)
        magnitude = quake.magnitude
        magnitudeType = quake.magnitudeType
        place = quake.place
        title = quake.displayTitle
        latitude = quake.latitude
        longitude = quake.longitude
        depthKm = quake.depth
        self.distanceKm = distanceKm.map { ($0 * 10).rounded() / 10 }
        // The type by the rule of filters and counts: an untyped event is an earthquake.
        type = quake.normalizedType
        status = quake.status
        tsunami = quake.tsunami
        alert = quake.alert
        felt = quake.felt
        cdi = quake.cdi
        mmi = quake.mmi
        significance = quake.significance
        network = quake.network
        url = quake.url
    }

    // Encode nil as null rather than leaving keys out, so every object has the same keys — except
    // `distanceKm`, which only a listing or `show` that measured distances has.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(time, forKey: .time)
        try c.encode(updated, forKey: .updated)
        try c.encode(magnitude, forKey: .magnitude)
        try c.encode(magnitudeType, forKey: .magnitudeType)
        try c.encode(place, forKey: .place)
        try c.encode(title, forKey: .title)
        try c.encode(latitude, forKey: .latitude)
        try c.encode(longitude, forKey: .longitude)
        try c.encode(depthKm, forKey: .depthKm)
        try c.encodeIfPresent(distanceKm, forKey: .distanceKm)
        try c.encode(type, forKey: .type)
        try c.encode(status, forKey: .status)
        try c.encode(tsunami, forKey: .tsunami)
        try c.encode(alert, forKey: .alert)
        try c.encode(felt, forKey: .felt)
        try c.encode(cdi, forKey: .cdi)
        try c.encode(mmi, forKey: .mmi)
        try c.encode(significance, forKey: .significance)
        try c.encode(network, forKey: .network)
        try c.encode(url, forKey: .url)
    }

    private enum CodingKeys: String, CodingKey {
        case id, time, updated, magnitude, magnitudeType, place, title, latitude, longitude, depthKm, distanceKm
        case type, status, tsunami, alert, felt, cdi, mmi, significance, network, url
    }

    /// `yyyy-MM-ddTHH:mm:ss.SSSZ`, in the proleptic Gregorian calendar ISO 8601 prescribes, as `--csv`
    /// writes it (an `ISO8601DateFormatter` switches to the Julian calendar before 1582-10-15).
    static func iso(_ date: Date) -> String {
        let milliseconds = date.millisecondsSince1970
        var text = ""
        CivilTime.appendMinute(milliseconds, seconds: true, to: &text)
        let millis = Int((milliseconds % 1000 + 1000) % 1000)
        let fraction = String(millis)
        let day = text.lastIndex(of: " ").map { text.replacingCharacters(in: $0...$0, with: "T") } ?? text
        return day + "." + String(repeating: "0", count: 3 - fraction.count) + fraction + "Z"
    }
}

/// The result of `refresh --json`.
struct RefreshJSON: Encodable {
    var source: String
    var database: String
    var inserted: Int
    var updated: Int
    var unchanged: Int
    var total: Int
    /// Features that repeated an id given in the feed (only the newest copy of each, by `updated`, was
    /// imported).
    var duplicates: Int
    var duplicateIDs: [String]
    /// Unreadable features that were skipped (each named in ``warnings``).
    var skipped: Int
    var warnings: [String]
    /// How many events of each type the feed had ("earthquake", "quarry blast", …).
    var types: [String: Int]
    /// Sample events an older version had put into this database, removed after the import.
    var removedSampleEvents: Int
    /// Events the feed marks deleted (not stored), and how many stored copies of them were removed.
    var deleted: Int
    var removedDeleted: Int
    /// Stored rows of events the USGS now lists under another id (its `ids`), replaced.
    var merged: Int
    /// Why the refresh failed although the import ran: no feature of the feed could be read.
    var error: String?
}

enum JSONText {
    /// Pretty (or with `oneLine`, compact), sorted-key JSON text.
    static func encode(_ value: some Encodable, oneLine: Bool = false) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting =
            oneLine ? [.sortedKeys, .withoutEscapingSlashes] : [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
