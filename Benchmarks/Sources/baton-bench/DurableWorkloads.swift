import Baton
import BatonDurable
import Foundation

/// A job that does nothing (the cost measured is the store's and the worker's).
struct NoOp: DurableJob {
    static let kind = "bench.noop"
    func run(_ input: Int, context: DurableJobContext) async throws -> Int { input }
}

/// Records when each job's body starts, by input.
struct Stamp: DurableJob {
    static let kind = "bench.stamp"
    let starts: Protected<[Int: ContinuousClock.Instant]>
    func run(_ input: Int, context: DurableJobContext) async throws -> Int {
        let now = ContinuousClock.now
        starts.withLock { $0[input] = now }
        return input
    }
}

enum DurableWorkloads {
    static func freshStore() throws -> (SQLiteJobStore, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "baton-durable-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return (try SQLiteJobStore(path: directory.appendingPathComponent("jobs.sqlite").path), directory)
    }

    static func configuration(_ id: String) -> DurableWorker.Configuration {
        DurableWorker.Configuration(id: id, maxConcurrentJobs: 256, pollInterval: .milliseconds(100))
    }

    static func burndown(n: Int, workers: Int) async throws -> [String: Any] {
        let (store, directory) = try freshStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        var graph = JobGraph(name: "burndown")
        for index in 0..<n { graph.add(NoOp.self, input: index, name: "j\(index)", retry: .never) }
        let submitStart = ContinuousClock.now
        let run = try await store.submit(graph)
        let submitTime = (ContinuousClock.now - submitStart).seconds
        let pool = try (0..<workers).map {
            try DurableWorker(store: store, jobs: [NoOp()], configuration: configuration("w\($0)"))
        }
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in pool { group.addTask { try await worker.run(until: run) } }
            try await group.waitForAll()
        }
        let seconds = (ContinuousClock.now - start).seconds
        // Outside the measured time, but each worker's run(until:) built the same explanation inside it.
        let explainStart = ContinuousClock.now
        let counts = try await store.explain(run).counts
        let explainTime = (ContinuousClock.now - explainStart).seconds
        progress("durable burndown n=\(n) workers=\(workers): \(String(format: "%.0f", Double(n) / seconds)) jobs/s")
        return [
            "peer": "baton", "workload": "burndown", "workers": workers, "n": n, "seconds": seconds,
            "jobs_per_s": Double(n) / seconds, "submit_jobs_per_s": Double(n) / submitTime,
            "succeeded": counts[.succeeded] ?? 0, "explain_seconds": explainTime,
        ]
    }

    static func chain(n: Int) async throws -> [String: Any] {
        let (store, directory) = try freshStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        var graph = JobGraph(name: "chain")
        var previous = graph.add(NoOp.self, input: 0, name: "j0", retry: .never)
        for index in 1..<n { previous = graph.add(NoOp.self, inputFrom: previous, name: "j\(index)", retry: .never) }
        let run = try await store.submit(graph)
        let worker = try DurableWorker(store: store, jobs: [NoOp()], configuration: configuration("w"))
        let start = ContinuousClock.now
        try await worker.run(until: run)
        let seconds = (ContinuousClock.now - start).seconds
        progress("durable chain n=\(n): \(String(format: "%.0f", Double(n) / seconds)) jobs/s")
        return ["peer": "baton", "workload": "chain", "n": n, "seconds": seconds, "jobs_per_s": Double(n) / seconds]
    }

    /// A job kind that no worker of `idleLook` runs: another kind's backlog.
    struct Backlog: DurableJob {
        static let kind = "bench.backlog"
        func run(_ input: Int, context: DurableJobContext) async throws -> Int { input }
    }

    /// A worker with nothing to do behind another kind's backlog of `backlog` ready jobs: the time of one
    /// look for work (a claim of its own kind that finds nothing, and the time of the next due job, as
    /// its worker asks after such a claim), median and 90th percentile of `looks`.
    static func idleLook(backlog n: Int, looks: Int = 50) async throws -> [String: Any] {
        let (store, directory) = try freshStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        var graph = JobGraph(name: "backlog")
        for index in 0..<n { graph.add(Backlog.self, input: index, name: "b\(index)", retry: .never) }
        _ = try await store.submit(graph)
        var times: [Double] = []
        for _ in 0..<looks {
            let start = ContinuousClock.now
            let claimed = try await store.claim(worker: "idle", kinds: [NoOp.kind], limit: 256, lease: .seconds(60))
            _ = try await store.nextDueDate(kinds: [NoOp.kind])
            times.append((ContinuousClock.now - start).seconds)
            precondition(claimed.isEmpty, "the idle look claimed \(claimed.count) jobs")
        }
        times.sort()
        let p50 = times[times.count / 2] * 1000
        let p90 = times[times.count * 9 / 10] * 1000
        progress("durable idle look behind \(n) ready jobs of another kind: p50 \(String(format: "%.3f", p50)) ms")
        return ["peer": "baton", "workload": "idle-look", "n": n, "p50_ms": p50, "p90_ms": p90, "looks": looks]
    }

    /// Claims behind the worker's own kind's jobs waiting for their time (`backlog` of them, an hour away,
    /// submitted first, as retries backing off keep their older ids): 5,000 ready jobs after them, taken
    /// by 50 claims of 100; median and 90th percentile of the claims.
    static func claimBehindWaiting(backlog n: Int) async throws -> [String: Any] {
        let (store, directory) = try freshStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        var later = JobGraph(name: "later")
        let inAnHour = Date().addingTimeInterval(3600)
        for index in 0..<n { later.add(NoOp.self, input: index, name: "l\(index)", retry: .never, notBefore: inAnHour) }
        _ = try await store.submit(later)
        var fresh = JobGraph(name: "fresh")
        for index in 0..<5000 { fresh.add(NoOp.self, input: index, name: "f\(index)", retry: .never) }
        _ = try await store.submit(fresh)
        var times: [Double] = []
        var claimed = 0
        for _ in 0..<50 {
            let start = ContinuousClock.now
            claimed += try await store.claim(worker: "w", kinds: [NoOp.kind], limit: 100, lease: .seconds(60)).count
            times.append((ContinuousClock.now - start).seconds)
        }
        precondition(claimed == 5000, "the claims behind the waiting jobs took \(claimed) of 5000")
        times.sort()
        let p50 = times[times.count / 2] * 1000
        let p90 = times[times.count * 9 / 10] * 1000
        progress(
            "durable claim of 100 behind \(n) jobs of its own kind waiting for their time: p50 \(String(format: "%.3f", p50)) ms"
        )
        return ["peer": "baton", "workload": "claim-behind-waiting", "n": n, "p50_ms": p50, "p90_ms": p90]
    }

    static func latency(samples: Int) async throws -> [String: Any] {
        let (store, directory) = try freshStore()
        defer { try? FileManager.default.removeItem(at: directory) }
        let starts = Protected<[Int: ContinuousClock.Instant]>([:])
        let worker = try DurableWorker(store: store, jobs: [Stamp(starts: starts)], configuration: configuration("w"))
        let running = Task { try await worker.run() }
        var latencies: [Double] = []
        for sample in 0..<samples {
            var graph = JobGraph(name: "one")
            graph.add(Stamp.self, input: sample, retry: .never)
            let submitted = ContinuousClock.now
            _ = try await store.submit(graph)
            // Wait for the start (a benchmark, not a test: a short poll is fine here).
            var started: ContinuousClock.Instant?
            while started == nil {
                started = starts.withLock { $0[sample] }
                if started == nil { try await Task.sleep(for: .microseconds(50)) }
            }
            latencies.append((started! - submitted).seconds * 1000)
            try await Task.sleep(for: .milliseconds(2))  // let the worker go idle again
        }
        worker.shutdown()
        _ = try await running.value
        latencies.sort()
        let p50 = latencies[latencies.count / 2]
        let p99 = latencies[min(latencies.count - 1, Int(Double(latencies.count) * 0.99))]
        progress("durable latency: p50 \(String(format: "%.2f", p50)) ms, p99 \(String(format: "%.2f", p99)) ms")
        return ["peer": "baton", "workload": "latency", "samples": samples, "p50_ms": p50, "p99_ms": p99]
    }
}
