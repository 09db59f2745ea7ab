import Baton
import BatonDurable
public import EarthquakesKit
public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a watch alerts on and how: stored in the input of its jobs, so a run fired by the schedule after
/// a restart alerts as the watch that stored it would.
public struct WatchSpec: Codable, Sendable, Equatable {
    /// The watch's name in the database (its starting point and its alerts are kept by name).
    public var name: String
    /// Which events are alerted.
    public var filter: EarthquakeFilter
    /// A shell command run once per alert with the event as JSON on its standard input.
    public var exec: String?
    /// Whether an alert rings the terminal's bell (when standard output is a terminal).
    public var bell: Bool
    /// Where distances are measured from, for the alert line (`--near`), with its name.
    public var near: Coordinate?
    public var nearName: String?

    public init(
        name: String = "default", filter: EarthquakeFilter, exec: String? = nil, bell: Bool = true,
        near: Coordinate? = nil, nearName: String? = nil
    ) {
        self.name = name
        self.filter = filter
        self.exec = exec
        self.bell = bell
        self.near = near
        self.nearName = nearName
    }
}

/// The watch's graph, its schedule, and its two jobs of its own: decide which events to alert (in the
/// transaction that records the decision's completion), then deliver them.
///
/// ## No alert twice, none lost
/// Which events are alerted is decided once: ``DecideAlerts`` queues them in the database in the same
/// transaction that records its job's completion, and moves the watch's mark on (events changed after
/// the mark are the next decision's). ``SendAlerts`` then delivers each queued alert and records it
/// delivered. A watch killed before the record delivers it again when it next runs: an alert is sent
/// at least once, and twice only when the process dies between delivering it and recording it (for
/// `--exec`, between the command's exit and the record).
public enum EarthquakeWatch {
    /// The name of every run of a watch.
    static let runName = "earthquakes watch"
    /// The name of the watch's schedule in the job store.
    static func scheduleName(_ watch: String) -> String { "earthquakes watch \(watch)" }
    /// Alerts are decided and sent one at a time: runs of two ticks never deliver the same alert.
    static let alertCategory = DurableCategory.named("earthquakes.alert", limit: 1)
    /// An event is news when it came in (or changed to match) at most this long after it happened.
    static let freshness: TimeInterval = 86_400
    /// A delivery that fails (`--exec` exits with an error) is tried again at the next checks, this many
    /// times in all.
    static let maxDeliveryAttempts = 3
    /// The longest an `--exec` command may run for one alert.
    static let execTimeout: Duration = .seconds(60)

    /// The graph of one check: fetch → parse → import for each feed, then decide, then send.
    static func graph(spec: WatchSpec, feeds: [String], database: String) -> JobGraph {
        let folder = URL(fileURLWithPath: FeedRefresh.downloadFolder(forDatabase: database))
            .appendingPathComponent("watch-" + FeedRefresh.folderName(spec.name), isDirectory: true)
        var graph = JobGraph(name: runName)
        let imports = FeedRefresh.addFeeds(feeds, strict: false, folder: folder, to: &graph)
        // The decision runs whatever became of the feeds: a feed that failed leaves the others' news.
        let decide = graph.add(
            DecideAlerts.self, input: spec, name: "decide alerts", regardless: imports,
            retry: .exponential(maxAttempts: 3), categories: [alertCategory])
        graph.add(
            SendAlerts.self, inputFrom: decide, name: "send alerts", retry: .immediate(maxAttempts: 3),
            categories: [alertCategory])
        return graph
    }

    /// `5m`, `30s`, `1h`, `1d` → the interval; at least a second.
    public static func interval(_ text: String) throws(CLIError) -> Duration {
        let units: [String: Double] = ["s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86_400]
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let unit = String(trimmed.reversed().prefix { $0.isLetter }.reversed())
        let number = trimmed.dropLast(unit.count)
        guard let seconds = units[unit], !number.isEmpty, number.allSatisfy({ $0.isNumber || $0 == "." }),
            let count = Double(number), count.isFinite, count * seconds >= 1, count * seconds <= 7 * 86_400
        else {
            throw CLIError.usage(
                "--every expects an interval from 1s to 7d such as 30s, 5m, 1h or 1d; got \"\(text)\"")
        }
        return .milliseconds(Int64((count * seconds * 1000).rounded()))
    }

    /// The line of an alert: magnitude, place, time (UTC and how long ago), distance, id.
    static func line(_ quake: Earthquake, spec: WatchSpec, now: Date) -> String {
        var parts: [String] = []
        parts.append(quake.magnitude.map { String(format: "M%.1f", $0) } ?? "M?")
        parts.append(TerminalText.safe(quake.place ?? quake.title ?? "(no place given)"))
        if let time = quake.time {
            parts.append(
                "\(CivilTime.minute(time.millisecondsSince1970)) UTC (\(RelativeTime.ago(time, now: now)))")
        }
        if let near = spec.near {
            let km = GreatCircle.distanceKilometers(
                from: (near.latitude, near.longitude), to: (quake.latitude, quake.longitude))
            parts.append(String(format: "%.0f km from %@", km, TerminalText.safe(spec.nearName ?? "the point")))
        }
        if let alert = quake.alert { parts.append("PAGER \(TerminalText.safe(alert))") }
        parts.append(TerminalText.safe(quake.id))
        return "ALERT " + parts.joined(separator: "  ")
    }
}

/// Decides which events a check alerts (see ``Watch``).
struct DecideAlerts: DurableJob {
    static let kind = "earthquakes.watch.decide"
    typealias Input = WatchSpec

    struct Output: Codable, Sendable {
        var spec: WatchSpec
        var decision: EarthquakeStore.AlertDecision
    }

    let store: EarthquakeStore
    let now: @Sendable () -> Date

    func run(_ spec: WatchSpec, context: DurableJobContext) async throws -> Output {
        let (store, now) = (store, now)
        return try await context.complete { db -> Output in
            Output(
                spec: spec,
                decision: try store.decideAlerts(
                    watch: spec.name, filter: spec.filter, freshWithin: EarthquakeWatch.freshness, now: now(), in: db))
        }
    }
}

/// Delivers the watch's queued alerts (those of earlier checks too, if a watch stopped before sending
/// them): a line on standard output (and the bell), and `--exec`.
struct SendAlerts: DurableJob {
    static let kind = "earthquakes.watch.send"
    typealias Input = DecideAlerts.Output

    struct Output: Codable, Sendable {
        var delivered: Int
        var failed: Int
    }

    let store: EarthquakeStore
    let console: Console
    let environment: [String: String]
    let now: @Sendable () -> Date

    func run(_ input: Input, context: DurableJobContext) async throws -> Output {
        let spec = input.spec
        if input.decision.started {
            let count = input.decision.matchingAtStart
            console.error(
                "Watch \"\(TerminalText.safe(spec.name))\" started: \(EarthquakesCLI.counted(count, "stored event")) "
                    + "\(count == 1 ? "matches" : "match") and \(count == 1 ? "is" : "are") not alerted; events "
                    + "that come in from now on are.\n")
        }
        let store = store
        let pending = try await offThePool {
            try store.pendingAlerts(watch: spec.name, maxAttempts: EarthquakeWatch.maxDeliveryAttempts)
        }
        await EarthquakesCLI.testPause("alerts-decided")
        var output = Output(delivered: 0, failed: 0)
        for alert in pending {
            try Task.checkCancellation()
            guard let quake = alert.earthquake else {
                // Deleted since it was queued (the USGS withdrew it): nothing to say.
                try await offThePool { try store.recordAlert(watch: spec.name, id: alert.id, deliveredAt: Date()) }
                continue
            }
            let line = EarthquakeWatch.line(quake, spec: spec, now: now())
            console.print((spec.bell && console.isOutputTerminal ? "\u{7}" : "") + line)
            var failure: String?
            if let command = spec.exec {
                failure = await Self.execute(command, quake: quake, environment: environment)
            }
            if let failure {
                output.failed += 1
                let tries = alert.failedAttempts + 1
                let next =
                    tries < EarthquakeWatch.maxDeliveryAttempts
                    ? "it is tried again at the next check (\(tries) of \(EarthquakeWatch.maxDeliveryAttempts) tries)"
                    : "given up after \(EarthquakeWatch.maxDeliveryAttempts) tries"
                console.error("warning: --exec for \(TerminalText.safe(quake.id)): \(failure); \(next)\n")
                try await offThePool {
                    try store.recordAlert(watch: spec.name, id: alert.id, deliveredAt: nil, error: failure)
                }
            } else {
                output.delivered += 1
                try await offThePool { try store.recordAlert(watch: spec.name, id: alert.id, deliveredAt: Date()) }
            }
        }
        TestPause.say("checked")
        return output
    }

    /// Runs `command` with `/bin/sh -c`, the event as JSON (one line) on its standard input and its id in
    /// `EARTHQUAKE_ID`; nil when it exited with status 0, otherwise what went wrong. Its output goes where
    /// the watch's goes. Cancelling the task ends the command.
    static func execute(_ command: String, quake: Earthquake, environment: [String: String]) async -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        var environment = environment
        environment["EARTHQUAKE_ID"] = quake.id
        process.environment = environment
        // The event reaches the command's standard input from a file, not a pipe: a command that does not
        // read it (or exits first) must not end this process with SIGPIPE.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "earthquakes-alert-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let input: FileHandle
        do {
            let json = try JSONText.encode(QuakeJSON(quake, distanceKm: nil), oneLine: true)
            try Data((json + "\n").utf8).write(to: file)
            input = try FileHandle(forReadingFrom: file)
        } catch {
            return "the event could not be written for the command: \(EarthquakesCLI.message(for: error))"
        }
        defer { try? input.close() }
        process.standardInput = input
        let ended = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in ended.signal() }
        do {
            try process.run()
        } catch {
            return "could not start /bin/sh: \(error.localizedDescription)"
        }
        let timedOut = Protected(false)
        return await withTaskCancellationHandler {
            _ = try? await offThePool {
                if ended.wait(timeout: .now() + Double(EarthquakeWatch.execTimeout.components.seconds)) == .timedOut {
                    timedOut.withLock { $0 = true }
                    process.terminate()
                    ended.wait()
                }
            }
            if timedOut.withLock({ $0 }) {
                return
                    "the command did not end within \(EarthquakeWatch.execTimeout.components.seconds) s and was stopped"
            }
            if process.terminationReason == .uncaughtSignal {
                return "the command was ended by signal \(process.terminationStatus)"
            }
            return process.terminationStatus == 0 ? nil : "the command exited with status \(process.terminationStatus)"
        } onCancel: {
            if process.isRunning { process.terminate() }
        }
    }
}

extension EarthquakesCLI {
    /// `watch`: refreshes `feeds` now and then every `interval` (a durable schedule in the database's job
    /// store), and alerts on the events that come in matching `spec` — a line on standard output (with the
    /// bell on a terminal), and `spec.exec` run with each event as JSON. Runs until Ctrl-C; with `once`,
    /// one check, then returns. See ``Watch`` for what is alerted once.
    public func watch(
        spec: WatchSpec, feeds: [String], interval: Duration, once: Bool, database: String?,
        timeout: Duration = .seconds(30)
    ) async throws {
        let feeds = FeedRefresh.distinct(feeds.map(FeedRefresh.expand))
        guard !feeds.isEmpty else { throw CLIError.usage("give a feed to watch (--feed), for example --feed hour") }
        for feed in feeds {
            if case .url(let url) = try Self.source(feed), url.isFileURL { try Self.checkFeedFile(url.path) }
        }
        let path = DatabaseLocation.path(option: database, environment: environment)
        try DatabaseLocation.prepareForWriting(path, explicit: isExplicit(database))
        let store = try openForWriting(path)
        defer { closeAtEnd(store.close) }
        try store.checkWritable()
        // One watch per database at a time: a second one would deliver the alerts in two places.
        let lock = try WatchLock(database: path)
        defer { lock.release() }
        let (jobs, note) = try FeedRefresh.openJobs(database: path)
        defer { closeAtEnd(jobs.close) }
        if let note { console.error(note) }

        // Jobs left by a watch that was killed are taken back now rather than when their leases end.
        for run in try await jobs.unfinishedRuns(named: EarthquakeWatch.runName) {
            let owners = Set(try await jobs.snapshot(of: run.id).jobs.compactMap(\.leaseOwner))
            for owner in owners where FeedRefresh.isGone(owner) { try await jobs.endLeases(ofWorker: owner) }
        }
        let graph = EarthquakeWatch.graph(spec: spec, feeds: feeds, database: path)
        let scheduleName = EarthquakeWatch.scheduleName(spec.name)
        if !once {
            try await jobs.schedule(name: scheduleName, every: interval, graph: graph, catchUp: .skip)
            try await jobs.resumeSchedule(named: scheduleName)
        }
        // The first check runs now, not at the first tick.
        let first = try await jobs.submit(
            graph, uniqueKey: "watch \(spec.name) \(FeedRefresh.workerID()) \(now().timeIntervalSince1970)")

        let console = console
        let report: @Sendable (String, any Error) -> Void = { feed, error in
            console.error("warning: \(Self.feedName(feed)): \(Self.sentence(Self.message(for: error)))\n")
        }
        var fetch = FetchFeed(session: session, timeout: timeout, totalTimeout: nil, display: nil)
        fetch.onFailure = report
        var parse = ParseFeed(strict: false)
        parse.onFailure = report
        var importer = ImportFeed(store: store, strict: false, now: now, imports: RefreshImports())
        importer.onFailure = report
        let worker = try DurableWorker(
            store: jobs,
            jobs: [
                fetch, parse, importer,
                DecideAlerts(store: store, now: now),
                SendAlerts(store: store, console: console, environment: environment, now: now),
            ],
            configuration: {
                var configuration = DurableWorker.Configuration(
                    id: FeedRefresh.workerID(), maxConcurrentJobs: 4, shutdownGracePeriod: shutdownGracePeriod,
                    retention: .seconds(3600))
                // (The schedule's ticks are not news: the worker's own log says only what is wrong.)
                configuration.logger.logLevel = .warning
                configuration.leaseDuration = FeedRefresh.leaseDuration
                configuration.renewInterval = FeedRefresh.leaseDuration / 8
                return configuration
            }())
        if !once {
            var what = feeds.map(Self.feedName).joined(separator: ", ")
            what += " every \(Self.spoken(interval))"
            console.error(
                "Watching \(what) into \(path)\(spec.exec == nil ? "" : "; each alert runs --exec"). "
                    + "Ctrl-C stops.\n")
        }
        let working = Task {
            if once {
                _ = try await worker.run(until: first)
            } else {
                try await worker.run()
            }
        }
        do {
            try await withTaskCancellationHandler {
                try await interrupts.cancellable(onInterrupt: { working.cancel() }) { try await working.value }
            } onCancel: {
                working.cancel()
            }
        } catch {
            if !interrupts.wasInterrupted { throw error }
        }
        if interrupts.wasInterrupted {
            // Ctrl-C is how a watch ends: its schedule is paused, so no other worker of this store checks
            // for it until the next `watch`.
            if !once { try? await jobs.pauseSchedule(named: scheduleName) }
            console.error(
                "Stopped watching. Alerts already sent are not sent again; `earthquakes watch` goes on from here.\n")
        }
    }

    /// `5 min`, `30 s`, `1 h`.
    static func spoken(_ interval: Duration) -> String {
        let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        if seconds >= 86_400, seconds.truncatingRemainder(dividingBy: 86_400) == 0 {
            return "\(Int(seconds / 86_400)) d"
        }
        if seconds >= 3600, seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600)) h" }
        if seconds >= 60, seconds.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(seconds / 60)) min" }
        return "\(seconds.formatted(.number.precision(.fractionLength(0...1)))) s"
    }
}

/// The lock that keeps one `watch` per database: `flock(2)` on a file in the database's download folder,
/// released when the process ends, however it ends.
final class WatchLock {
    private var descriptor: Int32

    init(database: String) throws(CLIError) {
        let folder = FeedRefresh.downloadFolder(forDatabase: database)
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = Self.path(database: database)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw CLIError("cannot create the watch's lock file \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw CLIError(
                "another `earthquakes watch` is running on \(database); stop it first (one watch per database "
                    + "delivers each alert in one place)")
        }
        self.descriptor = descriptor
    }

    /// Whether a `watch` holds the lock of the database at `database` now.
    static func isHeld(database: String) -> Bool {
        let descriptor = open(Self.path(database: database), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return flock(descriptor, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }

    static func path(database: String) -> String {
        FeedRefresh.downloadFolder(forDatabase: database) + "/watch.lock"
    }

    /// Releases the lock (also when the object goes away).
    func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
