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
        }
        var random = SeededRandom(seed: Self.seed)
        let run = try await store.submit(Self.graph(&random), uniqueKey: "crash")

        let pool = try WorkerPool(path: path, log: log)
        defer { pool.killAll() }
        for slot in 0..<3 { try pool.start(slot: slot) }
        try await withDeadline(.seconds(240), "the crash run (\(Self.jobCount) jobs)") {
            var random = SeededRandom(seed: Self.seed &+ 1)
            while try await store.record(of: run.run).finished == nil {
                // Chaos, not synchronisation: a random worker is killed every 0.1–0.4 s (on an idle machine
                // the workers can finish the graph in about a second, before a slower cadence kills twice).
                try await Task.sleep(for: .milliseconds(Int.random(in: 100...400, using: &random)))
                if try await store.record(of: run.run).finished != nil { break }
                try await pool.killAndRestart(slot: Int.random(in: 0..<3, using: &random))
            }
        }
        pool.killAll()
        try await CrashChecker(store: store, log: log, run: run.run, kills: pool.kills).check()
        #expect(pool.kills.count >= 2, "the workers were killed \(pool.kills.count) times; the test needs crashes")
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

/// The worker processes, by slot.
final class WorkerPool: @unchecked Sendable {
    // @unchecked Sendable: used from one test task at a time.
    let path: String
    let log: DatabaseQueue
    let executable: URL
    private var processes: [Int: Process] = [:]
    private var generation = 0
    private(set) var kills: [(worker: String, at: Double)] = []
    private var names: [Int: String] = [:]

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

    func start(slot: Int) throws {
        generation += 1
        let name = "w\(slot)-\(generation)"
        let process = Process()
        process.executableURL = executable
        process.arguments = ["--db", path, "--id", name, "--lease-ms", "2000", "--renew-ms", "400"]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        processes[slot] = process
        names[slot] = name
    }

    func killAndRestart(slot: Int) async throws {
        guard let process = processes[slot], let name = names[slot] else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let at = Date().timeIntervalSince1970
        kills.append((name, at))
        try await log.write { db in
            try db.execute(
                sql: "INSERT INTO crash_log (job, attempt, worker, event, at) VALUES (NULL, NULL, ?, 'killed', ?)",
                arguments: [name, at])
        }
        try start(slot: slot)
    }

    func killAll() {
        for (_, process) in processes where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        processes.removeAll()
    }
}

struct MissingWorker: Error, CustomStringConvertible {
    let description: String
}
