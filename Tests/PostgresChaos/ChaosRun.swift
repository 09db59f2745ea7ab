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
        let store = try await PostgresJobStore(url: url, schema: schema, logger: logger)
        let side = SideLog(store: store)
        try await side.create()

        // The graph: runs of up to 1,000 jobs; each job depends on up to 3 of the 50 before it, 15 %
        // take a counted category (limits 1, 2, 3), 6 % fail once or twice first (retried after 20 ms).
        var random = SeededRandom(seed: seed)
        let categories = [DurableCategory.named("one", limit: 1), .named("two", limit: 2), .named("three", limit: 3)]
        var remaining = jobs
        var runCount = 0
        let encoder = JSONEncoder()
        let clock = ContinuousClock()
        let submitStart = clock.now
        while remaining > 0 {
            let size = min(1000, remaining)
            var graph = GraphSpec(name: "chaos-\(runCount)")
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
            _ = try await store.submit(graph, uniqueKey: "chaos-\(seed)-\(runCount)")
            remaining -= size
            runCount += 1
        }
        say("chaos: submitted \(jobs) jobs in \(runCount) runs in \(clock.now - submitStart)")

        // Workers, kills and restarts.
        var processes = try (0..<workers).map { try spawn(worker: $0, schema: schema) }
        var kills = 0
        var workerRestarts = 0
        var serverRestarts = 0
        let start = clock.now
        var nextKill = clock.now + .milliseconds(Int64.random(in: 300...1500, using: &random))
        var finished = 0
        var nextReport = clock.now + .seconds(5)
        while true {
            try await Task.sleep(for: .milliseconds(100))
            finished = try await side.query(
                "SELECT count(*)::int FROM jobs WHERE state IN ('succeeded', 'failed', 'cancelled')"
            )[0].decode(Int.self)
            if finished >= jobs { break }
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
                processes[victim] = try spawn(worker: victim, schema: schema)
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
        let checker = ChaosChecker(side: side, jobs: jobs, categories: categories)
        return try await checker.check(
            kills: kills, workerRestarts: workerRestarts, serverRestarts: serverRestarts, crash: crash,
            elapsed: elapsed,
            seed: seed, workers: workers, lease: lease)
    }

    func spawn(worker: Int, schema: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        if !FileManager.default.isExecutableFile(atPath: process.executableURL!.path),
            let path = Bundle.main.executablePath
        {
            process.executableURL = URL(fileURLWithPath: path)
        }
        process.arguments = [
            "worker", "--url", url, "--schema", schema, "--id", "w\(worker)",
            "--lease-ms", "\(lease.components.seconds * 1000)",
        ]
        try process.run()
        return process
    }
}
