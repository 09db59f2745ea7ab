import Baton
import BatonDurable
import BatonPostgres
import Foundation
import Logging
import PostgresNIO

/// `baton-postgres-chaos bench [--quick]`: Baton's PostgreSQL store on the workloads of issue 12,
/// printing one JSON line per measurement, then the peers' (Benchmarks/peers) on the same server
/// when their virtual environment exists, and the ratios.
struct PostgresBench {
    var url: String
    var quick: Bool

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let burn = quick ? 10_000 : 100_000
        var lines: [[String: Any]] = []
        for workers in [1, 2, 4] {
            let rate = try await burnDown(jobs: burn, workers: workers, logger: logger)
            lines.append([
                "peer": "baton", "workload": "burndown", "n": burn, "workers": workers,
                "jobs_per_s": (rate * 10).rounded() / 10,
            ])
            emit(lines.last!)
        }
        let (p50, p99) = try await latency(samples: quick ? 50 : 200, logger: logger)
        lines.append(["peer": "baton", "workload": "latency", "p50_ms": p50, "p99_ms": p99])
        emit(lines.last!)
        let chain = quick ? 1000 : 10_000
        let perStep = try await chainStep(length: chain, logger: logger)
        lines.append(["peer": "baton", "workload": "chain", "n": chain, "ms_per_step": perStep])
        emit(lines.last!)
    }

    func emit(_ line: [String: Any]) {
        if let data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys]) {
            say(String(decoding: data, as: UTF8.self))
        }
    }

    func store(_ schema: String, _ logger: Logger) async throws -> PostgresJobStore {
        try await PostgresJobStore(url: url, schema: schema, logger: logger)
    }

    func fresh(_ name: String) -> String { "bench_\(name)_\(String(UInt32.random(in: 0...UInt32.max), radix: 36))" }

    func dropSchema(_ schema: String, using store: PostgresJobStore) async {
        _ = try? await store.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"))
    }

    /// N independent no-op jobs submitted first; W worker loops (each its own store and connections)
    /// claim 100 at a time and report them in one call. Rate from the first claim to the last report.
    func burnDown(jobs: Int, workers: Int, logger: Logger) async throws -> Double {
        let schema = fresh("burn")
        let submitter = try await store(schema, logger)
        var remaining = jobs
        while remaining > 0 {
            let size = min(10_000, remaining)
            let graph = GraphSpec(
                name: "burn",
                jobs: (0..<size).map { JobSpec(name: "j\($0)", kind: "noop", input: Data(), retry: .never) })
            _ = try await submitter.submit(graph, uniqueKey: nil)
            remaining -= size
        }
        let stores = try await (0..<workers).asyncMap { _ in try await store(schema, logger) }
        let done = BenchCounter()
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, store) in stores.enumerated() {
                group.addTask {
                    while done.value < jobs {
                        let claimed = try await store.claim(
                            worker: "b\(index)", kinds: ["noop"], limit: 100, lease: .seconds(60))
                        if claimed.isEmpty {
                            if done.value >= jobs { break }
                            try await Task.sleep(for: .milliseconds(1))
                            continue
                        }
                        _ = try await store.finish(
                            claimed.map { .init(lease: $0.lease, outcome: .succeeded(output: Data())) })
                        done.add(claimed.count)
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - start
        for store in stores { store.close() }
        await dropSchema(schema, using: submitter)
        submitter.close()
        return Double(jobs) / elapsed.seconds
    }

    /// An idle worker woken by LISTEN/NOTIFY; one-job graphs submitted 20 ms apart; submit→start is
    /// from just before `submit` to the claim returning the job.
    func latency(samples: Int, logger: Logger) async throws -> (Double, Double) {
        let schema = fresh("latency")
        let submitter = try await store(schema, logger)
        let worker = try await store(schema, logger)
        let started = BenchTimes()
        let wakeups = worker.wakeups()
        let loop = Task {
            for await _ in wakeups {
                let claimed =
                    (try? await worker.claim(worker: "idle", kinds: ["noop"], limit: 10, lease: .seconds(60))) ?? []
                let now = ContinuousClock.now
                for job in claimed { started.record(Int(job.run.rawValue), at: now) }
                if !claimed.isEmpty {
                    _ = try? await worker.finish(
                        claimed.map { .init(lease: $0.lease, outcome: .succeeded(output: Data())) })
                }
            }
        }
        // Let the listener connect.
        let deadline = ContinuousClock.now + .seconds(10)
        while !worker.isListening && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        var submitted: [Int: ContinuousClock.Instant] = [:]
        for index in 0..<samples {
            let graph = GraphSpec(
                name: "l\(index)", jobs: [JobSpec(name: "one", kind: "noop", input: Data(), retry: .never)])
            let at = ContinuousClock.now
            let run = try await submitter.submit(graph, uniqueKey: nil)
            submitted[Int(run.run.rawValue)] = at
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(200))
        loop.cancel()
        let times = started.all()
        var latencies = submitted.compactMap { run, at in times[run].map { ($0 - at).seconds * 1000 } }.sorted()
        if latencies.isEmpty { latencies = [.nan] }
        func percentile(_ p: Double) -> Double {
            let value = latencies[min(latencies.count - 1, Int((p / 100 * Double(latencies.count - 1)).rounded()))]
            return (value * 100).rounded() / 100
        }
        worker.close()
        await dropSchema(schema, using: submitter)
        submitter.close()
        return (percentile(50), percentile(99))
    }

    /// A chain of N jobs, each depending on the one before, run by one worker loop woken by its own
    /// completions' notifications.
    func chainStep(length: Int, logger: Logger) async throws -> Double {
        let schema = fresh("chain")
        let store = try await store(schema, logger)
        let graph = GraphSpec(
            name: "chain",
            jobs: (0..<length).map {
                JobSpec(
                    name: "c\($0)", kind: "noop", input: Data(), dependencies: $0 > 0 ? [.init(index: $0 - 1)] : [],
                    retry: .never)
            })
        _ = try await store.submit(graph, uniqueKey: nil)
        let start = ContinuousClock.now
        var done = 0
        while done < length {
            let claimed = try await store.claim(worker: "chain", kinds: ["noop"], limit: 10, lease: .seconds(60))
            if claimed.isEmpty { continue }
            _ = try await store.finish(claimed.map { .init(lease: $0.lease, outcome: .succeeded(output: Data())) })
            done += claimed.count
        }
        let elapsed = ContinuousClock.now - start
        await dropSchema(schema, using: store)
        store.close()
        return (elapsed.seconds * 1000 / Double(length) * 1000).rounded() / 1000
    }
}

final class BenchCounter: Sendable {
    private let count = Protected(0)
    var value: Int { count.withLock { $0 } }
    func add(_ n: Int) { count.withLock { $0 += n } }
}

final class BenchTimes: Sendable {
    private let times = Protected([Int: ContinuousClock.Instant]())
    func record(_ run: Int, at: ContinuousClock.Instant) { times.withLock { $0[run] = at } }
    func all() -> [Int: ContinuousClock.Instant] { times.withLock { $0 } }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async throws -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
