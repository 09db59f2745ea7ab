import Baton
import BatonDurable
import BatonTesting
import Foundation
import GRDB
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The crash test: a seeded random graph (5,000 jobs by default, `BATON_CRASH_JOBS`), three worker
/// processes (`durable-crash-worker`) killed with SIGKILL at random and restarted, then a checker that
/// reads the store and the side log the attempts wrote. Not run under ThreadSanitizer (the processes
/// would be slowed tenfold; the in-process parts are covered by the other suites there).
@Suite("Crash test: worker processes killed with SIGKILL", .serialized)
struct CrashTests {
    static let environment = ProcessInfo.processInfo.environment
    static let jobCount = Int(environment["BATON_CRASH_JOBS"] ?? "") ?? 5000
    static let seed = UInt64(environment["BATON_CRASH_SEED"] ?? "") ?? 20_261_123
    static let categories: [DurableCategory] = [.named("a", limit: 1), .named("b", limit: 2), .named("c", limit: 3)]

    @Test(
        "every job succeeds once, after its dependencies, categories within limits, nothing left claimed",
        .enabled(if: environment["BATON_SANITIZER"] == nil, "the crash test does not run under sanitizers"))
    func crashAndRestart() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("crash.sqlite")
        let store = try SQLiteJobStore(path: path, busyTimeout: 30)
        var configuration = Configuration()
        configuration.busyMode = .timeout(30)
        let log = try DatabaseQueue(path: path, configuration: configuration)
        try await log.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE crash_log (id INTEGER PRIMARY KEY, job INTEGER, attempt INTEGER, worker TEXT NOT NULL,
                        event TEXT NOT NULL, at REAL NOT NULL)
                    """)
            // The application's effects: each odd job counts itself in its completion's transaction.
            try db.execute(sql: "CREATE TABLE crash_effects (job INTEGER PRIMARY KEY, count INTEGER NOT NULL)")
        }
        var random = SeededRandom(seed: Self.seed)
        let run = try await store.submit(Self.graph(&random), uniqueKey: "crash")

        let pool = try WorkerPool(path: path, log: log)
        defer { pool.killAll() }
        for slot in 0..<3 { try pool.start(slot: slot) }
        try await withDeadline(.seconds(240), "the crash run (\(Self.jobCount) jobs)") {
            try await pool.chaos(untilFinished: run.run, seed: Self.seed &+ 1)
        }
        await pool.stop()
        try await CrashChecker(store: store, log: log, run: run.run, kills: pool.kills).check()
        #expect(pool.kills.count >= 2, "the workers were killed \(pool.kills.count) times; the test needs crashes")
    }

    @Test(
        "a paged listing grows while its workers are killed: every page listed and imported exactly once",
        .enabled(if: environment["BATON_SANITIZER"] == nil, "the crash test does not run under sanitizers"))
    func growingRunSurvivesKills() async throws {
        let pages = Int(Self.environment["BATON_CRASH_PAGES"] ?? "") ?? 150
        let directory = try TemporaryDirectory()
        let (path, store, log) = try await Self.crashFile(
            directory, "pages.sqlite",
            tables: [
                "CREATE TABLE page_imports (page INTEGER PRIMARY KEY, count INTEGER NOT NULL)",
                "CREATE TABLE pages_done (imported INTEGER NOT NULL)",
            ])
        let first = try DurableCoding.encode(["page": 1, "pages": pages])
        let run = try await store.submit(
            GraphSpec(
                name: "pages",
                jobs: [
                    JobSpec(name: "page 1", kind: "pages.list", input: first, retry: .immediate(maxAttempts: 1000)),
                    JobSpec(
                        name: "done", kind: "pages.done", input: Data("0".utf8),
                        dependencies: [JobSpec.Dependency(index: 0, includingAdded: true)],
                        retry: .immediate(maxAttempts: 1000)),
                ]), uniqueKey: nil)
        let pool = try WorkerPool(path: path, log: log)
        defer { pool.killAll() }
        for slot in 0..<3 { try pool.start(slot: slot) }
        try await withDeadline(.seconds(240), "the paged listing (\(pages) pages)") {
            try await pool.chaos(untilFinished: run.run, seed: Self.seed &+ 2)
        }
        await pool.stop()
        let snapshot = try await store.snapshot(of: run.run)
        #expect(snapshot.jobs.count == 2 * pages + 1, "jobs: \(snapshot.jobs.count)")
        #expect(snapshot.jobs.allSatisfy { $0.state == .succeeded }, "\(snapshot.explain())")
        let names = snapshot.jobs.map(\.name)
        #expect(Set(names).count == names.count, "every page added once")
        let (imports, done) = try await log.read { db in
            (
                try Row.fetchAll(db, sql: "SELECT page, count FROM page_imports ORDER BY page").map {
                    ($0[0] as Int, $0[1] as Int)
                },
                try Int.fetchAll(db, sql: "SELECT imported FROM pages_done")
            )
        }
        #expect(imports.map(\.0) == Array(1...pages), "every page imported")
        #expect(imports.allSatisfy { $0.1 == 1 }, "no page imported twice: \(imports.filter { $0.1 != 1 })")
        #expect(done == [pages], "done ran once, after every import")
        #expect(pool.kills.count >= 2, "the workers were killed \(pool.kills.count) times; the test needs crashes")
        print("Paged listing: \(pages) pages, \(pool.kills.count) kills")
    }

    /// A schedule ticking every second, made `ticks` seconds ago (its missed ticks fire with `.all`) and
    /// then fired by 3 worker processes that are killed at random while it goes on ticking: every tick
    /// makes exactly one run (none lost to a kill, none fired twice), and each run's job counts itself
    /// once in the application's table, in its completion's transaction.
    @Test(
        "a schedule fired by workers that are killed makes exactly one run per tick, none missing",
        .enabled(if: environment["BATON_SANITIZER"] == nil, "the crash test does not run under sanitizers"))
    func scheduleSurvivesKills() async throws {
        let ticks = Int(Self.environment["BATON_CRASH_TICKS"] ?? "") ?? 100
        let directory = try TemporaryDirectory()
        let (path, store, log) = try await Self.crashFile(
            directory, "beats.sqlite", tables: ["CREATE TABLE beats (run INTEGER PRIMARY KEY, count INTEGER NOT NULL)"])
        let beat = GraphSpec(
            name: "beat",
            jobs: [
                JobSpec(
                    name: "beat", kind: "schedule.beat", input: Data("0".utf8), retry: .immediate(maxAttempts: 1000))
            ])
        // Made by a store whose clock is `ticks` seconds behind: its first tick is that long ago.
        let behind = try SQLiteJobStore(path: path, clock: .system(offsetBy: .seconds(-ticks)), busyTimeout: 30)
        let made = try await behind.schedule(
            Schedule(name: "beat", timing: .every(.seconds(1)), graph: beat, catchUp: .all))
        try behind.close()
        let first = try #require(made.nextTick, "the new schedule has no first tick")
        let pool = try WorkerPool(path: path, log: log)
        defer { pool.killAll() }
        for slot in 0..<3 { try pool.start(slot: slot) }
        // The missed ticks, then at least 4 live ones (4 s of kills every 0.1–0.4 s).
        try await withDeadline(.seconds(240), "\(ticks + 4) ticks of a one-second schedule") {
            try await pool.chaos(seed: Self.seed &+ 3) { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM baton_runs WHERE name = 'beat'") ?? 0 >= ticks + 4
            }
        }
        try await store.pauseSchedule(named: "beat")
        await pool.stop()
        // The runs fired before the pause, run to the end here (`run(until:)` fires no schedule).
        let runs = try await store.runs(RunFilter(name: "beat", limit: 1000)).runs
        for run in runs where run.state == .running {
            let drain = try DurableWorker(
                store: store, jobs: [DrainBeat()],
                configuration: .init(id: "drain", maxConcurrentJobs: 8, pollInterval: .milliseconds(100)))
            let fired = DurableRun(SubmittedRun(run: run.id, jobs: [], existing: true))
            try await withDeadline(.seconds(60), "the fired run \(run.id)") { try await drain.run(until: fired) }
        }
        let finished = try await store.runs(RunFilter(name: "beat", limit: 1000)).runs
        #expect(finished.count >= ticks + 4)
        #expect(finished.allSatisfy { $0.state == .succeeded }, "\(finished.filter { $0.state != .succeeded })")
        // One run per tick, with no tick missing between the first and the last.
        let style = Date.ISO8601FormatStyle().year().month().day().time(includingFractionalSeconds: true)
        let times = finished.compactMap { run in
            run.uniqueKey.flatMap { try? style.parse(String($0.dropFirst("schedule/beat/".count))) }
        }.sorted()
        #expect(times.count == finished.count, "every run is a tick's")
        let gaps = zip(times, times.dropFirst()).filter { abs($1.timeIntervalSince($0) - 1) > 0.001 }
        #expect(gaps.isEmpty, "ticks missing or repeated: \(gaps.prefix(5))")
        // None missing at either end: the first is the schedule's first tick (as stored when it was made:
        // a bound taken from the clock before the store opened failed when opening took over a second
        // beside a busy machine), the last the last it fired.
        #expect(
            times.first.map { abs($0.timeIntervalSince(first)) < 0.001 } == true,
            "first tick \(String(describing: times.first)), the schedule's first \(first)")
        #expect(times.last == (try await store.schedules().first?.lastTick), "the last tick fired has its run")
        let counts = try await log.read { db in try Int.fetchAll(db, sql: "SELECT count FROM beats") }
        #expect(
            counts.count == finished.count && counts.allSatisfy { $0 == 1 },
            "each run counted once: \(counts.filter { $0 != 1 })")
        #expect(pool.kills.count >= 2, "the workers were killed \(pool.kills.count) times; the test needs crashes")
        print("Schedule: \(finished.count) ticks, \(pool.kills.count) kills")
    }

    /// A store file for a crash test in `directory`: the store, a connection of the test's own (for the
    /// application's `tables` and the workers' side log `crash_log`, which it creates), and the path.
    static func crashFile(
        _ directory: TemporaryDirectory, _ name: String, tables: [String]
    ) async throws -> (String, SQLiteJobStore, DatabaseQueue) {
        let path = directory.path(name)
        let store = try SQLiteJobStore(path: path, busyTimeout: 30)
        var configuration = Configuration()
        configuration.busyMode = .timeout(30)
        let log = try DatabaseQueue(path: path, configuration: configuration)
        try await log.write { db in
            for table in tables { try db.execute(sql: table) }
            try db.execute(
                sql:
                    "CREATE TABLE crash_log (id INTEGER PRIMARY KEY, job INTEGER, attempt INTEGER, worker TEXT, event TEXT, at REAL)"
            )
        }
        return (path, store, log)
    }

    /// Random dependencies on up to 3 of the previous 300 jobs; a fifth of the jobs in a counted category.
    static func graph(_ random: inout SeededRandom) -> GraphSpec {
        var jobs: [JobSpec] = []
        for index in 0..<jobCount {
            var dependencies: [JobSpec.Dependency] = []
            if index > 0 {
                for _ in 0..<Int.random(in: 0...3, using: &random) {
                    let dependency = Int.random(in: max(0, index - 300)..<index, using: &random)
                    if !dependencies.contains(where: { $0.index == dependency }) {
                        dependencies.append(.init(index: dependency, runRegardless: Bool.random(using: &random)))
                    }
                }
            }
            let categories =
                Int.random(in: 0..<5, using: &random) == 0 ? [categories.randomElement(using: &random)!] : []
            jobs.append(
                JobSpec(
                    name: "n\(index)", kind: "crash.node",
                    input: Data("\(Int.random(in: 0...20_000, using: &random))".utf8),
                    dependencies: dependencies, retry: .immediate(maxAttempts: 1000), categories: categories))
        }
        return GraphSpec(name: "crash", jobs: jobs)
    }
}

/// The worker processes, by slot, and the chaos that kills them.
///
/// The chaos loop runs on a thread of its own, not on the Swift concurrency pool: in a full `swift test`
/// the pool is shared with hundreds of other tests, and a starved loop would let the workers finish the
/// graph before the first kill. Its state is behind one lock, so that the test's `stop()` or
/// `killAll()` (also run when a deadline fires while the loop is still going) and the loop never race.
final class WorkerPool: @unchecked Sendable {
    // @unchecked Sendable: the mutable state is guarded by `lock`; nothing blocking runs while it is held.
    let path: String
    let log: DatabaseQueue
    let executable: URL
    private let lock = NSLock()
    private var processes: [Int: Process] = [:]
    private var names: [Int: String] = [:]
    private var generation = 0
    private var stopped = false
    private var killed: [(worker: String, at: Double)] = []

    var kills: [(worker: String, at: Double)] { lock.withLock { killed } }

    init(path: String, log: DatabaseQueue) throws {
        self.path = path
        self.log = log
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [directory, Bundle.main.bundleURL.deletingLastPathComponent(), Bundle.main.bundleURL]
            .map { $0.appendingPathComponent("durable-crash-worker") }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw MissingWorker(
                description:
                    "durable-crash-worker is not built next to the tests (looked in \(candidates.map(\.path))); run `swift build` first."
            )
        }
        executable = found
    }

    /// Starts a worker process in `slot`, unless the pool was stopped.
    func start(slot: Int) throws {
        let process = Process()
        process.standardOutput = FileHandle.nullDevice
        let name: String? = lock.withLock {
            guard !stopped else { return nil }
            generation += 1
            return "w\(slot)-\(generation)"
        }
        guard let name else { return }
        let arguments = ["--db", path, "--id", name, "--lease-ms", "2000", "--renew-ms", "400"]
        // At a lower priority (nice(1) execs the worker: the pid is the worker's): three workers started
        // and killed several times a second take most of two cores, and the rest of the suite, which runs
        // beside this test, shares them. Their leases and every check hold at any speed.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/nice") {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/nice")
            process.arguments = ["-n", "10", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        try process.run()
        let (late, replaced): (Bool, Process?) = lock.withLock {
            guard !stopped else { return (true, nil) }
            names[slot] = name
            return (false, processes.updateValue(process, forKey: slot))
        }
        _ = replaced  // the killed process it replaces is released here, not under the lock
        if late {  // stop() ran while this one started
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Kills a random worker every 0.1–0.4 s and starts a new one in its slot, until the run is finished
    /// or the calling task is cancelled. The pauses are the chaos's cadence, not synchronisation: on an idle
    /// machine the workers can finish the graph in about a second, before a slower cadence kills twice.
    func chaos(untilFinished run: DurableRunID, seed: UInt64) async throws {
        try await chaos(seed: seed) { db in
            try Bool.fetchOne(
                db, sql: "SELECT finished IS NOT NULL FROM baton_runs WHERE id = ?", arguments: [run.rawValue]) ?? false
        }
    }

    /// Kills a random worker every 0.1–0.4 s and starts a new one in its slot, until `done` (read in the
    /// store's file) is true or the calling task is cancelled.
    func chaos(seed: UInt64, until done: @escaping @Sendable (Database) throws -> Bool) async throws {
        let cancelled = Protected(false)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let thread = Thread {
                    do {
                        try self.chaosLoop(seed: seed, cancelled: cancelled, done: done)
                        continuation.resume()
                    } catch {
                        continuation.resume(throwing: error)
                    }
                }
                thread.name = "crash-test chaos"
                thread.start()
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
    }

    private func chaosLoop(
        seed: UInt64, cancelled: Protected<Bool>, done: @escaping @Sendable (Database) throws -> Bool
    ) throws {
        var random = SeededRandom(seed: seed)
        func finished() throws -> Bool { try log.read(done) }
        while try !finished() && !cancelled.current {
            Thread.sleep(forTimeInterval: Double(Int.random(in: 100...400, using: &random)) / 1000)
            if try finished() || cancelled.current { break }
            try killAndRestart(slot: Int.random(in: 0..<3, using: &random))
        }
    }

    private func killAndRestart(slot: Int) throws {
        let found: (Process, String)? = lock.withLock {
            guard !stopped, let process = processes[slot], let name = names[slot] else { return nil }
            return (process, name)
        }
        guard let (process, name) = found else { return }
        // The time of the kill is taken before the signal: once the process is gone (reaped inside
        // `waitUntilExit()`, which returns some time later on a loaded machine), the other workers take its
        // jobs back at once and start them. Taken after the wait, the kill came after those starts, and the
        // checker counted the dead attempts as holding their categories beside them ("c: 4 > 3" in one CI
        // run). The process runs no code of its own after the signal, so nothing it did comes later.
        let at = Date().timeIntervalSince1970
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        lock.withLock { killed.append((name, at)) }
        try log.write { db in
            try db.execute(
                sql: "INSERT INTO crash_log (job, attempt, worker, event, at) VALUES (NULL, NULL, ?, 'killed', ?)",
                arguments: [name, at])
        }
        try start(slot: slot)
    }

    /// Kills every worker and stops the pool: no worker starts after this. Sends the signals only (for a
    /// `defer`); ``stop()`` also waits until the processes have exited.
    func killAll() {
        for process in stopping() where process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// Kills every worker, stops the pool and waits, on a thread of its own, until they have exited.
    func stop() async {
        let all = stopping()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                for process in all where process.isRunning {
                    kill(process.processIdentifier, SIGKILL)
                    process.waitUntilExit()
                }
                continuation.resume()
            }
            thread.start()
        }
    }

    /// Marks the pool stopped and hands its processes over (the table itself, so that nothing is
    /// released under the lock).
    private func stopping() -> [Process] {
        let taken: [Int: Process] = lock.withLock {
            stopped = true
            let taken = processes
            processes = [:]
            return taken
        }
        return Array(taken.values)
    }
}

struct MissingWorker: Error, CustomStringConvertible {
    let description: String
}

/// `schedule.beat` as the crash worker runs it (Tests/DurableCrashWorker), for the runs left when the
/// workers are stopped.
struct DrainBeat: DurableJob {
    static let kind = "schedule.beat"
    func run(_ input: Int, context: DurableJobContext) async throws -> Int {
        let run = context.run.rawValue
        return try await context.complete(returning: input) { db in
            try db.execute(
                sql: "INSERT INTO beats (run, count) VALUES (?, 1) ON CONFLICT (run) DO UPDATE SET count = count + 1",
                arguments: [run])
        }
    }
}
