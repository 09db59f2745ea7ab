import EarthquakesKit
import Foundation

extension EarthquakesCLI {
    /// `show ID`: every field of one earthquake, its time in UTC, local and relative, its distance from
    /// `from` (or the remembered home), and map links. `share` prints one shareable line instead.
    public func show(
        id: String, database: String?, json: Bool, sample: Bool = false, from: Coordinate? = nil, share: Bool = false
    ) throws {
        try Self.checkShowFormat(json: json, share: share)
        let (store, path) = try openForReading(database, sample: sample)
        defer { closeAtEnd(store.close) }
        guard let quake = try store.earthquake(id: id) else {
            if (try? store.remembersAsGone(id: id)) == true {
                throw CLIError(
                    "no earthquake with id \"\(id)\" in \(path): the USGS deleted it, or lists the event under another id now (another network's solution was preferred); `earthquakes list` shows the ids"
                )
            }
            throw CLIError("no earthquake with id \"\(id)\" in \(path); `earthquakes list` shows the ids")
        }
        let origin: (Coordinate, String)?
        if let from {
            origin = (from, "from \(Self.text(from))")
        } else if let home = HomeLocation.readOrWarn(environment: environment, console: console) {
            origin = (home, "from home (\(Self.text(home)))")
        } else {
            origin = nil
        }
        let distance = origin.map {
            GreatCircle.distanceKilometers(
                from: ($0.0.latitude, $0.0.longitude), to: (quake.latitude, quake.longitude))
        }
        if share {
            console.print(TerminalText.safe(Self.shareLine(quake)))
            return
        }
        if json {
            console.print(try JSONText.encode(QuakeJSON(quake, distanceKm: distance)))
            return
        }
        let fields: [(String, String?)] = [
            ("id", quake.id),
            ("title", quake.displayTitle),
            ("time", quake.time.map { timeText($0) }),
            (
                "magnitude",
                quake.magnitude.map { QuakeTable.fixed($0, 2) + (quake.magnitudeType.map { " \($0)" } ?? "") }
            ),
            ("place", quake.place),
            ("distance", distance.map { QuakeTable.fixed($0, 0) + " km " + (origin?.1 ?? "") }),
            ("latitude", QuakeTable.fixed(quake.latitude, 4)),
            ("longitude", QuakeTable.fixed(quake.longitude, 4)),
            ("depth", QuakeTable.fixed(quake.depth, 1) + " km"),
            ("type", quake.type),
            ("status", quake.status),
            ("tsunami", quake.tsunami.map { $0 ? "yes" : "no" }),
            ("alert", quake.alert.map { "\($0) (PAGER: estimated impact)" }),
            ("felt", quake.felt.map { "\($0) report\($0 == 1 ? "" : "s") (Did You Feel It?)" }),
            ("intensity", Self.intensityText(quake)),
            ("significance", quake.significance.map { "\($0)" }),
            ("network", quake.network),
            ("updated", quake.updated.map { QuakeTable.minute($0) + " UTC" }),
            ("map", Self.mapURL(quake)),
            ("geo", Self.geoURI(quake)),
            ("url", quake.url),
        ]
        for (name, value) in fields {
            guard let value else { continue }
            console.print(name.padding(toLength: 12, withPad: " ", startingAt: 0) + " " + TerminalText.safe(value))
        }
        if let age = try dataAge(store) { console.print("\n" + age) }
    }

    /// "MMI 9.3 (estimated, ShakeMap), CDI 8.4 (reported, Did You Feel It?)": what the event has of them.
    static func intensityText(_ quake: Earthquake) -> String? {
        var parts: [String] = []
        if let mmi = quake.mmi { parts.append("MMI \(QuakeTable.fixed(mmi, 1)) (estimated, ShakeMap)") }
        if let cdi = quake.cdi { parts.append("CDI \(QuakeTable.fixed(cdi, 1)) (reported, Did You Feel It?)") }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }

    /// `show --share --json`: two outputs asked for; a usage error rather than one of them ignored.
    public static func checkShowFormat(json: Bool, share: Bool) throws(CLIError) {
        if json && share {
            throw CLIError.usage(
                "--share and --json cannot be used together: --share prints one line of text; pick one")
        }
    }

    /// `home [LAT,LON | --clear]`: shows, remembers or forgets the home location `show` measures from.
    ///
    /// - Throws: ``CLIError`` when `clear` cannot delete the home file (it is then still used).
    public func home(set coordinate: Coordinate?, clear: Bool) throws {
        let file = HomeLocation.path(environment: environment)
        if clear {
            try HomeLocation.checkNotFolder(file)
            guard FileManager.default.fileExists(atPath: file) else {
                console.print("There was no home location to forget.")
                return
            }
            do {
                try FileManager.default.removeItem(atPath: file)
            } catch {
                throw CLIError(
                    "could not forget the home location: cannot delete \(file) (\(error.localizedDescription)); "
                        + "`earthquakes show` still measures from it. Check the permissions of its folder")
            }
            console.print("Forgot the home location.")
        } else if let coordinate {
            try HomeLocation.write(coordinate, environment: environment)
            console.print(
                "Home is \(Self.text(coordinate)) (saved in \(file)); `earthquakes show ID` shows the distance from it."
            )
        } else if let home = try HomeLocation.read(environment: environment) {
            console.print("Home is \(Self.text(home)) (saved in \(file)).")
        } else {
            console.print("No home location yet; set one with `earthquakes home LAT,LON`, for example -33.87,151.21.")
        }
    }

    /// `place [NAME [LAT,LON]] [--forget]`: lists the saved places (and home), shows one, saves one or
    /// forgets one (see ``Places``).
    public func place(_ name: String?, set coordinate: Coordinate?, forget: Bool) throws {
        let file = Places.path(environment: environment)
        guard let name else {
            let places = try Places.all(environment: environment)
            let home = HomeLocation.readOrWarn(environment: environment, console: console)
            if places.isEmpty && home == nil {
                console.print(
                    "No places saved yet; save one with `earthquakes place NAME LAT,LON`, for example "
                        + "`earthquakes place tokyo 35.68,139.69`.")
            }
            if let home { console.print("home  \(Self.text(home))") }
            for place in places { console.print("\(place.name)  \(Self.text(place.coordinate))") }
            return
        }
        if forget {
            let forgot = try Places.forget(name, environment: environment)
            console.print(forgot ? "Forgot the place \(name)." : "There was no place named \(name) to forget.")
        } else if let coordinate {
            try Places.save(name, at: coordinate, environment: environment)
            console.print(
                "Saved \(name) at \(Self.text(coordinate)) (in \(file)); `earthquakes list --near \(name) --within 300km` "
                    + "lists what happened around it.")
        } else {
            let (point, _) = try Places.resolve(name, option: "place", environment: environment)
            console.print("\(name)  \(Self.text(point))")
        }
    }

    /// `status`: where the database is, what it holds, how old the data is, and an unfinished refresh of
    /// several feeds waiting for `refresh --resume`.
    public func status(database: String?) async throws {
        let path = DatabaseLocation.path(option: database, environment: environment)
        if FileManager.default.fileExists(atPath: path) {
            try DatabaseLocation.checkReadable(path)
            let store = try EarthquakeStore(path: path, mode: .readOnly, onLongWait: waitNotice(path))
            defer { closeAtEnd(store.close) }
            let types = try store.typeCounts()
            let total = types.reduce(0) { $0 + $1.count }
            // (Types come from feeds: safe for a terminal.)
            let kinds = types.map { "\($0.count) \(TerminalText.safe(Self.plural($0.type ?? "of no type", $0.count)))" }
            console.print(
                "Database   \(TerminalText.safe(path)): \(Self.counted(total, "event"))"
                    + (kinds.isEmpty ? "" : " (\(kinds.joined(separator: ", ")))"))
            if let last = try store.lastRefresh() {
                console.print(
                    "Refreshed  \(RelativeTime.ago(last.date, now: now())) (\(CivilTime.minute(last.date.millisecondsSince1970)) UTC) from \(Self.feedName(last.source)): \(Self.counts(last.summary))"
                )
            } else {
                console.print("Refreshed  not recorded; `earthquakes refresh` imports the latest events")
            }
            for line in await watchLines(database: path, store: store) { console.print(line) }
        } else {
            console.print("Database   \(TerminalText.safe(path)) does not exist yet; `earthquakes refresh` creates it")
        }
        for line in await unfinishedRefreshes(database: path) { console.print(line) }
        let sample = DatabaseLocation.samplePath(forDatabase: path)
        if FileManager.default.fileExists(atPath: sample) {
            console.print(
                "Sample     \(TerminalText.safe(sample)): made-up events that an earlier version kept apart (the sample is now shown "
                    + "from memory); `earthquakes --remove-sample` deletes it")
        }
        if let home = HomeLocation.readOrWarn(environment: environment, console: console) {
            console.print("Home       \(Self.text(home))")
        }
    }

    /// One line per watch of the database: its timing, whether a `watch` runs it, its last check and its
    /// alerts. Empty when there is no job store or it cannot be read.
    private func watchLines(database: String, store: EarthquakeStore) async -> [String] {
        guard let jobs = FeedRefresh.existingJobs(database: database) else { return [] }
        defer { closeAtEnd(jobs.close) }
        let prefix = EarthquakeWatch.scheduleName("")
        var lines: [String] = []
        for record in (try? await jobs.scheduleListing().schedules) ?? [] where record.schedule.name.hasPrefix(prefix) {
            let name = String(record.schedule.name.dropFirst(prefix.count))
            var line = "Watch      \"\(TerminalText.safe(name))\""
            if case .every(let interval) = record.schedule.timing { line += " every \(Self.spoken(interval))" }
            if WatchLock.holder(database: database) == name {
                line += ", running now"
            } else {
                line += record.paused ? ", stopped" : ", not running (stopped without Ctrl-C)"
            }
            if let last = record.lastTick { line += ", last check \(RelativeTime.ago(last, now: now()))" }
            if let counts = try? store.alertCounts(watch: name, maxAttempts: EarthquakeWatch.maxDeliveryAttempts) {
                line += "; \(Self.counted(counts.delivered, "alert")) sent"
                if counts.waiting > 0 { line += ", \(counts.waiting) waiting" }
                if counts.givenUp > 0 { line += ", \(counts.givenUp) given up (--exec failed)" }
            }
            lines.append(line)
        }
        return lines
    }

    /// One line to paste in a message: magnitude, kind, place, time and a link.
    static func shareLine(_ quake: Earthquake) -> String {
        let magnitude = quake.magnitude.map { "M " + QuakeTable.fixed($0, 1) + " " } ?? ""
        let kind = quake.normalizedType
        let place = quake.place.map { " \(Self.placePhrase($0))" } ?? ""
        let time = quake.time.map { ", " + QuakeTable.minute($0) + " UTC" } ?? ""
        let link = quake.url ?? mapURL(quake)
        return "\(magnitude)\(kind)\(place)\(time) — \(link)"
    }

    /// An OpenStreetMap page centred on the epicentre, with a marker.
    static func mapURL(_ quake: Earthquake) -> String {
        let lat = QuakeTable.fixed(quake.latitude, 4)
        let lon = QuakeTable.fixed(quake.longitude, 4)
        return "https://www.openstreetmap.org/?mlat=\(lat)&mlon=\(lon)#map=8/\(lat)/\(lon)"
    }

    /// A `geo:` URI (RFC 5870), which phones open in their map app.
    static func geoURI(_ quake: Earthquake) -> String {
        "geo:\(QuakeTable.fixed(quake.latitude, 4)),\(QuakeTable.fixed(quake.longitude, 4))"
    }

    /// The zone a `TZ` value names: an IANA name, with or without POSIX's leading `:` (`:Asia/Tokyo`), or
    /// a fixed POSIX offset (`JST-9`: nine hours east, POSIX's sign being the opposite of ISO's). A rule
    /// with daylight saving time (`EST5EDT,M3.2.0,M11.1.0`) is left to the system (nil). Both forms
    /// above were ignored, and `show` dropped the local time.
    static func timeZone(posix value: String) -> TimeZone? {
        let name = value.hasPrefix(":") ? String(value.dropFirst()) : value
        if let zone = TimeZone(identifier: name) { return zone }
        // std offset: three or more letters (or <…>), then [+-]hh[:mm[:ss]], and nothing after.
        var rest = Substring(name)
        if rest.first == "<" {
            guard let close = rest.firstIndex(of: ">") else { return nil }
            rest = rest[rest.index(after: close)...]
        } else {
            let letters = rest.prefix { $0.isASCII && $0.isLetter }
            guard letters.count >= 3 else { return nil }
            rest = rest.dropFirst(letters.count)
        }
        var sign = 1
        if let first = rest.first, first == "+" || first == "-" {
            sign = first == "-" ? -1 : 1
            rest = rest.dropFirst()
        }
        let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count), parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) }),
            let hours = Int(parts[0]), hours <= 24
        else { return nil }
        let minutes = parts.count > 1 ? Int(parts[1]) : 0
        let seconds = parts.count > 2 ? Int(parts[2]) : 0
        guard let minutes, let seconds, minutes < 60, seconds < 60 else { return nil }
        return TimeZone(secondsFromGMT: -sign * (hours * 3_600 + minutes * 60 + seconds))
    }

    /// Seconds east of UTC at `date` where the user is: the zone `tz` (the `TZ` variable) names; for a
    /// POSIX rule with daylight saving time (`NZST-12NZDT,M9.5.0,M4.1.0/3`), which Foundation does not
    /// read, the C library's reading of it when it is this process's own `TZ` (`show` dropped the local
    /// time then); else the system's zone.
    static func localOffset(of date: Date, tz: String?) -> Int {
        if let tz {
            if let zone = timeZone(posix: tz) { return zone.secondsFromGMT(for: date) }
            if let own = getenv("TZ"), String(cString: own) == tz {
                tzset()
                var time = time_t(date.timeIntervalSince1970.rounded(.down))
                var parts = tm()
                if localtime_r(&time, &parts) != nil { return Int(parts.tm_gmtoff) }
            }
        }
        return TimeZone.current.secondsFromGMT(for: date)
    }

    /// `2025-10-29 18:43:17 UTC (2025-10-29 10:43 local, UTC-08:00; 3 h ago)`; without the local part
    /// where the local time is UTC.
    func timeText(_ date: Date) -> String {
        var text = ""
        CivilTime.appendMinute(date.millisecondsSince1970, seconds: true, to: &text)
        text += " UTC ("
        let offset = Self.localOffset(of: date, tz: environment["TZ"])
        if offset != 0 {
            var local = ""
            CivilTime.appendMinute(date.millisecondsSince1970 + Int64(offset) * 1000, to: &local)
            let sign = offset < 0 ? "-" : "+"
            let hours = abs(offset) / 3600
            let minutes = abs(offset) / 60 % 60
            text += "\(local) local, UTC\(sign)\(hours < 10 ? "0" : "")\(hours):\(minutes < 10 ? "0" : "")\(minutes); "
        }
        return text + RelativeTime.ago(date, now: now()) + ")"
    }

    static func text(_ coordinate: Coordinate) -> String {
        "\(QuakeTable.fixed(coordinate.latitude, 4)),\(QuakeTable.fixed(coordinate.longitude, 4))"
    }

    /// "105 km WNW of Höfn" reads after the kind as is; a bare region ("Fiji region") gets "in".
    private static func placePhrase(_ place: String) -> String {
        place.range(of: " of ") != nil ? place : "in \(place)"
    }

    /// "1 feed", "2 feeds": a count and its word, plural unless the count is 1 (`plural` for irregular words).
    static func counted(_ count: Int, _ word: String, plural: String? = nil) -> String {
        "\(count) \(count == 1 ? word : plural ?? word + "s")"
    }

    static func plural(_ type: String, _ count: Int) -> String {
        guard count != 1, type != "of no type" else { return type }
        if type.hasSuffix("h") || type.hasSuffix("s") { return type + "es" }
        if type.hasSuffix("y"), let before = type.dropLast().last, !"aeiou".contains(before) {
            return type.dropLast() + "ies"
        }
        return type + "s"
    }
}

/// The remembered home location: one line `LAT,LON` in `$XDG_CONFIG_HOME/baton-earthquakes/home`
/// (else `~/.config/baton-earthquakes/home`).
///
/// ## Thread safety
/// Stateless.
enum HomeLocation {
    static func path(environment: [String: String]) -> String {
        let base: String
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            base = xdg
        } else {
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            base = (home as NSString).appendingPathComponent(".config")
        }
        return ((base as NSString).appendingPathComponent(DatabaseLocation.folderName) as NSString)
            .appendingPathComponent("home")
    }

    static func read(environment: [String: String]) throws(CLIError) -> Coordinate? {
        let file = path(environment: environment)
        try checkNotFolder(file)
        guard let data = FileManager.default.contents(atPath: file) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        do {
            return try Coordinate(parsing: text, option: "the home location")
        } catch {
            let shown = TerminalText.safe(String(text.prefix(40)))
            throw CLIError(
                "the home location in \(file) is not LAT,LON (\"\(shown)\"); set it again with "
                    + "`earthquakes home LAT,LON`, or forget it with `earthquakes home --clear`")
        }
    }

    /// The home location for a command that only measures distances with it (`show`, `status`): a file
    /// that cannot be read is a warning on standard error naming it, and the command goes on without.
    static func readOrWarn(environment: [String: String], console: Console) -> Coordinate? {
        do {
            return try read(environment: environment)
        } catch {
            console.error("warning: \(error.message); distances from home are left out\n")
            return nil
        }
    }

    /// Throws when the home location's file is a folder (which nothing here made, and nothing deletes).
    static func checkNotFolder(_ file: String) throws(CLIError) {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: file, isDirectory: &isFolder), isFolder.boolValue {
            throw CLIError(
                "the home location file \(file) is a folder, not a file; remove or rename that folder, "
                    + "or set $XDG_CONFIG_HOME to another folder")
        }
    }

    static func write(_ coordinate: Coordinate, environment: [String: String]) throws(CLIError) {
        let file = path(environment: environment)
        try checkNotFolder(file)
        do {
            try FileManager.default.createDirectory(
                atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data("\(coordinate.storedText)\n".utf8).write(to: URL(fileURLWithPath: file))
        } catch {
            throw CLIError(
                "cannot save the home location in \(file) (\(error.localizedDescription)); set $XDG_CONFIG_HOME to a writable folder"
            )
        }
    }
}
