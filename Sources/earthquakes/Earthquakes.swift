import ArgumentParser
import EarthquakesCLI
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
            Without a subcommand, imports a built-in SAMPLE feed (made-up events, works offline) and shows it.

            The database is --database PATH, else $\(DatabaseLocation.environmentVariable), else \
            $XDG_DATA_HOME/\(DatabaseLocation.folderName)/earthquakes.sqlite, else \
            ~/.local/share/\(DatabaseLocation.folderName)/earthquakes.sqlite.
            """,
        subcommands: [Refresh.self, List.self, Show.self]
    )

    @OptionGroup var database: DatabaseOption

    func run() async throws {
        try await reportingErrors { cli in try await cli.sample(database: database.path) }
    }
}

struct DatabaseOption: ParsableArguments {
    @Option(name: .customLong("database"), help: ArgumentHelp("The SQLite database file.", valueName: "path"))
    var path: String?
}

struct Refresh: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Download (or read) a USGS GeoJSON feed and import it.",
        discussion: "Without --feed: \(EarthquakesCLI.defaultFeedURL.absoluteString)"
    )

    @Option(help: ArgumentHelp("An http(s) address or a file path; GeoJSONP is accepted.", valueName: "url-or-path"))
    var feed: String?

    @Option(help: ArgumentHelp("Give up on a download that takes longer than this.", valueName: "seconds"))
    var timeout: Double = 30

    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var database: DatabaseOption

    func run() async throws {
        guard timeout > 0, timeout.isFinite else {
            throw ValidationError("--timeout must be a positive number of seconds")
        }
        try await reportingErrors { cli in
            try await cli.refresh(
                feed: feed, database: database.path, json: json, timeout: .milliseconds(Int64(timeout * 1000)))
        }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List stored earthquakes.")

    enum SortOrder: String, ExpressibleByArgument, CaseIterable {
        case time, magnitude
    }

    @Option(help: "Only earthquakes of at least this magnitude.") var minMagnitude: Double?
    @Option(
        help: ArgumentHelp(
            "Only earthquakes since a date (2025-10-01, 2025-10-01T12:00:00Z) or age (30m, 24h, 7d, 2w).",
            valueName: "when"))
    var since: String?
    @Option(help: "At most this many earthquakes.") var limit = 20
    @Option(
        help: ArgumentHelp("The nearest earthquakes to a point, nearest first, with distances.", valueName: "lat,lon"))
    var near: String?
    @Option(help: "Order: time (newest first) or magnitude (strongest first). With --near: distance unless given.")
    var sort: SortOrder?
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var database: DatabaseOption

    func run() async throws {
        guard limit >= 0 else { throw ValidationError("--limit must not be negative") }
        try await reportingErrors { cli in
            let options = ListOptions(
                minMagnitude: minMagnitude,
                since: try since.map { text throws(CLIError) in try SinceParser.parse(text, now: cli.now()) },
                limit: limit,
                near: try near.map { text throws(CLIError) in try Coordinate(parsing: text) },
                sort: sort == .magnitude ? .magnitude : .time
            )
            try cli.list(options, database: database.path, json: json, explicitSort: sort != nil)
        }
    }
}

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show one earthquake.")

    @Argument(help: "The USGS event id, as in `earthquakes list`.") var id: String
    @Flag(help: "Print the result as JSON.") var json = false
    @OptionGroup var database: DatabaseOption

    func run() async throws {
        try await reportingErrors { cli in try cli.show(id: id, database: database.path, json: json) }
    }
}

/// Runs a command; on failure prints `earthquakes: <one line>` to standard error and exits with 1.
func reportingErrors(_ body: (EarthquakesCLI) async throws -> Void) async throws {
    let cli = EarthquakesCLI(console: .standard)
    do {
        try await body(cli)
    } catch {
        cli.console.error("earthquakes: \(EarthquakesCLI.message(for: error))\n")
        throw ExitCode.failure
    }
}
