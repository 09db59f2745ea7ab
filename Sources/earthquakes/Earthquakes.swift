import ArgumentParser
import EarthquakesCLI
import EarthquakesKit
import Foundation

/// `earthquakes`: imports USGS earthquake feeds into a local SQLite database and queries it.
///
/// The commands are thin: they parse arguments and call ``EarthquakesCLI``, which tests run in-process.
@main
struct Earthquakes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "earthquakes",
        abstract: "Import USGS earthquake feeds into a local database and list them.",
        discussion: """
            Without a subcommand, shows the newest events of your database; while it holds none, shows a \
            built-in SAMPLE of made-up events instead (made in memory, works offline; nothing is saved and \
            sample events never mix with real ones). `earthquakes list --sample` lists the sample again.

            The database is --database PATH, else $\(DatabaseLocation.environmentVariable), else \
            $XDG_DATA_HOME/\(DatabaseLocation.folderName)/earthquakes.sqlite, else \
            ~/.local/share/\(DatabaseLocation.folderName)/earthquakes.sqlite.
            """,
        version: EarthquakesCLI.version,
        subcommands: [
            Refresh.self, List.self, Show.self, Status.self, WatchCommand.self, Home.self, Place.self, Prune.self,
        ]
    )

    /// The parser's own output (help, version, usage errors) goes through stdio, not ``Console``: it is
    /// checked at exit, so that it too ends the program with status 1 and a message when it could not be
    /// written.
    static func main() async {
        atexit {
            // Every stdio stream (standard error is unbuffered): what is left is standard output's.
            guard fflush(nil) != 0 else { return }
            let failure = errno
            if failure == EPIPE { _exit(141) }
            Console.standard.error(
                "earthquakes: could not write to standard output"
                    + ": \(String(cString: strerror(failure))).\n")
            _exit(1)
        }
        await main(nil)
    }

    @Flag(
        help: "Delete the sample database that earlier versions kept beside yours (your own database is not touched).")
    var removeSample = false
    @OptionGroup var database: DatabaseOption

    func run() async throws {
        try await reportingErrors(Self.self) { cli in
            if removeSample {
                try cli.removeSample(database: database.path)
            } else {
                try await cli.sample(database: database.path)
            }
        }
    }
}

struct DatabaseOption: ParsableArguments {
    @Option(name: .customLong("database"), help: ArgumentHelp("The SQLite database file.", valueName: "path"))
    var path: String?

    func validate() throws {
        try usageChecked { try DatabaseLocation.checkOption(path) }
    }
}

struct Refresh: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download (or read) USGS GeoJSON feeds and import them.",
        discussion: """
            Without --feed: \(EarthquakesCLI.defaultFeedURL.absoluteString)

            Several feeds (--feed repeated, or --feeds hour,day,week) run as a durable job graph: for \
            each feed fetch, parse and import, imports one at a time, recorded in the database itself \
            (each import commits together with the record that it finished). If the refresh is killed \
            half-way, running the same command again (or `earthquakes refresh --resume`) finishes only \
            what is left: feeds already imported are neither downloaded nor imported again. A feed \
            that fails is named; the others are still \
            imported. Short names: hour, day, week, month (magnitude 2.5+), or all_day, 4.5_week, \
            significant_month, ...
            """
    )

    @Option(
        help: ArgumentHelp(
            "An http(s) address or a file path; GeoJSONP is accepted. Repeat for several feeds.",
            valueName: "url-or-path"))
    var feed: [String] = []
    @Option(
        help: ArgumentHelp(
            "Several feeds separated by commas, for example hour,day,week (USGS 2.5+ feeds) or addresses (a comma in an address's query is kept).",
            valueName: "feeds"))
    var feeds: String?
    @Flag(
        help:
            "Finish an interrupted refresh of several feeds (the newest one when no feed is given); feeds it already imported are not downloaded again. A refresh that ended with a feed failed is refreshed again."
    )
    var resume = false

    // `.unconditional`: a negative value is the option's (refused below, saying why), not a missing one.
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Give up when no byte has arrived for this long (a slow but steady download is never cut).",
            valueName: "seconds"))
    var timeout: Double = 30
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Also give up when the whole download takes longer than this.", valueName: "seconds"))
    var totalTimeout: Double?

    /// The longest wait either timeout accepts: a week (a larger number cannot be a deliberate limit,
    /// and one beyond about 9e9 seconds cannot even be represented as a duration).
    static let longestTimeout: Double = 7 * 86_400

    @Flag(
        help:
            "Refuse a feed with any unreadable feature (by default such features are skipped, each named in a warning)."
    )
    var strict = false
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var database: DatabaseOption
    @Option(help: ArgumentHelp("Write a picture of the refresh's jobs: an HTML page (Gantt chart).", valueName: "path"))
    var timeline: String?
    @Option(help: ArgumentHelp("Write the refresh's jobs as a Chrome trace (Perfetto).", valueName: "path"))
    var trace: String?

    func validate() throws {
        try usageChecked {
            try RunPicture.check(timeline, option: "--timeline")
            try RunPicture.check(trace, option: "--trace")
        }
        let longest = Int(Self.longestTimeout)
        // At least a millisecond, the unit the timeouts are kept in: a smaller value would round to 0
        // (which gives up at once, or for --total-timeout means no limit at all).
        guard timeout >= 0.001, timeout <= Self.longestTimeout else {
            throw ValidationError(
                "--timeout must be a positive number of seconds, at least 0.001 (1 ms) and at most \(longest) "
                    + "(a week), for example 30")
        }
        if let totalTimeout, !(totalTimeout >= 0.001 && totalTimeout <= Self.longestTimeout) {
            throw ValidationError(
                "--total-timeout must be a positive number of seconds, at least 0.001 (1 ms) and at most "
                    + "\(longest) (a week), for example 600")
        }
        if let feeds, allFeeds.count == feed.count {
            throw ValidationError(
                "--feeds \"\(feeds)\" names no feed; give feeds separated by commas, for example --feeds hour,day")
        }
        if feed.contains(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty }) {
            throw ValidationError("--feed is empty; give an http(s) address or a file path, for example --feed day")
        }
        try usageChecked { for feed in allFeeds { _ = try EarthquakesCLI.source(feed) } }
    }

    /// `--feed` (repeated) then `--feeds` (comma-separated), short USGS names expanded.
    var allFeeds: [String] {
        (feed + FeedRefresh.feedList(feeds ?? "")).map(FeedRefresh.expand)
    }

    func run() async throws {
        let feeds = allFeeds
        // The path is chosen after repeats are removed: `--feed X --feed X` is one feed, with no job store.
        let distinct = FeedRefresh.distinct(feeds)
        if distinct.count > 1 || resume {
            try await reportingErrors(Self.self) { cli in
                try await cli.refresh(
                    feeds: feeds, resume: resume, database: database.path, json: json,
                    timeout: .milliseconds(Int64(timeout * 1000)),
                    totalTimeout: totalTimeout.map { .milliseconds(Int64($0 * 1000)) }, strict: strict,
                    picture: RunPicture(timeline: timeline, trace: trace))
            }
            return
        }
        try await reportingErrors(Self.self) { cli in
            if distinct.count < feeds.count, !json {
                cli.console.error(
                    "note: a feed was given more than once (after expanding short names); it is refreshed once.\n")
            }
            try await cli.refresh(
                feed: distinct.first, database: database.path, json: json,
                timeout: .milliseconds(Int64(timeout * 1000)),
                totalTimeout: totalTimeout.map { .milliseconds(Int64($0 * 1000)) }, strict: strict,
                picture: RunPicture(timeline: timeline, trace: trace))
        }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List stored earthquakes.")

    enum SortOrder: String, ExpressibleByArgument, CaseIterable {
        case time, magnitude, distance
    }

    // `.unconditional`: a value that starts with "-" (-0.5, -33.9,151.2) is the option's value, not an option.
    @Option(
        parsing: .unconditional, help: "Only earthquakes of at least this magnitude (may be negative).",
        transform: magnitude)
    var minMagnitude: Double?
    @Option(parsing: .unconditional, help: "Only earthquakes of at most this magnitude.", transform: magnitude)
    var maxMagnitude: Double?
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Only earthquakes since a date, a date and time, or an age: \(SinceParser.examples). "
                + "Times are UTC unless a zone (Z, +02:00) is given.",
            valueName: "when"))
    var since: String?
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Only earthquakes before a date (a date alone includes that whole day), a date and time, or an age, "
                + "as --since takes them: --since 2019-07-04 --until 2019-07-06 is 4 to 6 July.",
            valueName: "when"))
    var until: String?
    @Option(
        help: ArgumentHelp(
            "Only events of this type: earthquake, \"quarry blast\", explosion, \"ice quake\"… (repeat or separate with commas).",
            valueName: "type"))
    var type: [String] = []
    @Option(help: ArgumentHelp("Leave out events of this type (repeat or separate with commas).", valueName: "type"))
    var excludeType: [String] = []
    @Option(
        parsing: .unconditional,
        help: "At most this many earthquakes (default: 20; with --within or --new, every match).")
    var limit: Int?
    @Flag(help: "All matching earthquakes (no --limit).") var all = false
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Earthquakes near a point, with distances: LAT,LON (for example -33.9,151.2), home (`earthquakes home`) "
                + "or a saved place (`earthquakes place`). Alone: the nearest ones.",
            valueName: "point"))
    var near: String?
    @Option(
        parsing: .unconditional,  // (`-5km` is a wrong distance to name, not a missing one)
        help: ArgumentHelp(
            "With --near: every earthquake within this distance (300km, 200mi), in the --sort order.",
            valueName: "distance"))
    var within: String?
    @Option(
        help:
            "Order: time (newest first), magnitude (strongest first) or distance (nearest first, with --near). With --near: distance unless given."
    )
    var sort: SortOrder?
    @Flag(help: "Print the result as JSON.") var json = false
    @Flag(help: "Print the result as CSV (a header line, then one line per event).") var csv = false
    @Flag(help: "List the built-in sample of made-up events (shown by `earthquakes` while your database is empty).")
    var sample = false
    @Flag(
        help:
            "Only events stored since the last `list --new` (every match unless --limit is given); this look is then remembered."
    )
    var new = false
    @OptionGroup var database: DatabaseOption

    func validate() throws {
        guard !(json && csv) else { throw ValidationError("--json and --csv cannot be used together; pick one") }
        if all, let limit {
            throw ValidationError(
                "--all and --limit \(limit) cannot be used together: --all lists every match; drop one of them")
        }
        try usageChecked { _ = try options(now: Date(), environment: ProcessInfo.processInfo.environment) }
    }

    func options(now: Date, environment: [String: String]) throws(CLIError) -> ListOptions {
        // An empty name (`--type ""`, a script's empty variable) filtered nothing and listed every event.
        for (option, values) in [("--type", type), ("--exclude-type", excludeType)]
        where !values.isEmpty && ListOptions.typeNames(values).isEmpty {
            throw CLIError.usage("\(option) needs a type name, for example \(option) \"quarry blast\"")
        }
        let point = try near.map { text throws(CLIError) in
            try Places.resolve(text, option: "--near", environment: environment).coordinate
        }
        let order: ListOptions.Sort
        switch sort {
        case .time?: order = .time
        case .magnitude?: order = .magnitude
        case .distance?: order = .distance
        case nil: order = point == nil ? .time : .distance
        }
        return try ListOptions(
            minMagnitude: minMagnitude,
            maxMagnitude: maxMagnitude,
            since: try since.map { text throws(CLIError) in try SinceParser.parse(text, now: now) },
            // `--within` asks for every earthquake within the distance, as `--new` for every one since.
            limit: all || ((new || within != nil) && limit == nil) ? nil : limit ?? 20,
            near: point,
            sort: order,
            types: ListOptions.typeNames(type),
            excludedTypes: ListOptions.typeNames(excludeType),
            csv: csv,
            until: try until.map { text throws(CLIError) in try SinceParser.parseEnd(text, now: now) },
            within: try within.map { text throws(CLIError) in try DistanceParser.kilometres(text) }
        ).validated()
    }

    func run() async throws {
        try await reportingErrors(Self.self) { cli in
            try cli.list(
                try options(now: cli.now(), environment: cli.environment), database: database.path, json: json,
                explicitSort: sort != nil, sample: sample, new: new)
        }
    }
}

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Refresh feeds on a schedule and alert on new earthquakes that match.",
        discussion: """
            Refreshes the feeds now, then every --every (a schedule kept in the database), and alerts on each \
            event that comes in (or is revised) matching the filters, at most a day after it happened: a line \
            on standard output (with the bell on a terminal), and --exec CMD run with the event as JSON on its \
            standard input. Events stored by the end of a watch's first check are not alerted. A watch stopped (Ctrl-C) \
            or killed and started again goes on from where it was: it sends what it had not sent and nothing \
            it had (only a watch killed between delivering an alert and recording it sends that one again). \
            One watch runs per database at a time; --once checks once and exits (status 1 when a feed or a \
            command failed, for cron).
            """)

    @Option(
        name: .customLong("feed"),
        help: ArgumentHelp(
            "A feed to refresh (repeat; short names as refresh takes them). Default: hour.", valueName: "feed"))
    var feeds: [String] = []
    @Option(help: ArgumentHelp("How often to refresh: 30s, 5m, 1h… (default: 5m).", valueName: "interval"))
    var every: String?
    @Option(
        parsing: .unconditional, help: "Alert only on earthquakes of at least this magnitude.", transform: magnitude)
    var minMagnitude: Double?
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Alert only near a point: LAT,LON, home or a saved place (with --within).", valueName: "point"))
    var near: String?
    @Option(
        parsing: .unconditional, help: ArgumentHelp("With --near: the radius (300km, 200mi).", valueName: "distance"))
    var within: String?
    @Option(
        help: ArgumentHelp(
            "Alert only on events whose PAGER alert level is this or higher: green, yellow, orange, red.",
            valueName: "level"))
    var alertLevel: String?
    @Option(
        help: ArgumentHelp("Alert only on events of this type (repeat or separate with commas).", valueName: "type"))
    var type: [String] = []
    @Option(help: ArgumentHelp("Do not alert on events of this type.", valueName: "type"))
    var excludeType: [String] = []
    @Option(
        help: ArgumentHelp(
            "Run this shell command for each alert, with the event as JSON on standard input and EARTHQUAKE_ID set.",
            valueName: "command"))
    var exec: String?
    @Flag(help: "Do not ring the terminal's bell.") var noBell = false
    @Option(
        help: ArgumentHelp("The watch's name: its starting point and its alerts are kept by name.", valueName: "name"))
    var name = "default"
    @Flag(help: "Check once (refresh, alert) and exit.") var once = false
    @OptionGroup var database: DatabaseOption

    func validate() throws {
        try usageChecked { _ = try spec(environment: ProcessInfo.processInfo.environment) }
        try usageChecked { _ = try EarthquakeWatch.interval(every ?? "5m") }
        if once, let every {
            throw ValidationError("--every \(every) and --once cannot be used together: --once checks once; drop one")
        }
    }

    func spec(environment: [String: String]) throws(CLIError) -> WatchSpec {
        let point = try near.map { text throws(CLIError) in
            try Places.resolve(text, option: "--near", environment: environment)
        }
        if within != nil, point == nil {
            throw CLIError.usage("--within needs --near: give the point, for example --near home --within 300km")
        }
        if point != nil, within == nil {
            throw CLIError.usage("--near needs --within: the radius to alert within, for example --within 300km")
        }
        var level: EarthquakeFilter.AlertLevel?
        if let alertLevel {
            guard let parsed = EarthquakeFilter.AlertLevel(rawValue: alertLevel.lowercased()) else {
                throw CLIError.usage("--alert-level is green, yellow, orange or red; got \"\(alertLevel)\"")
            }
            level = parsed
        }
        if let minMagnitude, !minMagnitude.isFinite {
            throw CLIError.usage("--min-magnitude must be a number such as 4.5; got \(minMagnitude)")
        }
        if let exec, exec.allSatisfy(\.isWhitespace) {
            throw CLIError.usage(
                "--exec is empty; give a shell command, for example --exec 'notify-send \"Earthquake $EARTHQUAKE_ID\"'")
        }
        guard !name.isEmpty, name.count <= 100,
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw CLIError.usage("--name must be 1 to 100 characters, without control characters")
        }
        let radius = try within.map { text throws(CLIError) in try DistanceParser.kilometres(text) }
        let filter = EarthquakeFilter(
            minMagnitude: minMagnitude,
            within: point.flatMap { point in
                radius.map {
                    EarthquakeFilter.Circle(
                        latitude: point.coordinate.latitude, longitude: point.coordinate.longitude, radiusKilometres: $0
                    )
                }
            }, types: ListOptions.typeNames(type), excludedTypes: ListOptions.typeNames(excludeType),
            minimumAlert: level)
        return WatchSpec(
            name: name, filter: filter, exec: exec, bell: !noBell, near: point?.coordinate, nearName: point?.label)
    }

    func run() async throws {
        try await reportingErrors(Self.self) { cli in
            try await cli.watch(
                spec: try spec(environment: cli.environment), feeds: feeds.isEmpty ? ["hour"] : feeds,
                interval: try EarthquakeWatch.interval(every ?? "5m"), once: once, database: database.path)
        }
    }
}

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show one earthquake: times (UTC, local, how long ago), distance, map links.",
        discussion: "The distance is measured from --from, else from the home set with `earthquakes home LAT,LON`."
    )

    @Argument(help: "The USGS event id, as in `earthquakes list`.") var id: String
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Show the distance from this point: LAT,LON (for example -33.87,151.21), home or a saved place.",
            valueName: "point"))
    var from: String?
    @Flag(help: "Print one line to share: magnitude, place, time and a link.") var share = false
    @Flag(help: "Print the result as JSON.") var json = false
    @Flag(help: "Look in the built-in sample of made-up events instead of your database.") var sample = false
    @OptionGroup var database: DatabaseOption

    func validate() throws {
        try usageChecked {
            try EarthquakesCLI.checkShowFormat(json: json, share: share)
            _ = try from.map { text throws(CLIError) in
                try Places.resolve(text, option: "--from", environment: ProcessInfo.processInfo.environment)
            }
        }
    }

    func run() async throws {
        try await reportingErrors(Self.self) { cli in
            try cli.show(
                id: id, database: database.path, json: json, sample: sample,
                from: try from.map { text throws(CLIError) in
                    try Places.resolve(text, option: "--from", environment: cli.environment).coordinate
                },
                share: share)
        }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Where the database is, what it holds, and when it was last refreshed.")

    @OptionGroup var database: DatabaseOption

    func run() async throws {
        try await reportingErrors(Self.self) { cli in try await cli.status(database: database.path) }
    }
}

struct Prune: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete events older than a date or an age.",
        discussion: """
            Deletes events of every type (earthquakes, quarry blasts, ...) whose time is before the cut-off. \
            Events with no time are never deleted: their age is unknown, so a prune by age keeps them (the \
            result line counts them). A cut-off in the future (or 0d, now) deletes every event that has a \
            time, with a warning; --dry-run says how many would go, deleting nothing.
            """
    )

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Delete events before this moment: \(SinceParser.examples) (30d: older than 30 days; min is minutes, mo months of 30 days, y years of 365 days; m alone is refused). UTC unless a zone is given.",
            valueName: "when"))
    var before: String
    @Flag(help: "Only say how many events would be deleted; delete nothing.") var dryRun = false

    @OptionGroup var database: DatabaseOption

    func validate() throws {
        try usageChecked { _ = try SinceParser.parse(before, now: Date(), option: "--before", bareMinutes: false) }
    }

    func run() async throws {
        try await reportingErrors(Self.self) { cli in
            try cli.prune(
                before: try SinceParser.parse(before, now: cli.now(), option: "--before", bareMinutes: false),
                database: database.path,
                dryRun: dryRun)
        }
    }
}

/// Turns a usage ``CLIError`` found while validating into the parser's `ValidationError`, which prints
/// the command's usage and exits with 64 like every other mistake in the command line.
func usageChecked(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as CLIError where error.isUsage {
        throw ValidationError(error.message)
    } catch let error as CLIError {
        // Not the command line's fault (a damaged places file read to check --near): reported as `run()`
        // reports it, status 1, rather than as a usage error (64) with the usage under it.
        Console.standard.error("earthquakes: \(EarthquakesCLI.message(for: error))\n")
        for line in error.details { Console.standard.error("  \(EarthquakesCLI.detailLine(line))\n") }
        throw ExitCode.failure
    }
}

/// Ctrl-C, for the whole process: a refresh turns it into a cancellation of its jobs.
let interrupts = Interrupts.installForSIGINT()

/// Runs a command. On failure prints `earthquakes: <one line>` to standard error and exits with 1;
/// a usage error is printed as the parser prints its own (`Error: …` and the command's usage) and
/// exits with 64; Ctrl-C prints one line and exits with 130.
func reportingErrors(_ command: any ParsableCommand.Type, _ body: (EarthquakesCLI) async throws -> Void) async throws {
    let cli = EarthquakesCLI(console: .standard, interrupts: interrupts)
    do {
        try await body(cli)
    } catch let error as CLIError where error.isCancellation {
        cli.console.error(EarthquakesCLI.detailLine(error.message) + "\n")
        throw ExitCode(interrupts.wasInterrupted ? interrupts.exitStatus : error.exitStatus)
    } catch let error as CLIError where error.isUsage {
        let usage = Earthquakes.usageString(for: command)
        let name = command == Earthquakes.self ? "earthquakes" : "earthquakes \(command._commandName)"
        cli.console.error(
            "Error: \(EarthquakesCLI.detailLine(error.message))\nUsage: \(usage)\n  See '\(name) --help' for more information.\n"
        )
        throw ExitCode.validationFailure
    } catch {
        // A CLIError's details go on lines of their own, under its one-line message.
        cli.console.error("earthquakes: \(EarthquakesCLI.message(for: error))\n")
        for line in (error as? CLIError)?.details ?? [] {
            cli.console.error("  \(EarthquakesCLI.detailLine(line))\n")
        }
        throw ExitCode.failure
    }
}

/// A magnitude option's value as a decimal number: `Double` also reads hexadecimal (`0x10` as 16),
/// which no one means as a magnitude. ("nan" and "inf" read, and are refused with the command's own
/// message.)
@Sendable func magnitude(_ text: String) throws -> Double {
    let digits = text.hasPrefix("-") || text.hasPrefix("+") ? text.dropFirst() : Substring(text)
    guard !digits.lowercased().hasPrefix("0x"), let value = Double(text) else {
        throw ValidationError("\"\(text)\" is not a magnitude: give a decimal number such as 4.5")
    }
    return value
}
