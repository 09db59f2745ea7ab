import EarthquakesKit
import Foundation

/// Small hand-made earthquakes for store tests.
enum Quakes {
    /// 2025-01-01T00:00:00Z
    static let reference = Date(timeIntervalSince1970: 1_735_689_600)

    static func make(
        _ id: String,
        latitude: Double = 0,
        longitude: Double = 0,
        magnitude: Double? = 3,
        hoursAgo: Double? = 1,
        place: String? = nil
    ) -> Earthquake {
        Earthquake(
            id: id,
            latitude: latitude,
            longitude: longitude,
            depth: 10,
            magnitude: magnitude,
            place: place ?? "test place \(id)",
            time: hoursAgo.map { reference.addingTimeInterval(-$0 * 3600) },
            status: "automatic"
        )
    }

    static let tokyo = make("tokyo", latitude: 35.6762, longitude: 139.6503, magnitude: 6.1, hoursAgo: 5)
    static let sanFrancisco = make("sf", latitude: 37.7749, longitude: -122.4194, magnitude: 4.2, hoursAgo: 2)
    static let anchorage = make("anchorage", latitude: 61.2181, longitude: -149.9003, magnitude: 5.0, hoursAgo: 30)
    static let quito = make("quito", latitude: -0.1807, longitude: -78.4678, magnitude: nil, hoursAgo: 1)
    static let undated = make("undated", latitude: -33.4489, longitude: -70.6693, magnitude: 2.0, hoursAgo: nil)

    static let all = [tokyo, sanFrancisco, anchorage, quito, undated]
}
