import EarthquakesKit
public import Foundation

extension EarthquakesCLI {
    /// `list`: the stored earthquakes matching the options, as a table, CSV or JSON.
    ///
    /// The table and CSV are streamed: rows are read one at a time from SQLite and written in 64 KB
    /// pieces, so memory stays flat and 200,000 rows print about as fast as `sqlite3` prints them.
    /// With `--near` the distance is computed and ranked in SQL, keeping only `limit` rows.
    ///
    /// - Parameter explicitSort: with ``ListOptions/near``, whether `sort` was given (the nearest
    ///   `limit` events are then re-ordered by it); otherwise they stay nearest first.
    ///   - new: only the events stored since the last `list --new` (all of them, with no earlier look); the
    ///     look is then remembered in the database.
    public func list(
        _ options: ListOptions, database: String?, json: Bool, explicitSort: Bool = true, sample: Bool = false,
        new: Bool = false
    ) throws {
        if new, sample {
            throw CLIError.usage("--new lists what came into your database since you last looked; not with --sample")
        }
        let (store, path) = try openForReading(database, sample: sample)
        defer { closeAtEnd(store.close) }
        try Self.checkTypes(options.types, excluded: options.excludedTypes, in: store)
        var filter = options.filter
        var look: (last: EarthquakeStore.Look?, now: EarthquakeStore.Look)?
        if new {
            // Up to the mark read now: an import that commits while this lists is new at the next look.
            let last = try store.lastLook(named: Self.listLookName)
            let current = EarthquakeStore.Look(mark: try store.latestMark(), date: now())
            filter.storedAfter = last?.mark ?? 0
            filter.storedThrough = current.mark
            look = (last, current)
        }
        if let look, try look.now.mark == 0 || store.count(matching: filter) == 0 {
            let since = look.last.map { "since you last looked (\(RelativeTime.ago($0.date, now: look.now.date)))" }
            if json { console.print("[]") }
            let text =
                "Nothing new \(since ?? "stored yet (new events are counted from this version's first refresh)")."
            if options.csv || json { console.error(text + "\n") } else { console.print(text) }
            if options.csv {
                let writer = makeWriter(options, distances: options.near != nil)
                writer.header()
                writer.finish()
            }
            // Nothing was shown that a next look could show again: a look not remembered needs no note.
            rememberLook(look.now, path: path, quietly: true)
            return
        }
        // (`--new` says itself how many new events it left out.)
        try listRows(
            options, filter: filter, store: store, path: path, json: json, explicitSort: explicitSort,
            notesMore: look == nil)
        if let look {
            let unshown = try options.limit.map { limit in try store.count(matching: filter) - limit } ?? 0
            // A look not remembered says so itself (the next `list --new` shows these events again).
            if rememberLook(look.now, path: path), unshown > 0 {
                console.error(
                    "note: \(unshown) more new \(unshown == 1 ? "event was" : "events were") not shown "
                        + "(--limit \(options.limit ?? 0)); they count as seen from now on.\n")
            }
        }
    }

    private func listRows(
        _ options: ListOptions, filter: EarthquakeFilter, store: EarthquakeStore, path: String, json: Bool,
        explicitSort: Bool, notesMore: Bool
    ) throws {
        let order: ListingOrder
        var reorder = false
        if let point = options.near, options.within == nil {
            // The nearest `limit`, then in the order asked for.
            order = .distance(latitude: point.latitude, longitude: point.longitude)
            reorder = explicitSort && options.sort != .distance
        } else {
            // Every match (within the radius, with `--within`) in the order asked for, up to `limit`.
            switch options.sort {
            case .time: order = .time
            case .magnitude: order = .magnitude
            case .distance:
                order = .distance(latitude: options.near?.latitude ?? 0, longitude: options.near?.longitude ?? 0)
            }
        }

        if json || reorder {
            var rows = try store.earthquakes(matching: filter, order: order, limit: options.limit)
            if reorder { rows = Self.sorted(rows, by: options.sort) }
            if json {
                console.print(
                    try JSONText.encode(rows.map { QuakeJSON($0.earthquake, distanceKm: $0.distanceKilometers) }))
                return
            }
            let writer = makeWriter(options, distances: options.near != nil)
            // CSV with no rows is still CSV: its header line (the note goes to standard error).
            if !rows.isEmpty || options.csv { writer.header() }
            for (quake, distance) in rows { RowViews.with(quake, distance: distance) { writer.row($0) } }
            writer.finish()
            if rows.isEmpty { try printNoMatch(store, path: path, csv: options.csv) }
            if notesMore { try noteMore(shown: rows.count, options, filter: filter, store: store) }
            return
        }

        let writer = makeWriter(options, distances: options.near != nil)
        try store.forEachRow(matching: filter, order: order, limit: options.limit) { row in
            if writer.rows == 0 { writer.header() }
            writer.row(row)
        }
        if writer.rows == 0, options.csv { writer.header() }
        writer.finish()
        if writer.rows == 0 {
            try printNoMatch(store, path: path, csv: options.csv)
        } else if console.isErrorTerminal, !options.csv {
            if let age = try dataAge(store) { console.error(age + "\n") }
        }
        if notesMore { try noteMore(shown: writer.rows, options, filter: filter, store: store) }
    }

    /// A list cut at its `--limit` says so on standard error, with how many matches it left out: a list
    /// of 20 otherwise reads as "these are all". (Not for `--near` alone, which asks for the nearest few.)
    private func noteMore(shown: Int, _ options: ListOptions, filter: EarthquakeFilter, store: EarthquakeStore) throws {
        guard let limit = options.limit, shown == limit, options.near == nil || options.within != nil else { return }
        let count = try store.count(matching: filter)
        guard count > shown else { return }
        console.error(
            "note: \(count - shown) more matching \(count - shown == 1 ? "event is" : "events are") not shown "
                + "(--limit \(limit)); --all lists every match.\n")
    }

    /// `prune --before WHEN [--dry-run]`: deletes the events (of every type) older than a moment, or with
    /// `dryRun` only counts them. After deleting, the file is compacted (``EarthquakeStore/compact()``)
    /// when enough of it became free, and the line says how much it shrank. Events without a time are never deleted (their age is unknown); the
    /// line says how many are left and how many of those have no time. A cut-off that is not in the past
    /// (a date to come, `0d`) is pointed out on standard error: it deletes every event that has a time.
    public func prune(before date: Date, database: String?, dryRun: Bool = false) throws {
        let path = DatabaseLocation.path(option: database, environment: environment)
        let store: EarthquakeStore
        if dryRun {
            store = try openForReading(database, sample: false).0
        } else {
            try DatabaseLocation.checkReadable(path)
            try DatabaseLocation.prepareForWriting(path, explicit: true)
            store = try EarthquakeStore(path: path, mode: .mustExist)
        }
        defer { closeAtEnd(store.close) }
        let older =
            dryRun
            ? try store.countEarthquakes(before: date)
            : try Self.mappingReadOnly(path) { () throws(StoreError) in try store.deleteEarthquakes(before: date) }
        let left = try store.count() - (dryRun ? older : 0)
        let untimed = try store.countEarthquakesWithoutTime()
        let cutOff = "\(CivilTime.minute(date.millisecondsSince1970)) UTC"
        var line =
            dryRun
            ? "Would delete \(Self.counted(older, "event")) before \(cutOff) from \(path); \(left) would be left"
            : "Deleted \(Self.counted(older, "event")) before \(cutOff) from \(path); \(left) left"
        if untimed > 0 { line += " (\(untimed) with no time, which prune never deletes)" }
        console.print(line + (dryRun ? ". Nothing was deleted (--dry-run)." : "."))
        // SQLite keeps the room of deleted rows in the file: give it back, so the file shrinks. (The rows
        // are deleted whatever happens here.)
        if !dryRun, older > 0 {
            do {
                if let compaction = try store.compact() {
                    console.print(
                        "The file shrank from \(ProgressDisplay.size(compaction.bytesBefore)) to "
                            + "\(ProgressDisplay.size(compaction.bytesAfter)).")
                }
            } catch {
                console.error(
                    "warning: the events were deleted, but the file could not be made smaller: "
                        + "\(Self.message(for: error))\n")
            }
        }
        // A minute's leeway: `--before 0d` means now, computed a moment before this.
        let now = now()
        if date > now.addingTimeInterval(-60) {
            let when = date > now ? "in the future" : "now"
            console.error(
                "warning: the cut-off \(cutOff) is \(when): every event older than it \(dryRun ? "would be" : "was") "
                    + "deleted (only events with no time are kept)\n")
        }
    }

    /// `--type` and `--exclude-type` name types the store holds or event types of the QuakeML standard
    /// that the USGS uses (``eventTypes``): anything else is a mistake (`--type quary`), refused with the
    /// types there are, rather than "No earthquakes match". A real type that no stored event has is
    /// accepted — it matches nothing today, and may tomorrow: refusing it broke the documented
    /// `--exclude-type "quarry blast,explosion"` on a store without explosions, and scripts whenever a
    /// prune removed a type's last event. (An empty store has no types to compare with: its own message
    /// says so.) `list` and `watch` check their filters alike.
    ///
    /// - Throws: ``CLIError`` (a usage error).
    static func checkTypes(_ types: [String], excluded excludedTypes: [String], in store: EarthquakeStore) throws {
        guard !types.isEmpty || !excludedTypes.isEmpty else { return }
        // A type both asked for and left out: nothing can ever match (a watch would alert on nothing, for
        // ever, without a word).
        let excludedSet = Set(excludedTypes.map(Earthquake.normalizedType))
        if let both = types.first(where: { excludedSet.contains(Earthquake.normalizedType($0)) }) {
            throw CLIError.usage(
                "--type and --exclude-type both name \"\(TerminalText.safe(both))\": nothing can match; drop it from one"
            )
        }
        let stored = try store.typeCounts().map { (type: $0.type ?? Earthquake.defaultType, count: $0.count) }
        guard !stored.isEmpty else { return }
        let known = Set(stored.map(\.type)).union(eventTypes)
        for (option, names) in [("--type", types), ("--exclude-type", excludedTypes)] {
            for name in names where !known.contains(Earthquake.normalizedType(name)) {
                // (Types come from feeds: safe for a terminal.)
                let list = stored.map { "\(TerminalText.safe($0.type)) (\($0.count))" }.joined(separator: ", ")
                let guess = closestType(
                    to: Earthquake.normalizedType(name), among: stored.map(\.type) + eventTypes.sorted())
                let hint = guess.map { "did you mean \"\(TerminalText.safe($0))\"? " } ?? ""
                throw CLIError.usage(
                    "\(option) \"\(TerminalText.safe(name))\": no stored event has this type, and the USGS has no "
                        + "such type; \(hint)the types stored are: \(list)")
            }
        }
    }

    /// The event types of QuakeML 1.2 (which the USGS catalogue uses) and the USGS's own `volcanic
    /// explosion`, as ``Earthquake/normalizedType(_:)`` writes them.
    static let eventTypes: Set<String> = [
        "not existing", "not reported", "earthquake", "anthropogenic event", "collapse", "cavity collapse",
        "mine collapse", "building collapse", "explosion", "accidental explosion", "chemical explosion",
        "controlled explosion", "experimental explosion", "industrial explosion", "mining explosion", "quarry blast",
        "road cut", "blasting levee", "nuclear explosion", "induced or triggered event", "rock burst",
        "reservoir loading", "fluid injection", "fluid extraction", "crash", "plane crash", "train crash",
        "boat crash", "other event", "atmospheric event", "sonic boom", "sonic blast", "acoustic noise", "thunder",
        "avalanche", "snow avalanche", "debris avalanche", "hydroacoustic event", "ice quake", "slide", "landslide",
        "rockslide", "meteorite", "volcanic eruption", "volcanic explosion",
    ]

    /// The stored type nearest to a mistyped one (at most a third of its letters away), if any.
    static func closestType(to name: String, among types: [String]) -> String? {
        let limit = max(1, name.count / 3)
        let scored = types.map { ($0, editDistance(name, $0)) }.filter { $0.1 <= limit }
        return scored.min { $0.1 < $1.1 }?.0
    }

    /// The Levenshtein distance between two short texts, by characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let (a, b) = (Array(a), Array(b))
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// Runs a write; SQLite's "readonly database" becomes the message that names the file and the fix.
    static func mappingReadOnly<T>(_ path: String, _ body: () throws(StoreError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            if error.underlying.contains("SQLite error 8") { throw DatabaseLocation.readOnlyError(path) }
            throw error
        }
    }

    /// "Last refreshed 2 h ago from 2.5_day." for a database that recorded its refreshes.
    func dataAge(_ store: EarthquakeStore) throws -> String? {
        guard let last = try store.lastRefresh() else { return nil }
        return "Last refreshed \(RelativeTime.ago(last.date, now: now())) from \(Self.feedName(last.source))."
    }

    /// The short name of a feed: `2.5_day` for `…/summary/2.5_day.geojson`, the file name for a path.
    /// (Safe for a terminal: a file name can hold any character but `/`.)
    static func feedName(_ source: String) -> String {
        let last = URL(string: source)?.lastPathComponent ?? (source as NSString).lastPathComponent
        let name = last.isEmpty ? source : last
        for suffix in [".geojson", ".geojsonp", ".json"] where name.hasSuffix(suffix) {
            return TerminalText.safe(String(name.dropLast(suffix.count)))
        }
        return TerminalText.safe(name)
    }

    private func makeWriter(_ options: ListOptions, distances: Bool) -> ListingWriter {
        let colours = console.isOutputTerminal && (environment["NO_COLOR"] ?? "").isEmpty
        let console = self.console
        return ListingWriter(
            format: options.csv ? .csv : .table, distances: distances, colours: colours, width: tableWidth,
            flush: { console.write($0) })
    }

    /// The width the table fits: the terminal's, else `COLUMNS` (a positive number), else none.
    var tableWidth: Int? {
        if let columns = console.terminalColumns { return columns }
        guard let text = environment["COLUMNS"], let columns = Int(text), columns > 0 else { return nil }
        return columns
    }

    /// Says that nothing matched: on standard output after a table, on standard error after CSV (whose
    /// output stays a CSV file: its header alone).
    /// The name of `list --new`'s look in the database.
    static let listLookName = "list --new"

    /// Remembers a `list --new` look; a database this process may not write is told about, not an error.
    /// A file with no marks (made by an older version, and not refreshed by this one since) has nothing
    /// to remember: it is left as it is (opening it to write would upgrade it, and the older version
    /// would then refuse it).
    /// Records `look` as the last `list --new`; whether it was. One that could not be is noted, unless
    /// `quietly` (nothing was shown).
    @discardableResult
    private func rememberLook(_ look: EarthquakeStore.Look, path: String, quietly: Bool = false) -> Bool {
        guard look.mark > 0 else { return true }
        // Not even tried on a file this process may not write: opening it to write would leave SQLite's
        // side files beside it, read-only like it, and they would then stop the next refresh.
        guard FileManager.default.isWritableFile(atPath: path) else {
            if !quietly {
                console.error(
                    "note: this look could not be remembered (\(TerminalText.safe(path)) is read-only); the next "
                        + "`list --new` shows these events again.\n")
            }
            return false
        }
        do {
            // Briefly: the events are listed already, and a look not remembered only shows them again.
            let store = try EarthquakeStore(path: path, mode: .mustExist, busyTimeout: .seconds(2))
            defer { closeAtEnd(store.close) }
            try store.recordLook(named: Self.listLookName, look)
            return true
        } catch {
            if !quietly {
                console.error(
                    "note: this look could not be remembered (\(Self.message(for: error))); the next `list --new` "
                        + "shows these events again.\n")
            }
            return false
        }
    }

    private func printNoMatch(_ store: EarthquakeStore, path: String, csv: Bool) throws {
        let total = try store.count()
        let text =
            total == 0
            ? "No earthquakes stored in \(path) yet. Run `earthquakes refresh` (or `earthquakes` for sample data)."
            : "No earthquakes match (\(total) stored)."
        if csv { console.error(text + "\n") } else { console.print(text) }
    }

    static func sorted(
        _ rows: [(earthquake: Earthquake, distanceKilometers: Double?)], by sort: ListOptions.Sort
    ) -> [(earthquake: Earthquake, distanceKilometers: Double?)] {
        switch sort {
        case .time:
            rows.sorted { ($0.earthquake.time ?? .distantPast) > ($1.earthquake.time ?? .distantPast) }
        case .magnitude:
            rows.sorted { ($0.earthquake.magnitude ?? -.infinity) > ($1.earthquake.magnitude ?? -.infinity) }
        case .distance:
            rows.sorted { ($0.distanceKilometers ?? .infinity) < ($1.distanceKilometers ?? .infinity) }
        }
    }
}

/// Row views of `Earthquake` values, for the writers that take rows straight from SQLite.
enum RowViews {
    static func with(_ quake: Earthquake, distance: Double?, _ body: (EarthquakeRowView) -> Void) {
        let id = Array(quake.id.utf8)
        let place = quake.place.map { Array($0.utf8) }
        let title = quake.title.map { Array($0.utf8) }
        let type = quake.type.map { Array($0.utf8) }
        let alert = quake.alert.map { Array($0.utf8) }
        id.withUnsafeBufferPointer { id in
            optional(place) { place in
                optional(title) { title in
                    optional(type) { type in
                        optional(alert) { alert in
                            body(
                                EarthquakeRowView(
                                    id: id, timeMilliseconds: quake.time?.millisecondsSince1970,
                                    magnitude: quake.magnitude, depth: quake.depth, latitude: quake.latitude,
                                    longitude: quake.longitude, place: place, title: title, type: type,
                                    distanceKilometers: distance, felt: quake.felt, cdi: quake.cdi, mmi: quake.mmi,
                                    significance: quake.significance, alert: alert))
                        }
                    }
                }
            }
        }
    }

    private static func optional(_ bytes: [UInt8]?, _ body: (UnsafeBufferPointer<UInt8>?) -> Void) {
        guard let bytes else { return body(nil) }
        bytes.withUnsafeBufferPointer { body($0) }
    }
}

extension Date {
    /// Milliseconds since 1970, rounded, as the database stores times.
    var millisecondsSince1970: Int64 { Int64((timeIntervalSince1970 * 1000).rounded()) }
}

/// "3 h ago", "in 5 min": how far a moment is from now, in one unit.
///
/// ## Thread safety
/// Stateless.
public enum RelativeTime {
    public static func ago(_ date: Date, now: Date) -> String {
        let seconds = now.timeIntervalSince(date)
        let text = span(abs(seconds))
        if text == "now" { return "just now" }
        return seconds >= 0 ? "\(text) ago" : "in \(text)"
    }

    private static func span(_ seconds: Double) -> String {
        switch seconds {
        case ..<60: return "now"
        case ..<3600: return "\(Int(seconds / 60)) min"
        case ..<(2 * 86_400): return "\(Int(seconds / 3600)) h"
        case ..<(60 * 86_400): return "\(Int(seconds / 86_400)) d"
        // Rounded, not cut: 60 days is "2 months" (not "1 months"), 730 days "2 years".
        case ..<(730 * 86_400): return "\(Int((seconds / (365.25 * 86_400 / 12)).rounded())) months"
        default: return "\(Int((seconds / (365.25 * 86_400)).rounded())) years"
        }
    }
}
