/// An earthquake with its distance from the point of a ``EarthquakeStore/near(latitude:longitude:limit:minMagnitude:since:within:)``
/// query.
///
/// ### Thread safety
/// A value type and `Sendable`.
public struct NearbyEarthquake: Sendable, Equatable, Hashable {
    /// The earthquake.
    public var earthquake: Earthquake
    /// Great-circle distance from the query point to the epicentre, in kilometres.
    public var distanceKilometers: Double

    /// Creates a value.
    public init(earthquake: Earthquake, distanceKilometers: Double) {
        self.earthquake = earthquake
        self.distanceKilometers = distanceKilometers
    }
}
