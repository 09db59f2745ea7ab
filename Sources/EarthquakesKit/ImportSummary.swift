/// What an import did: ``EarthquakeStore/importFeed(_:whileWaiting:commitGate:)-([Earthquake],_,_)`` fills the
/// counts of rows; ``GetEarthquakes`` and ``ImportFeedJob`` add ``skipped`` from the parsed feed.
///
/// ```
/// 1349 earthquakes: 1340 inserted, 9 updated, 0 unchanged
/// 1351 earthquakes: 1351 inserted, 0 updated, 0 unchanged; 2 repeated ids (the last of each kept: us7000abcd, ak0251); 1 feature skipped
/// ```
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
    /// Features that repeated an id seen in the same import. Only one feature of each id was imported
    /// (the newest by `updated`, the last on a tie); the others are counted here and nowhere else.
    public var duplicates: Int
    /// The ids that appeared more than once in the import, in the order they first appeared.
    public var duplicateIDs: [String]
    /// Features of the feed that the parser skipped because they could not be read (see
    /// ``FeedWarning/skippedFeature(index:id:problem:)``); not part of ``total``.
    public var skipped: Int
    /// How many of the imported events (``total``) are not earthquakes, by their USGS `type`
    /// (`"quarry blast"`, `"explosion"`, `"ice quake"`…), lower-cased. Events typed `"earthquake"` (in
    /// any case), untyped or typed `""` are not counted here (``Earthquake/normalizedType(_:)``).
    public var otherTypes: [String: Int]
    /// Events the feed marks deleted (`status` "deleted"): not stored, and not part of ``total``.
    public var deleted: Int
    /// Stored events removed because the feed marks them deleted (at most ``deleted``).
    public var removed: Int
    /// Stored rows removed because they were an imported event under an earlier id: the feed's `ids`
    /// lists every id an event had, and the USGS changes its preferred id when another network's
    /// solution is preferred. Not part of ``total`` (the event is counted under its id).
    public var merged: Int

    /// Creates a summary.
    public init(
        inserted: Int = 0, updated: Int = 0, unchanged: Int = 0, duplicates: Int = 0, duplicateIDs: [String] = [],
        skipped: Int = 0, otherTypes: [String: Int] = [:], deleted: Int = 0, removed: Int = 0, merged: Int = 0
    ) {
        self.merged = merged
        self.deleted = deleted
        self.removed = removed
        self.inserted = inserted
        self.updated = updated
        self.unchanged = unchanged
        self.duplicates = duplicates
        self.duplicateIDs = duplicateIDs
        self.skipped = skipped
        self.otherTypes = otherTypes
    }

    /// The number of distinct earthquakes in the import (repeated ids count once).
    public var total: Int { inserted + updated + unchanged }

    /// The number of imported events typed `"earthquake"` (or untyped): ``total`` minus ``otherTypes``.
    public var earthquakes: Int { total - otherTypes.values.reduce(0, +) }

    public var description: String {
        var text =
            "\(total) earthquake\(total == 1 ? "" : "s"): \(inserted) inserted, \(updated) updated, \(unchanged) unchanged"
        if duplicates > 0 {
            let shown = duplicateIDs.prefix(5).joined(separator: ", ") + (duplicateIDs.count > 5 ? ", …" : "")
            text +=
                "; \(duplicates) repeated id\(duplicates == 1 ? "" : "s") (the newest of each kept: \(shown))"
        }
        if skipped > 0 { text += "; \(skipped) feature\(skipped == 1 ? "" : "s") skipped" }
        if deleted > 0 { text += "; \(deleted) marked deleted (\(removed) removed)" }
        if merged > 0 {
            text +=
                "; \(merged) stored under an earlier id replaced (the USGS changed the event\(merged == 1 ? "'s" : "s'") id)"
        }
        return text
    }
}
