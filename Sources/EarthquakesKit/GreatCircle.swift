import Foundation

/// Distances on the Earth's surface, by the haversine formula on a sphere.
///
/// The error against the WGS84 ellipsoid is below 0.5 %, plenty to rank earthquakes by
/// distance.
///
/// ### Thread safety
/// Pure functions and constants; safe from any thread.
public enum GreatCircle {
    /// The mean Earth radius (IUGG), in kilometres.
    public static let earthRadiusKilometers = 6371.0088

    /// Kilometres per degree of latitude on the sphere (about 111.2).
    public static let kilometersPerDegree = earthRadiusKilometers * .pi / 180

    /// The great-circle distance between two points given in degrees, in kilometres.
    ///
    /// ```swift
    /// GreatCircle.distanceKilometers(from: (35.6762, 139.6503), to: (37.7749, -122.4194))  // ≈ 8 270
    /// ```
    public static func distanceKilometers(
        from a: (latitude: Double, longitude: Double),
        to b: (latitude: Double, longitude: Double)
    ) -> Double {
        let radians = Double.pi / 180
        let lat1 = a.latitude * radians
        let lat2 = b.latitude * radians
        let dLat = (b.latitude - a.latitude) * radians
        let dLon = (b.longitude - a.longitude) * radians
        let sinLat = sin(dLat / 2)
        let sinLon = sin(dLon / 2)
        let h = sinLat * sinLat + cos(lat1) * cos(lat2) * sinLon * sinLon
        return 2 * earthRadiusKilometers * asin(min(1, h.squareRoot()))
    }
}
