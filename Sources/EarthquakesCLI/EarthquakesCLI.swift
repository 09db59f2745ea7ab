import BatonDurable
import BatonNetworking
public import EarthquakesKit
public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// What the `earthquakes` tool does, one method per command, independent of argument parsing so
/// tests can run it in-process.
///
/// ```swift
/// let cli = EarthquakesCLI(console: .standard)
/// try await cli.refresh(feed: "https://earthquake.usgs.gov/…/2.5_day.geojson", database: nil, json: false)
/// try cli.list(ListOptions(minMagnitude: 5), database: nil, json: false)
/// ```
///
/// Results go to standard output; messages and progress (only on a terminal) to standard error.
/// Every failure is thrown; ``message(for:)`` turns it into the one line to show.
///
/// ## Thread safety
/// A `Sendable` value; each call opens the database it needs.
public struct EarthquakesCLI: Sendable {
    /// The feed `refresh` downloads when no `--feed` is given: magnitude 2.5+ of the past day.
    public static let defaultFeedURL = URL(
        string: "https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/2.5_day.geojson")!

    /// The tool's version, printed by `earthquakes --version`.
    public static let version = "0.3.0"

    public var console: Console
    public var environment: [String: String]
    /// The current time, for `--since 7d`.
    public var now: @Sendable () -> Date
    /// The session that downloads feeds: the one given, or ``GetEarthquakes/defaultSession``, made only
    /// when a command downloads (making one creates Foundation's cache folders in the user's home, which
    /// every command, `status` included, left behind).
    public var session: URLSession {
        get { givenSession ?? GetEarthquakes.defaultSession }
        set { givenSession = newValue }
    }
    private var givenSession: URLSession?
    /// Ctrl-C: cancels a running refresh.
    public var interrupts: Interrupts
    /// How long a refresh's running downloads may go on when its worker shuts down gracefully (Ctrl-C
    /// does not wait for them: it cancels them at once).
    public var shutdownGracePeriod: Duration = .seconds(10)

    public init(
        console: Console,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        now: @escaping @Sendable () -> Date = { Date() },
        session: URLSession? = nil,
        interrupts: Interrupts = Interrupts()
    ) {
        self.console = console
        self.environment = environment
        self.now = now
        self.givenSession = session
        self.interrupts = interrupts
    }

    // MARK: Commands

    /// `--remove-sample`: deletes the sample database that earlier versions kept beside the user's database
    /// (and SQLite's side files). The user's database is not touched. (The sample is now shown from memory,
    /// and no file is made for it.)
    public func removeSample(database: String?) throws {
        let path = try samplePath(database)
        var removed = false
        for file in [path, path + "-wal", path + "-shm", path + "-journal"]
        where FileManager.default.fileExists(atPath: file) {
            do {
                try FileManager.default.removeItem(atPath: file)
                removed = true
            } catch {
                throw CLIError("cannot delete \(file): \(error.localizedDescription)")
            }
        }
        console.print(removed ? "Removed the sample database \(path)." : "There is no sample database at \(path).")
    }

    // MARK: Helpers

    /// The one line to show for an error, without the program name (a ``CLIError``'s ``CLIError/details``
    /// are shown on lines of their own, after it).
    public static func message(for error: any Error) -> String {
        let text: String
        switch error {
        case is CancellationError: text = "cancelled"
        case let error as CLIError: text = error.message  // (its details are lines of their own)
        case let error as DurableError where FeedRefresh.isBusy(error):
            // The job store's own advice (a longer busy timeout) is a programmer's; the database is the user's.
            text =
                "the database is in use: another program (probably another refresh of it) held its write lock for "
                + "longer than \(Int(FeedRefresh.busyTimeout)) s. Try again when it has finished; "
                + "`earthquakes refresh --resume` finishes a refresh of several feeds that it stopped"
        default: text = String(describing: error)
        }
        // On one line, and safe for a terminal: messages quote file names, feed text and reasons that
        // users and servers chose.
        return TerminalText.safe(text.split(whereSeparator: \.isNewline).joined(separator: " "))
    }

    /// A line under an error's message (a ``CLIError``'s details), safe for a terminal.
    public static func detailLine(_ line: String) -> String { TerminalText.safe(line) }

    /// The source named by `--feed`: an http(s) URL, a file URL, or a path.
    public static func source(_ feed: String?) throws(CLIError) -> GetEarthquakes.Source {
        guard let feed, !feed.isEmpty else { return .url(defaultFeedURL) }
        if let schemeEnd = feed.range(of: "://") {
            // Schemes are case-insensitive (HTTP://… is http://…); URLSession wants them in lower case.
            let scheme = feed[..<schemeEnd.lowerBound].lowercased()
            guard ["http", "https", "file"].contains(scheme),
                let url = URL(string: scheme + feed[schemeEnd.lowerBound...])
            else {
                throw CLIError.usage("--feed \(feed): use an http(s) address or a file path")
            }
            // A user name or password in the address was not sent (the server answered 401 or 403), but
            // was printed in messages and stored in the database's refresh log and job store.
            if scheme != "file", url.user != nil || url.password != nil {
                throw CLIError.usage(
                    "--feed: an address with a user name or password (user:password@host) is not supported: it "
                        + "would be kept in the database and shown in messages; give an address without them")
            }
            return .url(url)
        }
        return .url(URL(fileURLWithPath: feed))
    }

    /// Whether the user chose the database (option or environment variable) rather than the default.
    func isExplicit(_ option: String?) -> Bool {
        (option?.isEmpty == false) || (environment[DatabaseLocation.environmentVariable]?.isEmpty == false)
    }

    /// The sample database that earlier versions made beside the user's database.
    ///
    /// - Throws: ``CLIError`` when the user's database is itself named ``DatabaseLocation/sampleFileName``:
    ///   it would be its own sample database (the sample mixed into it, `--remove-sample` deleting it).
    private func samplePath(_ option: String?) throws(CLIError) -> String {
        let database = DatabaseLocation.path(option: option, environment: environment)
        let sample = DatabaseLocation.samplePath(forDatabase: database)
        guard RunPicture.canonical(sample) != RunPicture.canonical(database) else {
            throw CLIError(
                "the database \(database) has the name of the sample database (\(DatabaseLocation.sampleFileName)), "
                    + "which is kept beside your database; the sample commands would mix made-up events into it or "
                    + "delete it. Rename it, or give a database of another name with --database")
        }
        return sample
    }

    /// Runs a store's `close` when a command is done (`defer { closeAtEnd(store.close) }`), so that no
    /// `-wal` file is left beside the database or the job store of `refresh --feeds` (see
    /// ``EarthquakeStore/close()``). A failure to close is a warning: the command's result stands, and
    /// SQLite reads the log when the file is next opened.
    func closeAtEnd(_ close: () throws -> Void) {
        do {
            try close()
        } catch {
            console.error("warning: \(Self.message(for: error))\n")
        }
    }

    /// Opens an existing database for a read command; never creates a file or a folder. With `sample`, the
    /// built-in sample in memory (named ``sampleName`` in messages).
    func openForReading(_ option: String?, sample: Bool) throws -> (EarthquakeStore, String) {
        if sample { return (try Self.sampleStore(), Self.sampleName) }
        let path = DatabaseLocation.path(option: option, environment: environment)
        try DatabaseLocation.checkReadable(path)
        return (try EarthquakeStore(path: path, mode: .readOnly, onLongWait: waitNotice(path)), path)
    }

    /// What a read command says when another program's lock keeps it waiting (it waits up to a minute).
    func waitNotice(_ path: String) -> @Sendable () -> Void {
        let console = console
        return {
            console.error(
                "waiting for another program that is using \(TerminalText.safe(path)) (up to a minute)…\n")
        }
    }

    /// Opens (creating if needed) the database a refresh writes to, after ``DatabaseLocation/prepareForWriting(_:explicit:)``.
    func openForWriting(_ path: String) throws -> EarthquakeStore {
        try Self.mappingReadOnly(path) { () throws(StoreError) in try EarthquakeStore(path: path) }
    }

    /// A `--feed` path must be a file: a folder or a missing file is named before anything else happens.
    static func checkFeedFile(_ path: String) throws(CLIError) {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
            // `--feeds dya`, `--feed 5.4_week`: a mistyped feed name is read as a file name.
            let name = (path as NSString).lastPathComponent
            let names =
                name.contains(".geojson") || name.contains(".json")
                ? ""
                : " (or name a USGS feed: hour, day, week, month, or a level and a period such as all_day, "
                    + "1.0_hour, 4.5_week, significant_month)"
            throw CLIError(
                "could not read the feed file \(path): no such file; check the path given to --feed\(names)")
        }
        if isFolder.boolValue {
            throw CLIError(
                "--feed \(path) is a folder; give a feed file inside it (a .geojson file) or an http(s) address")
        }
    }

    /// Whether a feed error comes from a page of HTML (a login page, an error page served with 200…).
    static func looksLikeHTML(_ error: FeedError) -> Bool {
        if error.code == .notGeoJSON { return true }  // the parser recognises HTML itself
        guard error.code == .malformedJSON, let position = error.position else { return false }
        guard let marker = position.excerpt.range(of: "⟨here⟩") else { return false }
        let after = position.excerpt[marker.upperBound...].drop { $0 == " " }
        let before = position.excerpt[..<marker.lowerBound]
        return after.hasPrefix("<") && before.allSatisfy { $0 == " " }
    }
}
