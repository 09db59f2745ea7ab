import Baton
import BatonDurable
import EarthquakesKit
import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A refresh of several feeds: one durable graph, so that a refresh killed half-way is finished by
/// the next one.
///
/// ## Where the graph is stored
/// In the database itself: the job store's tables (`baton_…`) sit beside `earthquake`, so that a feed's
/// import, its line in the refresh log and its job's completion commit in one transaction
/// (``ImportFeed``). A refresh killed at any moment has imported a feed and recorded it, or neither; a
/// resumed refresh never imports a feed a second time. `list` and `show` read only `earthquake`.
/// Versions before 2026-11 kept the graphs in `<database>.jobs`; the first refresh moves them in
/// (``LegacyJobStore``).
///
/// ## Resuming
/// The graph is submitted with a unique key made of the feeds (in order) and `--strict`, so running the
/// same command again finds the unfinished run and finishes it; `--resume` without feeds resumes the
/// newest unfinished refresh whatever its feeds. Finished refreshes are pruned when the next one starts.
public enum FeedRefresh {
    /// The name of every refresh graph.
    public static let runName = "earthquakes refresh"
    /// Imports run one at a time (across processes too): each is one write transaction on the database.
    static let importCategory = DurableCategory.named("earthquakes.import", limit: 1)

    /// How long a job store write waits for another process's transaction: an import of a big feed holds
    /// the database's write lock for seconds, as ``EarthquakeStore/busyTimeout`` allows.
    static let busyTimeout: TimeInterval = 60

    /// Whether the job store failed because another connection held the database's lock too long.
    static func isBusy(_ error: DurableError) -> Bool {
        guard error.code == .storeFailure, let database = error.underlying as? DatabaseError else { return false }
        return database.resultCode == .SQLITE_BUSY || database.resultCode == .SQLITE_LOCKED
    }

    /// The leases of a refresh's attempts: twice ``busyTimeout``, so that a renewal that waited the whole
    /// busy timeout behind another feed's import still lands in time.
    static let leaseDuration = Duration.seconds(2 * busyTimeout)

    /// The job store in the database at `database` (its tables made if missing), with the runs of an older
    /// version's `<database>.jobs` moved in; and a note to print when they could not be.
    static func openJobs(database: String) throws -> (store: SQLiteJobStore, note: String?) {
        let jobs = try SQLiteJobStore(path: database, busyTimeout: busyTimeout)
        do {
            return (jobs, try LegacyJobStore.migrate(database: database, opened: jobs))
        } catch {
            try? jobs.close()
            throw error
        }
    }

    /// The job store in the database at `database` for reading, or nil when the file has none (a read
    /// never adds the store's tables to a database; it may add the indexes of a store made by an older
    /// version, as every opening for writing does) or this process may not write it (a connection that
    /// may not write would leave SQLite's side files behind it; the store has nothing to say then).
    static func existingJobs(database: String) -> SQLiteJobStore? {
        let folder = URL(fileURLWithPath: database).deletingLastPathComponent().path
        guard FileManager.default.isWritableFile(atPath: database), FileManager.default.isWritableFile(atPath: folder),
            let queue = try? DatabaseQueue(path: database)
        else { return nil }
        let hasStore = (try? queue.read { db in try db.tableExists("baton_durable_meta") }) ?? false
        try? queue.close()
        return hasStore ? try? SQLiteJobStore(path: database, busyTimeout: busyTimeout) : nil
    }

    /// Where downloads of unfinished refreshes wait: `<database>.downloads/`.
    static func downloadFolder(forDatabase path: String) -> String { path + ".downloads" }

    /// A feed as a refresh of several feeds records it: a path made absolute, so that `--resume` from
    /// another folder reads the same files (and a refresh of the same files from another folder joins
    /// it); a URL as given.
    static func recorded(_ feed: String) -> String {
        guard !feed.contains("://"), !feed.hasPrefix("/") else { return feed }
        // Not standardized: with a link in the path, `..` is for the kernel to resolve, not the text.
        return FileManager.default.currentDirectoryPath + "/" + feed
    }

    /// The unique key of a refresh of these feeds: its first line says what it is, then one feed a line.
    static func uniqueKey(feeds: [String], strict: Bool) -> String {
        (["earthquakes refresh v1\(strict ? " --strict" : "")"] + feeds).joined(separator: "\n")
    }

    /// The feeds and `--strict` of a unique key written by ``uniqueKey(feeds:strict:)``.
    static func parse(uniqueKey: String) -> (feeds: [String], strict: Bool)? {
        let lines = uniqueKey.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let first = lines.first, first.hasPrefix("earthquakes refresh v1") else { return nil }
        return (Array(lines.dropFirst()), first.hasSuffix("--strict"))
    }

    /// A short, stable name for a key (64-bit FNV-1a), for the download folder of its run.
    static func folderName(_ key: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return String(hash, radix: 16)
    }

    /// USGS's summary feeds by short name: `hour`, `day`, `week`, `month` (magnitude 2.5+, like the
    /// default feed) or `all_day`, `4.5_week`, `significant_month`, …; anything else is a URL or a path.
    public static func expand(_ feed: String) -> String {
        let periods = ["hour", "day", "week", "month"]
        let levels = ["significant", "4.5", "2.5", "1.0", "all"]
        var name = feed.lowercased()
        if periods.contains(name) { name = "2.5_" + name }
        let parts = name.split(separator: "_", maxSplits: 1).map(String.init)
        guard parts.count == 2, levels.contains(parts[0]), periods.contains(parts[1]),
            !FileManager.default.fileExists(atPath: feed)
        else { return feed }
        return "https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/\(name).geojson"
    }

    /// The feeds of a comma-separated list (`--feeds`), trimmed, empty ones dropped. A comma inside the
    /// query of an http(s) address is the address's: FDSN event queries list values with commas
    /// (`eventtype=earthquake,explosion`). So a piece after such an address stays part of it unless it
    /// reads as a feed of its own: an address, a path (with a `/`, or a file that exists), or a short
    /// USGS name (`day`, `4.5_week`).
    public static func feedList(_ text: String) -> [String] {
        var feeds: [String] = []
        for piece in text.split(separator: ",", omittingEmptySubsequences: false) {
            let piece = piece.trimmingCharacters(in: .whitespaces)
            if let last = feeds.last, continuesQuery(last, with: piece) {
                feeds[feeds.count - 1] = last + "," + piece
            } else if !piece.isEmpty {
                feeds.append(piece)
            }
        }
        return feeds
    }

    /// Whether `piece` continues the query of the address `address` (see ``feedList(_:)``).
    private static func continuesQuery(_ address: String, with piece: String) -> Bool {
        let scheme = address.lowercased()
        guard scheme.hasPrefix("http://") || scheme.hasPrefix("https://"), address.contains("?"),
            !piece.isEmpty, !piece.contains("/"), !piece.hasPrefix("~"), expand(piece) == piece,
            !FileManager.default.fileExists(atPath: piece)
        else { return false }
        return true
    }

    /// `feeds` without repeats, in order: the same address twice (`day` and `2.5_day` once expanded), or
    /// the same file by two spellings, is one feed.
    public static func distinct(_ feeds: [String]) -> [String] {
        var seen: Set<String> = []
        return feeds.filter { feed in
            var key = feed
            if case .url(let url)? = try? EarthquakesCLI.source(feed) {
                key = url.isFileURL ? "file:" + RunPicture.canonical(url.path) : url.absoluteString
            }
            return seen.insert(key).inserted
        }
    }

    /// The graph of a refresh of `feeds` (in order) into the database at `database`: fetch → parse →
    /// import for each feed; the handles of the imports, and the folder of the run's downloads.
    static func graph(
        feeds: [String], strict: Bool, database: String
    ) -> (graph: JobGraph, imports: [JobGraph.Handle<ImportFeed.Output>], folder: URL) {
        let folder = URL(fileURLWithPath: downloadFolder(forDatabase: database))
            .appendingPathComponent(folderName(uniqueKey(feeds: feeds, strict: strict)), isDirectory: true)
        var graph = JobGraph(name: runName)
        let imports = addFeeds(
            feeds, folder: folder, to: &graph, kinds: (FetchFeed.self, ParseFeed.self, ImportFeed.self))
        return (graph, imports, folder)
    }

    /// Adds fetch → parse → import for each feed to `graph`, downloading into `folder`, as jobs of `kinds`
    /// (a refresh's, or a watch's own); the imports.
    static func addFeeds<Fetch: DurableJob, Parse: DurableJob, Import: DurableJob>(
        _ feeds: [String], folder: URL, to graph: inout JobGraph, kinds: (Fetch.Type, Parse.Type, Import.Type)
    ) -> [JobGraph.Handle<Import.Output>]
    where Fetch.Input == FetchFeed.Input, Parse.Input == Fetch.Output, Import.Input == Parse.Output {
        var imports: [JobGraph.Handle<Import.Output>] = []
        for (index, feed) in feeds.enumerated() {
            let fetch = graph.add(
                Fetch.self,
                input: FetchFeed.Input(
                    feed: feed, file: folder.appendingPathComponent("feed-\(index + 1).geojson").path),
                name: "fetch \(feed)", retry: .exponential(maxAttempts: 3, initial: .milliseconds(500)))
            // A parse that fails fails the same way again; but one whose process was killed (while it
            // parsed, or waited to record its result behind another feed's import) lost its attempt to the
            // crash, and must run again when the refresh is resumed.
            let parse = graph.add(
                Parse.self, inputFrom: fetch, name: "parse \(feed)", retry: .immediate(maxAttempts: 3))
            imports.append(
                graph.add(
                    Import.self, inputFrom: parse, name: "import \(feed)", retry: .exponential(maxAttempts: 3),
                    categories: [importCategory]))
        }
        return imports
    }

    /// What to say when the refresh's graph was already in the job store. "Interrupted" only when it was:
    /// a worker that held its jobs is gone. A live worker (another `refresh` of the same feeds running
    /// now) is joined; a run that nothing has started yet was just submitted by another refresh, or was
    /// stopped before it began.
    static func existingRunNote(
        imported: Int, of count: Int, liveWorkers: Int, deadWorkers: Int, started: Bool
    ) -> String {
        let done = "\(imported) of \(EarthquakesCLI.counted(count, "feed")) imported so far"
        if liveWorkers > 0 {
            return "Another refresh of these feeds is running; joining it (\(done), not downloaded again)."
        }
        if deadWorkers > 0 {
            // ("1 of 3 feeds were imported … and are not", "1 of 1 feed was imported … and is not")
            return "Resuming the interrupted refresh: \(imported) of \(EarthquakesCLI.counted(count, "feed")) "
                + "\(count == 1 ? "was" : "were") imported before it stopped and \(count == 1 ? "is" : "are") not "
                + "downloaded again."
        }
        if !started {
            return "Joining a refresh of these feeds that another refresh submitted and has not started yet."
        }
        return "Finishing an unfinished refresh of these feeds (\(done), not downloaded again)."
    }

    /// Submits the graph of a refresh without running it, as another `refresh` of these feeds does just
    /// before it starts (tests).
    static func submitOnly(feeds: [String], strict: Bool, database: String) async throws {
        let jobs = try openJobs(database: database).store
        defer { try? jobs.close() }
        let graph = graph(feeds: feeds, strict: strict, database: database).graph
        _ = try await jobs.submit(graph, uniqueKey: uniqueKey(feeds: feeds, strict: strict))
    }

    /// The worker id of this process: `earthquakes-<host>-<pid>`.
    static func workerID() -> String {
        "earthquakes-\(ProcessInfo.processInfo.hostName)-\(ProcessInfo.processInfo.processIdentifier)"
    }

    /// Whether `worker` was a process of this machine that no longer exists (so its leases can end now).
    static func isGone(_ worker: String) -> Bool {
        let prefix = "earthquakes-\(ProcessInfo.processInfo.hostName)-"
        guard worker.hasPrefix(prefix), let pid = Int32(worker.dropFirst(prefix.count)), pid > 0,
            pid != ProcessInfo.processInfo.processIdentifier
        else { return false }
        return kill(pid, 0) == -1 && errno == ESRCH
    }
}

/// What `refresh --json` prints for several feeds.
struct FeedsRefreshJSON: Encodable {
    struct FeedResult: Encodable {
        var source: String
        var inserted: Int?
        var updated: Int?
        var unchanged: Int?
        var total: Int?
        var skipped: Int?
        /// Features that repeated an id given earlier in the feed, and those ids.
        var duplicates: Int?
        var duplicateIDs: [String]?
        var warnings: [String]?
        /// Events the feed marks deleted (not stored), and how many stored copies of them were removed.
        var deleted: Int?
        var removedDeleted: Int?
        /// Stored rows of events the USGS now lists under another id (its `ids`), replaced.
        var merged: Int?
        var importedBeforeResume: Bool?
        var error: String?
    }
    var database: String
    /// Whether the refresh finished one that was interrupted.
    var resumed: Bool
    /// Whether the refresh joined another refresh of the same feeds that was running.
    var joined: Bool
    var feeds: [FeedResult]
}

extension EarthquakesCLI {
    /// One line per unfinished refresh of several feeds in the job store beside `database` (interrupted,
    /// or running now): its feeds, how many are imported, and that `refresh --resume` finishes it. Empty
    /// when there is no job store or it cannot be read (`status` goes on without it).
    func unfinishedRefreshes(database: String) async -> [String] {
        var lines: [String] = []
        if let jobs = FeedRefresh.existingJobs(database: database) {
            lines += await unfinishedRefreshes(in: jobs)
            closeAtEnd(jobs.close)
        }
        // An older version's job store, not yet moved into the database (the next refresh moves it).
        let legacy = LegacyJobStore.path(forDatabase: database)
        if FileManager.default.fileExists(atPath: legacy), let jobs = try? SQLiteJobStore(path: legacy) {
            lines += await unfinishedRefreshes(in: jobs)
            closeAtEnd(jobs.close)
        }
        return lines
    }

    private func unfinishedRefreshes(in jobs: SQLiteJobStore) async -> [String] {
        guard let runs = try? await jobs.unfinishedRuns(named: FeedRefresh.runName) else { return [] }
        var lines: [String] = []
        for run in runs {
            guard let key = run.uniqueKey.flatMap(FeedRefresh.parse(uniqueKey:)),
                let snapshot = try? await jobs.snapshot(of: run.id)
            else { continue }
            let imported = snapshot.jobs.filter { $0.kind == ImportFeed.kind && $0.state == .succeeded }.count
            let running = snapshot.jobs.contains { $0.leaseOwner.map { !FeedRefresh.isGone($0) } ?? false }
            let feeds = TerminalText.safe(key.feeds.map(Self.feedName).joined(separator: ", "))
            let what = running ? "running now" : "interrupted"
            lines.append(
                "Unfinished refresh of \(feeds) (\(what), started \(RelativeTime.ago(run.created, now: now()))): "
                    + "\(imported) of \(Self.counted(key.feeds.count, "feed")) imported; "
                    + "`earthquakes refresh --resume` finishes it")
        }
        // The last refresh of several feeds ended with a feed failed: `--resume` refreshes its feeds again
        // (status showed only the feeds it imported, as if it had gone well).
        if runs.isEmpty, let failed = try? await Self.lastFailedRefresh(in: jobs) {
            let feeds = TerminalText.safe(failed.key.feeds.map(Self.feedName).joined(separator: ", "))
            lines.append(
                "The last refresh of \(feeds) ended with \(Self.counted(failed.failedJobs, "step")) failed; "
                    + "`earthquakes refresh --resume` refreshes its feeds again")
        }
        return lines
    }
}
