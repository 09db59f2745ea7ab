import Baton
import BatonDurable
public import EarthquakesKit
import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a watch alerts on and how. Saved in the database under the watch's name when the watch starts
/// (``EarthquakeStore/saveWatchSettings(_:watch:)``), and read by each check: checks left over from an
/// earlier start (a watch killed mid-check) alert as the watch was started last, not as it was then.
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

/// The watch's graph, its schedule, and its jobs: fetch, parse and import each feed (kinds of their
/// own, so that a `refresh` running beside a watch never runs the watch's jobs with its settings, nor
/// the watch a refresh's), decide which events to alert (in the transaction that records the decision's
/// completion), then deliver them.
///
/// ## No alert twice, none lost
/// Which events are alerted is decided once: ``DecideAlerts`` queues them in the database in the same
/// transaction that records its job's completion, and moves the watch's mark on (events changed after
/// the mark are the next decision's). ``SendAlerts`` then delivers each queued alert and records it
/// delivered. A watch killed before the record delivers it again when it next runs: an alert is sent
/// at least once, and twice only when the process dies between delivering it and recording it (for
/// `--exec`, between the command's exit and the record).
///
/// ## One watch at a time
/// A `watch` holds a lock on the database (``WatchLock``) while it runs, so no other watch runs there.
/// When it starts, the schedules of the database's other watches are paused and their unfinished checks
/// cancelled: their alerts are delivered by their own watch, when it runs again, never by this one.
public enum EarthquakeWatch {
    /// The name of the runs of the watch `name`.
    static func runName(_ name: String) -> String { "earthquakes watch \(name)" }
    /// The name of the watch's schedule in the job store.
    static func scheduleName(_ watch: String) -> String { "earthquakes watch \(watch)" }
    /// Alerts are decided and sent one at a time: runs of two ticks never deliver the same alert.
    static let alertCategory = DurableCategory.named("earthquakes.alert", limit: 1)
    /// An event is news when it came in (or changed to match) at most this long after it happened.
    static let freshness: TimeInterval = 86_400
    /// A delivery that fails (`--exec` exits with an error) is tried again at the next checks, this many
    /// times in all.
    static let maxDeliveryAttempts = 3
    /// The least time a check gives a feed's download in all (``EarthquakesCLI/watch(spec:feeds:interval:once:database:timeout:)``
    /// gives the interval when it is longer).
    static let longestFetch: Duration = .seconds(120)
    /// The longest an `--exec` command may run for one alert; then it is stopped (SIGTERM, then SIGKILL
    /// a few seconds later, to its whole process group).
    static let execTimeout: Duration = .seconds(60)

    /// The graph of one check of the watch `name`: fetch → parse → import for each feed, then decide,
    /// then send; and the handle of the send (its output says how the deliveries went).
    static func graph(
        name: String, feeds: [String], database: String
    ) -> (graph: JobGraph, send: JobGraph.Handle<SendAlerts.Output>) {
        let folder = URL(fileURLWithPath: FeedRefresh.downloadFolder(forDatabase: database))
            .appendingPathComponent("watch-" + FeedRefresh.folderName(name), isDirectory: true)
        var graph = JobGraph(name: runName(name))
        let imports = FeedRefresh.addFeeds(
            feeds, folder: folder, to: &graph, kinds: (WatchFetch.self, WatchParse.self, WatchImport.self))
        // The decision runs whatever became of the feeds: a feed that failed leaves the others' news.
        let decide = graph.add(
            DecideAlerts.self, input: name, name: "decide alerts", regardless: imports,
            retry: .exponential(maxAttempts: 3), categories: [alertCategory])
        let send = graph.add(
            SendAlerts.self, inputFrom: decide, name: "send alerts", retry: .immediate(maxAttempts: 3),
            categories: [alertCategory])
        return (graph, send)
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

    /// The settings of the watch `name` saved in the database, read in `db`.
    static func spec(_ name: String, in db: Database) throws -> WatchSpec {
        guard let data = try EarthquakeStore.watchSettings(name, in: db) else { throw missingSettings(name) }
        return try JSONDecoder().decode(WatchSpec.self, from: data)
    }

    static func missingSettings(_ name: String) -> CLIError {
        CLIError(
            "the watch \"\(TerminalText.safe(name))\" has no settings in the database; start it with `earthquakes watch`"
        )
    }
}

/// A job of the refresh's run under a kind of the watch's own (see ``EarthquakeWatch``): its ``kind``,
/// and the refresh's job it runs.
protocol WatchKind: DurableJob where Input == Inner.Input, Output == Inner.Output {
    associatedtype Inner: DurableJob
    var job: Inner { get }
}

extension WatchKind {
    func run(_ input: Input, context: DurableJobContext) async throws -> Output {
        try await job.run(input, context: context)
    }
}

/// The watch's own kinds of fetch, parse and import: the refresh's jobs, under names that only a watch
/// registers.
struct WatchFetch: WatchKind {
    static let kind = "earthquakes.watch.fetch"
    let job: FetchFeed
}

struct WatchParse: WatchKind {
    static let kind = "earthquakes.watch.parse"
    let job: ParseFeed
}

struct WatchImport: WatchKind {
    static let kind = "earthquakes.watch.import"
    let job: ImportFeed
}

/// Decides which events a check alerts (see ``EarthquakeWatch``), by the watch's saved settings.
struct DecideAlerts: DurableJob {
    static let kind = "earthquakes.watch.decide"
    /// The watch's name.
    typealias Input = String

    struct Output: Codable, Sendable {
        var name: String
        var decision: EarthquakeStore.AlertDecision
    }

    let store: EarthquakeStore
    let now: @Sendable () -> Date

    func run(_ name: String, context: DurableJobContext) async throws -> Output {
        let (store, now) = (store, now)
        return try await context.complete { db -> Output in
            let spec = try EarthquakeWatch.spec(name, in: db)
            return Output(
                name: name,
                decision: try store.decideAlerts(
                    watch: name, filter: spec.filter, freshWithin: EarthquakeWatch.freshness, now: now(), in: db))
        }
    }
}

/// Delivers the watch's queued alerts (those of earlier checks too, if a watch stopped before sending
/// them): a line on standard output (and the bell), and `--exec`, as the watch's saved settings say.
struct SendAlerts: DurableJob {
    static let kind = "earthquakes.watch.send"
    typealias Input = DecideAlerts.Output

    struct Output: Codable, Sendable {
        var delivered: Int
        var failed: Int
        /// What went wrong with the commands that failed, one line each.
        var failures: [String]?
    }

    let store: EarthquakeStore
    let console: Console
    let environment: [String: String]
    let now: @Sendable () -> Date

    func run(_ input: Input, context: DurableJobContext) async throws -> Output {
        let store = store
        let name = input.name
        let spec = try await offThePool { () throws -> WatchSpec in
            guard let data = try store.watchSettings(name) else { throw EarthquakeWatch.missingSettings(name) }
            return try JSONDecoder().decode(WatchSpec.self, from: data)
        }
        if input.decision.started {
            let count = input.decision.matchingAtStart
            console.error(
                "Watch \"\(TerminalText.safe(name))\" started: \(EarthquakesCLI.counted(count, "stored event")) "
                    + "\(count == 1 ? "matches" : "match") and \(count == 1 ? "is" : "are") not alerted; events "
                    + "that come in from now on are.\n")
        }
        let pending = try await offThePool {
            try store.pendingAlerts(watch: name, maxAttempts: EarthquakeWatch.maxDeliveryAttempts)
        }
        await EarthquakesCLI.testPause("alerts-decided")
        var output = Output(delivered: 0, failed: 0, failures: [])
        for alert in pending {
            try Task.checkCancellation()
            guard let quake = alert.earthquake else {
                // Deleted since it was queued (the USGS withdrew it): nothing to say.
                try await offThePool { try store.recordAlert(watch: name, id: alert.id, deliveredAt: Date()) }
                continue
            }
            // Shown once: a retry is of the `--exec` command that failed, not of the alert (a second ALERT line
            // of one event would read as a second event to whoever reads the output).
            if alert.failedAttempts == 0 {
                let line = EarthquakeWatch.line(quake, spec: spec, now: now())
                console.print((spec.bell && console.isOutputTerminal ? "\u{7}" : "") + line)
            }
            var failure: String?
            if let command = spec.exec {
                failure = await AlertCommand.run(command, quake: quake, environment: environment)
            }
            // A command stopped by Ctrl-C did not fail: the alert is delivered at the watch's next start.
            // One that succeeded is recorded, Ctrl-C or not (it would be delivered again otherwise).
            if failure != nil, Task.isCancelled { throw CancellationError() }
            if let failure {
                output.failed += 1
                let tries = alert.failedAttempts + 1
                let next =
                    tries < EarthquakeWatch.maxDeliveryAttempts
                    ? "it is tried again at the next check (\(tries) of \(EarthquakeWatch.maxDeliveryAttempts) tries)"
                    : "given up after \(EarthquakeWatch.maxDeliveryAttempts) tries"
                let text = "--exec for \(TerminalText.safe(quake.id)): \(failure)"
                output.failures?.append(text)
                console.error("warning: \(text); \(next)\n")
                try await offThePool {
                    try store.recordAlert(watch: name, id: alert.id, deliveredAt: nil, error: failure)
                }
            } else {
                output.delivered += 1
                try await offThePool { try store.recordAlert(watch: name, id: alert.id, deliveredAt: Date()) }
            }
        }
        TestPause.say("checked")
        return output
    }
}

/// `--exec`: `/bin/sh -c COMMAND` in a process group of its own, the event as one line of JSON on its
/// standard input (from a file already unlinked: nothing is left behind, and a command that does not
/// read it cannot end the watch with SIGPIPE) and its id in `EARTHQUAKE_ID`; standard output and error
/// are the watch's.
///
/// The command has ended when the shell exits: what it started in the background goes on (the wait is
/// for the shell's pid, not for every process that inherited a descriptor). A command that runs past
/// ``EarthquakeWatch/execTimeout``, or a cancel (Ctrl-C), stops the whole group: SIGTERM, then SIGKILL
/// two seconds later.
enum AlertCommand {
    /// Nil when the command exited with status 0; otherwise what went wrong.
    static func run(_ command: String, quake: Earthquake, environment: [String: String]) async -> String? {
        let input: Int32
        do {
            input = try eventFile(quake)
        } catch {
            return "the event could not be written for the command: \(EarthquakesCLI.message(for: error))"
        }
        defer { close(input) }
        var environment = environment
        environment["EARTHQUAKE_ID"] = quake.id
        let pid: pid_t
        do {
            pid = try spawn(command, input: input, environment: environment)
        } catch {
            return "\(error)"
        }
        let timedOut = Protected(false)
        let stopper = DispatchWorkItem {
            timedOut.withLock { $0 = true }
            stop(pid)
        }
        DispatchQueue.global().asyncAfter(
            deadline: .now() + Double(EarthquakeWatch.execTimeout.components.seconds), execute: stopper)
        let status: Int32 = await withTaskCancellationHandler {
            (try? await offThePool { () -> Int32 in
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                return status
            }) ?? 0
        } onCancel: {
            stop(pid)
        }
        stopper.cancel()
        if timedOut.withLock({ $0 }) {
            return "the command did not end within \(EarthquakeWatch.execTimeout.components.seconds) s and was stopped"
        }
        let signal = status & 0x7F
        if signal != 0 { return "the command was ended by signal \(signal)" }
        let code = (status >> 8) & 0xFF
        return code == 0 ? nil : "the command exited with status \(code)"
    }

    /// SIGTERM to the command's process group, then SIGKILL two seconds later.
    private static func stop(_ pid: pid_t) {
        kill(-pid, SIGTERM)
        DispatchQueue.global().asyncAfter(deadline: .now() + 2) { kill(-pid, SIGKILL) }
    }

    /// A descriptor of an unlinked temporary file holding the event's JSON line, at its start.
    private static func eventFile(_ quake: Earthquake) throws -> Int32 {
        let json = try JSONText.encode(QuakeJSON(quake, distanceKm: nil), oneLine: true) + "\n"
        var template = Array((FileManager.default.temporaryDirectory.path + "/earthquakes-alert-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw CLIError("cannot create a temporary file: \(String(cString: strerror(errno)))")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        let bytes = Array(json.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else {
                close(descriptor)
                throw CLIError("cannot write a temporary file: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
        lseek(descriptor, 0, SEEK_SET)
        return descriptor
    }

    /// Marks every descriptor of this process above standard error close-on-exec (this process never runs
    /// another program in itself, so it loses nothing).
    private static func closeOnExec() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
        for name in names {
            guard let descriptor = Int32(name), descriptor > 2 else { continue }
            let flags = fcntl(descriptor, F_GETFD)
            if flags >= 0, flags & FD_CLOEXEC == 0 { _ = fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) }
        }
    }

    /// Starts `/bin/sh -c command` in a new process group, with `input` as its standard input.
    private static func spawn(_ command: String, input: Int32, environment: [String: String]) throws -> pid_t {
        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t?
        var attributes: posix_spawnattr_t?
        #else
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input, 0)
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Only standard input, output and error reach the command: not the databases' descriptors, and
        // not what a parent's `Process` watches this process's end by (a command left running in the
        // background would hold it open, and the parent would wait for it).
        // The command starts with no signal blocked and the usual ones at their default actions: the
        // thread that spawns it (Dispatch's) blocks most signals, and a mask is inherited through exec, so
        // SIGTERM would not stop it.
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        let flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        #if canImport(Darwin)
        posix_spawn_file_actions_addinherit_np(&actions, STDOUT_FILENO)
        posix_spawn_file_actions_addinherit_np(&actions, STDERR_FILENO)
        posix_spawnattr_setflags(&attributes, Int16(flags | POSIX_SPAWN_CLOEXEC_DEFAULT))
        #else
        closeOnExec()
        posix_spawnattr_setflags(&attributes, Int16(flags))
        #endif
        posix_spawnattr_setpgroup(&attributes, 0)
        let words: [String] = ["/bin/sh", "-c", command]
        let argv = words.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let variables: [String] = environment.map { "\($0.key)=\($0.value)" }
        let envp = variables.map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp)
        guard code == 0 else { throw CLIError("could not start /bin/sh: \(String(cString: strerror(code)))") }
        return pid
    }
}

extension EarthquakesCLI {
    /// `watch`: saves `spec` as the settings of the watch `spec.name`, refreshes `feeds` now and then every
    /// `interval` (a durable schedule in the database's job store), and alerts on the events that come in
    /// matching it — a line on standard output (with the bell on a terminal), and `spec.exec` run with each
    /// event as JSON. Runs until Ctrl-C (which throws ``CLIError`` with status 130 after saying so); with
    /// `once`, one check, then returns, or throws when a feed, the decision or a command failed. See
    /// ``EarthquakeWatch``.
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
        // A mistyped type would alert on nothing, silently and for ever (as `list` refuses it).
        try Self.checkTypes(spec.filter.types, excluded: spec.filter.excludedTypes, in: store)
        // One watch per database at a time: a second one would deliver the alerts in two places.
        let lock = try WatchLock(database: path, name: spec.name)
        defer { lock.release() }
        let (jobs, note) = try FeedRefresh.openJobs(database: path)
        defer { closeAtEnd(jobs.close) }
        if let note { console.error(note) }
        try Self.mappingReadOnly(path) { () throws(StoreError) in
            try store.saveWatchSettings(try! JSONEncoder().encode(spec), watch: spec.name)
        }

        // Only this watch runs now (the lock says so): the others' schedules are paused and their
        // unfinished checks cancelled (their queued alerts wait for their own watch). Jobs of this watch
        // held by a watch that was killed are taken back now rather than when their leases end.
        // Those a newer version wrote, which this one cannot read, are paused too.
        let prefix = EarthquakeWatch.scheduleName("")
        let listing = try await jobs.scheduleListing()
        let active =
            listing.schedules.filter { !$0.paused }.map(\.schedule.name)
            + listing.unreadable.filter { !$0.paused }.map(\.name)
        for name in active where name.hasPrefix(prefix) && name != EarthquakeWatch.scheduleName(spec.name) {
            try await jobs.pauseSchedule(named: name)
        }
        for other in try store.watchNames() {
            for run in try await jobs.unfinishedRuns(named: EarthquakeWatch.runName(other)) {
                // (Ended first: a cancelled job still holds its categories until its lease ends.)
                let owners = Set(try await jobs.snapshot(of: run.id).jobs.compactMap(\.leaseOwner))
                for owner in owners where FeedRefresh.isGone(owner) { try await jobs.endLeases(ofWorker: owner) }
                if other != spec.name {
                    try await jobs.cancel(
                        run: run.id, reason: "its watch is not running; `earthquakes watch --name \(other)` starts it")
                }
            }
        }
        let (graph, send) = EarthquakeWatch.graph(name: spec.name, feeds: feeds, database: path)
        let scheduleName = EarthquakeWatch.scheduleName(spec.name)
        if !once {
            // One check at a time: a tick while the last check is unfinished (a slow feed) is skipped, instead
            // of starting checks that pile up behind it until they fill the worker's slots.
            try await jobs.schedule(
                name: scheduleName, every: interval, graph: graph, catchUp: .skip, overlap: .skip)
            try await jobs.resumeSchedule(named: scheduleName)
        }
        // The first check runs now, not at the first tick.
        let first = try await jobs.submit(
            graph, uniqueKey: "watch \(spec.name) \(FeedRefresh.workerID()) \(now().timeIntervalSince1970)")

        let console = console
        let report: @Sendable (String, any Error) -> Void = { feed, error in
            console.error(
                "warning: \(Self.feedName(feed)): \(TerminalText.safe(Self.sentence(Self.message(for: error))))\n")
        }
        // A feed may take the interval or two minutes, whichever is longer: a server that sends a byte
        // now and then (never idle for `timeout`) cannot hold a check, and the others' alerts, for ever.
        var fetch = FetchFeed(
            session: session, timeout: timeout, totalTimeout: max(interval, EarthquakeWatch.longestFetch), display: nil)
        fetch.onFailure = report
        var parse = ParseFeed(strict: false)
        parse.onFailure = report
        var importer = ImportFeed(store: store, strict: false, now: now, imports: RefreshImports())
        importer.onFailure = report
        let worker = try DurableWorker(
            store: jobs,
            jobs: [
                WatchFetch(job: fetch), WatchParse(job: parse), WatchImport(job: importer),
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
            let what = feeds.map(Self.feedName).joined(separator: ", ") + " every \(Self.spoken(interval))"
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
            // Ctrl-C is how a watch ends: its schedule is paused, so no worker of this store checks for it
            // until the next `watch`.
            if !once { try? await jobs.pauseSchedule(named: scheduleName) }
            throw CLIError.stopped(
                "Stopped watching. Alerts already sent are not sent again; `earthquakes watch` goes on from here.")
        }
        if once { try await checkOnce(first, send: send, jobs: jobs) }
    }

    /// After `watch --once`: throws (status 1, for cron) when a job of the check failed or a command did.
    private func checkOnce(
        _ run: DurableRun, send: JobGraph.Handle<SendAlerts.Output>, jobs: SQLiteJobStore
    ) async throws {
        var problems: [String] = []
        let snapshot = try await jobs.snapshot(of: run.id)
        let states = Dictionary(uniqueKeysWithValues: snapshot.jobs.map { ($0.id, $0.state) })
        // A job cancelled because a dependency failed or was cancelled repeats that one's problem
        // ("parse …: dependency 'fetch …' failed"): only the first of such a chain is listed.
        func cancelledByDependency(_ job: JobRecord) -> Bool {
            job.state == .cancelled
                && job.dependencies.contains { !$0.runRegardless && [.failed, .cancelled].contains(states[$0.job]) }
        }
        for job in snapshot.jobs
        where job.state == .failed || (job.state == .cancelled && !cancelledByDependency(job)) {
            let why = (job.lastError ?? "it was cancelled").split(whereSeparator: \.isNewline).joined(separator: " ")
            problems.append("\(job.name): \(TerminalText.safe(why))")
        }
        if let output = try await jobs.output(of: send, in: run) { problems += output.failures ?? [] }
        guard problems.isEmpty else {
            throw CLIError("the check did not fully succeed (below); what did is kept", details: problems)
        }
    }

    /// `5 min`, `30 s`, `1 h`.
    static func spoken(_ interval: Duration) -> String {
        let seconds = interval.seconds
        if seconds >= 86_400, seconds.truncatingRemainder(dividingBy: 86_400) == 0 {
            return "\(Int(seconds / 86_400)) d"
        }
        if seconds >= 3600, seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600)) h" }
        if seconds >= 60, seconds.truncatingRemainder(dividingBy: 60) == 0 { return "\(Int(seconds / 60)) min" }
        return "\(seconds.formatted(.number.precision(.fractionLength(0...1)))) s"
    }
}

/// The lock that keeps one `watch` per database: `flock(2)` on a file in the database's download folder
/// (of the database's real path: two spellings or a symbolic link are one database), released when the
/// process ends, however it ends. The file holds the name of the watch that holds it, for `status`.
final class WatchLock {
    private var descriptor: Int32

    init(database: String, name: String) throws(CLIError) {
        let path = Self.path(database: database)
        try? FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw CLIError("cannot create the watch's lock file \(path): \(String(cString: strerror(errno)))")
        }
        // (A `status` probing the lock holds it for a moment: a few tries tell it from a running watch.)
        var locked = flock(descriptor, LOCK_EX | LOCK_NB) == 0
        for _ in 0..<20 where !locked {
            usleep(5_000)
            locked = flock(descriptor, LOCK_EX | LOCK_NB) == 0
        }
        guard locked else {
            close(descriptor)
            let holder = Self.holder(database: database).map { " (the watch \"\(TerminalText.safe($0))\")" } ?? ""
            throw CLIError(
                "another `earthquakes watch`\(holder) is running on \(database); stop it first (one watch per "
                    + "database delivers each alert in one place)")
        }
        let bytes = Array(name.utf8)
        _ = ftruncate(descriptor, 0)
        _ = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        self.descriptor = descriptor
    }

    /// The name of the watch that holds the lock of the database at `database` now, or nil.
    static func holder(database: String) -> String? {
        let descriptor = open(path(database: database), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_SH | LOCK_NB) != 0, errno == EWOULDBLOCK else { return nil }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        return String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
    }

    /// Where the lock of the database at `database` is: beside the file its path leads to.
    static func path(database: String) -> String {
        let real = URL(fileURLWithPath: database).resolvingSymlinksInPath().standardizedFileURL.path
        return FeedRefresh.downloadFolder(forDatabase: real) + "/watch.lock"
    }

    /// Releases the lock (also when the object goes away).
    func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
