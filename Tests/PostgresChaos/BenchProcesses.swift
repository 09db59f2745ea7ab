import Baton
import BatonDurable
import BatonPostgres
import BatonTesting
import Foundation
import Logging

// The burn-down through DurableWorker processes, as users run them: `bench-worker` is one such process,
// and `PostgresBench.processBurnDown` starts them, releases them at once and reads their results.

/// Counts the jobs it runs and when the first and last began, on the wall clock (shared by processes).
final class WallSpan: Sendable {
    private let state = Protected<(first: Double?, last: Double?, count: Int)>((nil, nil, 0))
    func mark() {
        let now = Date().timeIntervalSince1970
        state.withLock { state in
            if state.first == nil { state.first = now }
            state.last = now
            state.count += 1
        }
    }
    var current: (first: Double?, last: Double?, count: Int) { state.current }
}

/// A no-op job that marks a ``WallSpan``.
struct BenchWallNoOp: DurableJob {
    static let kind = "bench.noop"
    let span: WallSpan
    func run(_ input: Int, context: DurableJobContext) async throws -> Int {
        span.mark()
        return input
    }
}

/// One worker process of ``PostgresBench/processBurnDown(jobs:processes:slots:logger:)``: opens its
/// store, makes its `DurableWorker`, says it is ready (a file in `gate`), waits for the release (the
/// file `go` there), runs until the run has finished, and writes what it ran.
struct BenchWorkerProcess {
    let url: String
    let schema: String
    let run: Int64
    let slots: Int
    let gate: String
    let index: Int

    func main() async throws {
        var logger = Logger(label: "bench.worker")
        logger.logLevel = .error
        let span = WallSpan()
        try await withPostgresJobStore(url: url, schema: schema, logger: logger) { store in
            let worker = try DurableWorker(
                store: store, jobs: [BenchWallNoOp(span: span)],
                configuration: .init(
                    id: "bench-\(index)", maxConcurrentJobs: slots, leaseDuration: .seconds(30),
                    renewInterval: .seconds(10), pollInterval: .seconds(1), retention: nil, logger: logger))
            _ = try await store.record(of: DurableRunID(run))  // connected and prepared
            _ = FileManager.default.createFile(atPath: "\(gate)/ready-\(index)", contents: nil)
            while !FileManager.default.fileExists(atPath: "\(gate)/go") {
                try await Task.sleep(for: .milliseconds(1))
            }
            try await worker.run(until: DurableRun(SubmittedRun(run: DurableRunID(run), jobs: [], existing: false)))
        }
        let (first, last, count) = span.current
        let line: [String: Any] = ["n": count, "first": first ?? 0, "last": last ?? 0]
        let data = try JSONSerialization.data(withJSONObject: line)
        try data.write(to: URL(fileURLWithPath: "\(gate)/result-\(index).json"))
    }
}

extension PostgresBench {
    /// N no-op jobs submitted first; then `processes` worker processes (`bench-worker`), each a
    /// `DurableWorker` of `slots` slots on a store of its own, are started, connect, and are released at
    /// once. The rate is N / (last start − release), as the peers' burn-down is measured.
    func processBurnDown(jobs: Int, processes: Int, slots: Int, logger: Logger) async throws -> Double {
        let schema = fresh("burnp")
        let submitter = try await store(schema, logger)
        var graph = JobGraph(name: "burn")
        for index in 0..<jobs { graph.add(BenchWallNoOp.self, input: index, name: "j\(index)", retry: .never) }
        let run = try await submitter.submit(graph)
        let gate = FileManager.default.temporaryDirectory.appendingPathComponent("baton-bench-\(schema)").path
        try FileManager.default.createDirectory(atPath: gate, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: gate) }
        let executable = URL(fileURLWithPath: CommandLine.arguments[0])
        let started = try (0..<processes).map { index -> (Process, ProcessExit) in
            let process = Process()
            process.executableURL = executable
            process.arguments = [
                "bench-worker", "--url", url, "--schema", schema, "--run", "\(run.id.rawValue)", "--slots",
                "\(slots)", "--gate", gate, "--index", "\(index)",
            ]
            let exit = ProcessExit(process)
            try process.run()
            return (process, exit)
        }
        // Released once every process has connected (a benchmark's gate: polling a folder).
        let deadline = ContinuousClock.now + .seconds(120)
        while (0..<processes).contains(where: { !FileManager.default.fileExists(atPath: "\(gate)/ready-\($0)") }) {
            guard ContinuousClock.now < deadline else { throw BenchFailure("bench workers did not connect in 120 s") }
            try await Task.sleep(for: .milliseconds(2))
        }
        let go = Date().timeIntervalSince1970
        _ = FileManager.default.createFile(atPath: "\(gate)/go", contents: nil)
        // Waited for without spinning: `waitUntilExit()` kept a core busy here while the workers ran
        // (``ProcessExit``), and the workers measured share this machine's two cores with the server.
        for (_, exit) in started {
            let status = await exit.status()
            guard status == 0 else { throw BenchFailure("a bench worker exited with status \(status)") }
        }
        var total = 0
        var last = go
        for index in 0..<processes {
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(gate)/result-\(index).json"))
            let line = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
            total += (line["n"] as? NSNumber)?.intValue ?? 0
            last = max(last, (line["last"] as? NSNumber)?.doubleValue ?? 0)
        }
        await dropSchema(schema, using: submitter)
        submitter.close()
        guard total == jobs else { throw BenchFailure("process burn-down ran \(total) of \(jobs) jobs") }
        let rate = Double(jobs) / (last - go)
        progress("baton burndown through \(processes) DurableWorker processes n=\(jobs): \(Int(rate)) jobs/s")
        return rate
    }
}
