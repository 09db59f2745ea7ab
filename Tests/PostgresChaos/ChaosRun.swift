import Baton
import BatonDurable
import BatonPostgres
import BatonTesting
import Foundation
import Logging
import PostgresNIO

/// The orchestrator: submits a seeded random graph, runs worker processes, kills and restarts them
/// at random (SIGKILL), restarts PostgreSQL once, waits for every job to finish, then checks.
struct ChaosRun {
    var url: String
    var jobs: Int
    var seed: UInt64
    var workers: Int
    var deadline: Duration
    var restartCommand: [String]?
    /// Whether `restartCommand` crashes the server (`-m immediate`) rather than stopping it cleanly.
    var crash = false
    var lease: Duration = .seconds(2)

    func run() async throws -> Bool {
        var logger = Logger(label: "chaos")
        logger.logLevel = .error
        let schema = "chaos_\(seed)_\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
        let store = try await openStore(url: url, schema: schema, logger: logger)
        let side = SideLog(store: store)
        try await side.create()
        // The workers' journals of the work they did (``WorkJournal``).
        let journal = FileManager.default.temporaryDirectory.appendingPathComponent("\(schema)-journal").path
        try FileManager.default.createDirectory(atPath: journal, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: journal) }

        // The graph: runs of up to 1,000 jobs; each job depends on up to 3 of the 50 before it, 15 %
        // take a counted category (limits 1, 2, 3), 6 % fail once or twice first (retried after 20 ms).
        var random = SeededRandom(seed: seed)
        let categories = [DurableCategory.named("one", limit: 1), .named("two", limit: 2), .named("three", limit: 3)]
        var remaining = jobs
        var graphs: [GraphSpec] = []
        let encoder = JSONEncoder()
        let clock = ContinuousClock()
        while remaining > 0 {
            let size = min(1000, remaining)
            var graph = GraphSpec(name: "chaos-\(graphs.count)")
            for index in 0..<size {
                var dependencies: [JobSpec.Dependency] = []
                if index > 0 {
                    for _ in 0..<Int.random(in: 0...3, using: &random) {
                        let dependency = Int.random(in: max(0, index - 50)..<index, using: &random)
                        if !dependencies.contains(where: { $0.index == dependency }) {
                            dependencies.append(.init(index: dependency))
                        }
                    }
                }
                let roll = Double.random(in: 0..<1, using: &random)
                let fail = roll < 0.01 ? 2 : roll < 0.06 ? 1 : 0
                let input = ChaosWorker.Input(
                    n: jobs - remaining + index, micros: Int.random(in: 0...3000, using: &random), failAttempts: fail)
                graph.jobs.append(
                    JobSpec(
                        name: "j\(index)", kind: "chaos.work", input: try encoder.encode(input),
                        dependencies: dependencies, priority: Int.random(in: 0...3, using: &random),
                        retry: .constant(maxAttempts: 20, delay: .milliseconds(20)),
                        categories: Double.random(in: 0..<1, using: &random) < 0.15
                            ? [categories[Int.random(in: 0..<3, using: &random)]] : []))
            }
            graphs.append(graph)
            remaining -= size
        }
        // The last runs are held back and submitted while PostgreSQL restarts (or crashes): a submission
        // cut off there is retried by the store into the same run, and one lost in a crash with its
        // unflushed insert is stored again — never twice (the checker counts the jobs).
        let late = restartCommand == nil ? 0 : min(2, graphs.count / 3)  // most of the jobs go first
        let submitStart = clock.now
        for (index, graph) in graphs.enumerated().dropLast(late) {
            _ = try await store.submit(graph, uniqueKey: "chaos-\(seed)-\(index)")
        }
        say(
            "chaos: submitted \(graphs.dropLast(late).reduce(0) { $0 + $1.jobs.count }) jobs in \(graphs.count - late) runs in \(clock.now - submitStart)"
                + (late > 0 ? "; \(late) more runs to submit while PostgreSQL restarts" : ""))
        // A schedule ticking every second, fired by the workers while they are killed and the server
        // restarts; each tick's run is one job of the workers' kind. Paused once the graph is done.
        let beat = GraphSpec(
            name: ChaosChecker.beatSchedule,
            jobs: [
                JobSpec(
                    name: "beat", kind: "chaos.work",
                    input: try encoder.encode(ChaosWorker.Input(n: -1, micros: 100, failAttempts: 0)),
                    retry: .constant(maxAttempts: 20, delay: .milliseconds(20)))
            ])
        _ = try await store.schedule(
            Schedule(name: ChaosChecker.beatSchedule, timing: .every(.seconds(1)), graph: beat, catchUp: .all))
        var beatPaused = false
        var lateSubmissions: Task<LateSubmissions, any Error>?
        // Their store, opened now (not while the server goes down), logs the calls it retries.
        let retries = Protected(0)
        let lateFailure = Protected<String?>(nil)
        var counting = Logger(label: "chaos.submit") { _ in RetryCountingLogHandler(count: retries) }
        counting.logLevel = .notice
        let lateStore = late > 0 ? try await openStore(url: url, schema: schema, logger: counting) : nil
        defer { lateStore?.close() }

        // Workers, kills and restarts.
        var processes = try (0..<workers).map { try spawn(worker: $0, schema: schema, journal: journal) }
        var kills = 0
        var workerRestarts = 0
        var serverRestarts = 0
        let start = clock.now
        var nextKill = clock.now + .milliseconds(Int64.random(in: 300...1500, using: &random))
        var finished = 0
        var nextReport = clock.now + .seconds(5)
        while true {
            try await Task.sleep(for: .milliseconds(100))
            // Every job of the harness's runs finished, and every job at all (the workers' side runs,
            // submitted before the reports of the jobs they belong to).
            let (done, unfinished) = try await side.query(
                """
                SELECT count(*) FILTER (WHERE j.state IN ('succeeded', 'failed', 'cancelled')
                        AND r.unique_key LIKE 'chaos-%')::int,
                    count(*) FILTER (WHERE j.state NOT IN ('succeeded', 'failed', 'cancelled'))::int
                FROM jobs j JOIN runs r ON r.id = j.run
                """
            )[0].decode((Int, Int).self)
            finished = done
            if finished >= jobs && !beatPaused {
                // No tick after this commits (a fire under way commits first); its runs finish below.
                try await store.pauseSchedule(named: ChaosChecker.beatSchedule)
                beatPaused = true
                continue
            }
            if finished >= jobs && unfinished == 0 { break }
            if let failure = lateFailure.withLock({ $0 }) {
                say("chaos: FAILED: \(failure)")
                for process in processes { process.terminate() }
                return false
            }
            if clock.now >= nextReport {
                say("chaos: \(finished) of \(jobs) jobs finished, \(kills) kills so far")
                nextReport = clock.now + .seconds(5)
            }
            if clock.now - start > deadline {
                say("chaos: deadline of \(deadline) passed with \(finished) of \(jobs) jobs finished")
                for row in try await side.query(
                    """
                    SELECT state, count(*)::int, count(*) FILTER (WHERE lease_expires < \(Date().timeIntervalSince1970))::int
                    FROM jobs WHERE state NOT IN ('succeeded', 'failed', 'cancelled') GROUP BY state ORDER BY state
                    """)
                {
                    let (state, count, expired) = try row.decode((String, Int, Int).self)
                    say("chaos: unfinished: \(count) \(state) (\(expired) with an expired lease)")
                }
                break
            }
            if serverRestarts == 0, finished >= jobs * 2 / 5, let restartCommand {
                say(
                    "chaos: \(crash ? "crashing (-m immediate) and restarting" : "restarting") PostgreSQL at \(finished) of \(jobs) jobs"
                )
                if let lateStore {
                    lateSubmissions = submitLate(
                        Array(graphs.enumerated().suffix(late)), seed: seed, store: lateStore, retries: retries,
                        failure: lateFailure)
                }
                // system(3), not Process: Foundation's Process did not always see this child exit.
                let began = Date().timeIntervalSince1970
                let status = system(restartCommand.joined(separator: " "))
                guard status == 0 else {
                    say("chaos: FAILED to restart PostgreSQL (\(restartCommand.joined(separator: " ")): \(status))")
                    return false
                }
                serverRestarts += 1
                try await side.serverRestarted(began: began, ended: Date().timeIntervalSince1970)
            }
            if clock.now >= nextKill {
                let victim = Int.random(in: 0..<workers, using: &random)
                let pid = processes[victim].processIdentifier
                kill(pid, SIGKILL)
                let at = Date().timeIntervalSince1970
                processes[victim].waitUntilExit()
                try await side.killed(pid: pid, at: at)
                kills += 1
                try await Task.sleep(for: .milliseconds(Int64.random(in: 0...300, using: &random)))
                processes[victim] = try spawn(worker: victim, schema: schema, journal: journal)
                workerRestarts += 1
                nextKill = clock.now + .milliseconds(Int64.random(in: 300...1500, using: &random))
            }
        }
        let elapsed = clock.now - start
        for process in processes {
            process.terminate()
            process.waitUntilExit()
        }
        defer { store.close() }
        if let lateSubmissions {
            let result = try await lateSubmissions.value
            let restart = try await side.query("SELECT began, ended FROM chaos_server_restarts").map {
                try $0.decode((Double, Double).self)
            }.first
            say(
                "chaos: \(result.runs) runs submitted while PostgreSQL restarted: "
                    + result.calls.map { call in
                        String(format: "%.3f–%.3f s", call.began - (restart?.0 ?? 0), call.ended - (restart?.0 ?? 0))
                    }.joined(separator: ", ")
                    + String(format: " after the restart began (it took %.3f s)", (restart?.1 ?? 0) - (restart?.0 ?? 0))
                    + "; \(result.retries) calls the store retried")
        }
        let checker = ChaosChecker(side: side, jobs: jobs, categories: categories, journal: journal)
        return try await checker.check(
            kills: kills, workerRestarts: workerRestarts, serverRestarts: serverRestarts, crash: crash,
            elapsed: elapsed,
            seed: seed, workers: workers, lease: lease)
    }

    struct LateSubmissions: Sendable {
        var runs = 0
        var calls: [(began: Double, ended: Double)] = []
        var retries = 0
    }

    /// Submits `graphs` one after the other, 150 ms apart, through `store`, whose log handler counts
    /// in `retries` the calls it retried (proof that a submission met the restarting server). A failed
    /// call is also put in `failure`, which the orchestrator checks while it waits.
    func submitLate(
        _ graphs: [(offset: Int, element: GraphSpec)], seed: UInt64, store: PostgresJobStore, retries: Protected<Int>,
        failure: Protected<String?>
    ) -> Task<LateSubmissions, any Error> {
        Task {
            var result = LateSubmissions()
            for (index, graph) in graphs {
                let began = Date().timeIntervalSince1970
                do {
                    _ = try await store.submit(graph, uniqueKey: "chaos-\(seed)-\(index)")
                } catch {
                    failure.withLock { $0 = "submitting run \(index) while PostgreSQL restarted failed: \(error)" }
                    throw error
                }
                result.calls.append((began, Date().timeIntervalSince1970))
                result.runs += 1
                try await Task.sleep(for: .milliseconds(150))
            }
            result.retries = retries.withLock { $0 }
            return result
        }
    }

    func spawn(worker: Int, schema: String, journal: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        if !FileManager.default.isExecutableFile(atPath: process.executableURL!.path),
            let path = Bundle.main.executablePath
        {
            process.executableURL = URL(fileURLWithPath: path)
        }
        process.arguments = [
            "worker", "--url", url, "--schema", schema, "--id", "w\(worker)",
            "--lease-ms", "\(lease.components.seconds * 1000)", "--journal", journal,
        ]
        try process.run()
        return process
    }
}

/// Counts the store's "retrying" notices; prints nothing.
struct RetryCountingLogHandler: LogHandler {
    let count: Protected<Int>
    var logLevel: Logger.Level = .notice
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    func log(event: LogEvent) {
        if event.message.description.contains("retrying") { count.withLock { $0 += 1 } }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}
