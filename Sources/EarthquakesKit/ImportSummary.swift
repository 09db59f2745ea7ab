/// What ``EarthquakeStore/importFeed(_:)-([Earthquake])`` did.
///
/// ### Thread safety
/// A value type and `Sendable`.
public struct ImportSummary: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// Earthquakes whose id was not in the store.
    public var inserted: Int
    /// Earthquakes already stored whose values changed (a new magnitude, a review…).
    public var updated: Int
    /// Earthquakes already stored with exactly these values; not rewritten.
    public var unchanged: Int

    /// Creates a summary.
    public init(inserted: Int = 0, updated: Int = 0, unchanged: Int = 0) {
        self.inserted = inserted
        self.updated = updated
        self.unchanged = unchanged
    }

    /// The number of earthquakes in the import.
    public var total: Int { inserted + updated + unchanged }

    public var description: String {
        "\(total) earthquakes: \(inserted) inserted, \(updated) updated, \(unchanged) unchanged"
    }
}
