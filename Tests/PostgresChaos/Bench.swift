import Baton
import BatonDurable
import BatonPostgres
import Foundation
import Logging
import PostgresNIO

/// `baton-postgres-chaos bench [--quick] [--peers PYTHON|none] [--runs N]`: Baton's PostgreSQL store
/// and `DurableWorker` on the workloads of issue 12, then the peers (pgqueuer, procrastinate, chancy
/// from `Benchmarks/peers`) on the same server in the same run, then the ratios. One JSON line per
/// measurement on standard output; progress on standard error.
///
/// Every Baton worker has a `PostgresJobStore` of its own (its own connections and `LISTEN`
/// connection), as a worker process on another machine would.
struct PostgresBench {
    var url: String
    var quick: Bool
    /// A Python with the peers installed; `nil`: run `Benchmarks/peers/setup.sh`; `"none"`: skip them.
    var peersPython: String?
    var runs: Int
    /// `--only burndown,worker,latency,chain,dag,look`: just these of Baton's workloads (for profiling one);
    /// `nil`: all of them.
    var only: Set<String>? = nil
    /// `--chains 1000,10000`: the chain lengths instead of the mode's.
    var chainLengths: [Int]? = nil

    func wanted(_ workload: String) -> Bool { only?.contains(workload) ?? true }

    struct Sizes {
        var burn: Int
        var workers: [Int]
        var latencySamples: Int
        var chains: [Int]
        var dags: [Int]
        var peerBurn: [String: Int]
        var peerWorkers: [String: [Int]]
        var peerLatencySamples: Int
        var chancyChain: Int
        var chancyFanout: Int
    }

    var sizes: Sizes {
        quick
            ? Sizes(
                burn: 20_000, workers: [1, 2, 4], latencySamples: 50, chains: [200, 1000], dags: [2000, 10_000],
                peerBurn: ["pgqueuer": 20_000, "procrastinate": 1000],
                peerWorkers: ["pgqueuer": [1, 2], "procrastinate": [1]],
                peerLatencySamples: 30, chancyChain: 3, chancyFanout: 20)
            : Sizes(
                burn: 100_000, workers: [1, 2, 4], latencySamples: 200, chains: [1000, 10_000],
                dags: [10_000, 100_000],
                peerBurn: ["pgqueuer": 100_000, "procrastinate": 10_000],
                peerWorkers: ["pgqueuer": [1, 2, 4], "procrastinate": [1, 2]], peerLatencySamples: 200,
                chancyChain: 10, chancyFanout: 200)
    }

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let sizes = sizes
        let load =
            (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3)
            .joined(separator: " ") ?? "?"
        #if DEBUG
        let build = "debug build (numbers mean little; use swift run -c release)"
        #else
        let build = "release build"
        #endif
        say(
            "# PostgreSQL durable benchmark: \(build), \(ProcessInfo.processInfo.activeProcessorCount) cores, "
                + "load average \(load), \(quick ? "quick" : "full") mode, \(runs) run(s) per burn-down (median)")
        var lines: [[String: Any]] = []
        func record(_ line: [String: Any]) {
            lines.append(line)
            emit(line)
        }

        for batch in Self.batches where wanted("burndown") {
            for workers in sizes.workers {
                var rates: [Double] = []
                var walls: [Double] = []
                for _ in 0..<runs {
                    let (rate, wall) = try await burnDown(
                        jobs: sizes.burn, workers: workers, batch: batch, logger: logger)
                    rates.append(rate)
                    walls.append(wall)
                }
                record([
                    "peer": "baton", "workload": "burndown", "n": sizes.burn, "workers": workers, "batch": batch,
                    "jobs_per_s": round1(median(rates)), "wall_jobs_per_s": round1(median(walls)), "runs": runs,
                ])
            }
        }
        // The same burn-down through DurableWorker processes (what users run), released at once as the
        // peers' processes are.
        for processes in [1, 2] where wanted("processes") {
            var rates: [Double] = []
            for _ in 0..<runs {
                rates.append(
                    try await processBurnDown(
                        jobs: sizes.burn, processes: processes, slots: Self.processSlots, logger: logger))
            }
            record([
                "peer": "baton", "workload": "burndown-processes", "n": sizes.burn, "workers": processes,
                "slots": Self.processSlots, "jobs_per_s": round1(median(rates)), "runs": runs,
            ])
        }
        // The same burn-down run by one DurableWorker (what users run), not by claim loops.
        if wanted("worker") {
            let (workerRate, workerWall) = try await workerBurnDown(jobs: sizes.burn, logger: logger)
            record([
                "peer": "baton", "workload": "burndown-worker", "n": sizes.burn, "workers": 1,
                "jobs_per_s": round1(workerRate), "wall_jobs_per_s": round1(workerWall), "runs": 1,
            ])
        }
        if wanted("latency") {
            // As the peers are measured: the worker does not share the submitter's store (another
            // process would do the same), so each job goes insert → NOTIFY → claim.
            let (p50, p99, first) = try await latency(
                samples: sizes.latencySamples, sharedStore: false, logger: logger)
            record([
                "peer": "baton", "workload": "latency", "samples": sizes.latencySamples, "p50_ms": p50,
                "p99_ms": p99, "first_ms": first, "worker": "another store",
            ])
            // The worker on the submitting store: the insert claims the job for it (no NOTIFY, no claim).
            let (localP50, localP99, localFirst) = try await latency(
                samples: sizes.latencySamples, sharedStore: true, logger: logger)
            record([
                "peer": "baton", "workload": "latency-local", "samples": sizes.latencySamples, "p50_ms": localP50,
                "p99_ms": localP99, "first_ms": localFirst, "worker": "the submitting store",
            ])
        }
        for length in chainLengths ?? sizes.chains where wanted("chain") {
            let perStep = try await chain(length: length, logger: logger)
            record(["peer": "baton", "workload": "chain", "n": length, "ms_per_step": round3(perStep)])
        }
        for count in sizes.dags where wanted("dag") {
            let (seconds, submit) = try await dag(jobs: count, workers: 2, logger: logger)
            record([
                "peer": "baton", "workload": "dag", "n": count, "workers": 2, "seconds": round3(seconds),
                "us_per_job": round1(seconds / Double(count) * 1e6), "submit_seconds": round3(submit),
            ])
        }
        if wanted("look") {
            let (idle, busy, waiting) = try await looks(backlog: sizes.burn, logger: logger)
            record([
                "peer": "baton", "workload": "idle-look", "n": sizes.burn, "p50_ms": round3(idle.p50),
                "p90_ms": round3(idle.p90),
            ])
            record([
                "peer": "baton", "workload": "claim-behind", "n": sizes.burn, "p50_ms": round3(busy.p50),
                "p90_ms": round3(busy.p90),
            ])
            record([
                "peer": "baton", "workload": "claim-behind-waiting", "n": sizes.burn, "p50_ms": round3(waiting.p50),
                "p90_ms": round3(waiting.p90),
            ])
        }

        if let python = await peers() {
            for peer in ["pgqueuer", "procrastinate"] {
                // pgqueuer's batch size is its throughput knob: the same two sizes as Baton's loops.
                for batch in peer == "pgqueuer" ? Self.batches : [0] {
                    for workers in sizes.peerWorkers[peer] ?? [] {
                        if let line = await runPeer(
                            python,
                            [
                                "--peer", peer, "--workload", "burndown", "--n", "\(sizes.peerBurn[peer] ?? 1000)",
                                "--workers", "\(workers)",
                            ] + (batch > 0 ? ["--batch", "\(batch)"] : []))
                        {
                            record(line)
                        }
                    }
                }
                if let line = await runPeer(
                    python, ["--peer", peer, "--workload", "latency", "--n", "\(sizes.peerLatencySamples)"])
                {
                    record(line)
                }
            }
            if let line = await runPeer(
                python, ["--peer", "chancy", "--workload", "chain", "--n", "\(sizes.chancyChain)"])
            {
                record(line)
            }
            if let line = await runPeer(
                python, ["--peer", "chancy", "--workload", "fanout", "--n", "\(sizes.chancyFanout)"])
            {
                record(line)
            }
        }
        report(lines)
    }

    // MARK: Baton's workloads

    func store(_ schema: String, _ logger: Logger) async throws -> PostgresJobStore {
        try await openStore(url: url, schema: schema, logger: logger)
    }

    func fresh(_ name: String) -> String { "bench_\(name)_\(String(UInt32.random(in: 0...UInt32.max), radix: 36))" }

    func dropSchema(_ schema: String, using store: PostgresJobStore) async {
        // For looking at the tables afterwards (EXPLAIN, sizes): BATON_BENCH_KEEP_SCHEMAS=1.
        if ProcessInfo.processInfo.environment["BATON_BENCH_KEEP_SCHEMAS"] == "1" {
            progress("kept schema \(schema)")
            return
        }
        _ = try? await store.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"))
    }

    func configuration(_ id: String, _ logger: Logger, slots: Int = 256) -> DurableWorker.Configuration {
        var logger = logger
        logger.logLevel = .error
        return DurableWorker.Configuration(
            id: id, maxConcurrentJobs: slots, leaseDuration: .seconds(30), renewInterval: .seconds(10),
            pollInterval: .seconds(1), retention: nil, logger: logger)
    }

    /// Submitted first (one graph of N independent no-op jobs); then W worker loops on the store's
    /// protocol (``drain(_:total:span:)``), each with its own store, until every job is reported. The rate is
    /// N / (last start − release of the connected loops), as the peers' is measured (from the release of
    /// their connected, waiting processes); the wall rate is N / (release → all reported).
    func burnDown(jobs: Int, workers: Int, batch: Int, logger: Logger) async throws -> (Double, Double) {
        let schema = fresh("burn")
        let submitter = try await store(schema, logger)
        var graph = JobGraph(name: "burn")
        for index in 0..<jobs { graph.add(BenchNoOp.self, input: index, name: "j\(index)", retry: .never) }
        let submitted = ContinuousClock.now
        _ = try await submitter.submit(graph)
        progress("baton burndown n=\(jobs): submitted in \(round3((ContinuousClock.now - submitted).seconds)) s")
        let stores = try await (0..<workers).asyncMap { _ in try await store(schema, logger) }
        let span = BenchSpan()
        let start = ContinuousClock.now
        try await drain(stores, total: jobs, batch: batch, span: span)
        let wall = ContinuousClock.now - start
        for store in stores { store.close() }
        let ran = span.count
        let seconds = span.seconds(since: start)
        await dropSchema(schema, using: submitter)
        submitter.close()
        guard ran == jobs else {
            throw BenchFailure("burn-down ran \(ran) of \(jobs) jobs")
        }
        let rate = Double(jobs) / seconds
        progress("baton burndown n=\(jobs) workers=\(workers) batch=\(batch): \(Int(rate)) jobs/s")
        return (rate, Double(jobs) / wall.seconds)
    }

    /// A worker behind another kind's backlog of `backlog` ready jobs, which come first in the order
    /// claims take jobs. `idle`: with nothing of its own to do, the time of one look for work (a claim of
    /// its own kind that finds nothing, and the time of the next due job, as its worker asks after such a
    /// claim). `busy`: with 5,000 ready jobs of its own, the time of a claim of 100 of them. `waiting`:
    /// the same claims with `backlog` jobs of its own kind, submitted before them, waiting for their
    /// time (as retries backing off do, which keep their older ids). In milliseconds, median and 90th
    /// percentile of 50 each.
    func looks(
        backlog: Int, logger: Logger
    ) async throws -> (
        idle: (p50: Double, p90: Double), busy: (p50: Double, p90: Double), waiting: (p50: Double, p90: Double)
    ) {
        let schema = fresh("look")
        let store = try await store(schema, logger)
        var graph = JobGraph(name: "backlog")
        for index in 0..<backlog { graph.add(BenchNoOp.self, input: index, name: "b\(index)", retry: .never) }
        _ = try await store.submit(graph)
        var idle: [Double] = []
        var claimed = 0
        for _ in 0..<50 {
            let start = ContinuousClock.now
            claimed += try await store.claim(worker: "idle", kinds: [BenchOwn.kind], limit: 500, lease: .seconds(60))
                .count
            _ = try await store.nextDueDate(kinds: [BenchOwn.kind])
            idle.append((ContinuousClock.now - start).seconds * 1000)
        }
        guard claimed == 0 else { throw BenchFailure("the idle looks claimed \(claimed) jobs") }
        var own = JobGraph(name: "own")
        for index in 0..<5000 { own.add(BenchOwn.self, input: index, name: "o\(index)", retry: .never) }
        _ = try await store.submit(own)
        var busy: [Double] = []
        for _ in 0..<50 {
            let start = ContinuousClock.now
            claimed += try await store.claim(worker: "busy", kinds: [BenchOwn.kind], limit: 100, lease: .seconds(60))
                .count
            busy.append((ContinuousClock.now - start).seconds * 1000)
        }
        guard claimed == 5000 else { throw BenchFailure("the claims behind the backlog took \(claimed) of 5000 jobs") }
        var later = JobGraph(name: "later")
        let inAnHour = Date().addingTimeInterval(3600)
        for index in 0..<backlog {
            later.add(BenchOwn.self, input: index, name: "l\(index)", retry: .never, notBefore: inAnHour)
        }
        _ = try await store.submit(later)
        var fresh = JobGraph(name: "fresh")
        for index in 0..<5000 { fresh.add(BenchOwn.self, input: index, name: "f\(index)", retry: .never) }
        _ = try await store.submit(fresh)
        var waiting: [Double] = []
        claimed = 0
        for _ in 0..<50 {
            let start = ContinuousClock.now
            claimed += try await store.claim(worker: "busy", kinds: [BenchOwn.kind], limit: 100, lease: .seconds(60))
                .count
            waiting.append((ContinuousClock.now - start).seconds * 1000)
        }
        await dropSchema(schema, using: store)
        store.close()
        guard claimed == 5000 else {
            throw BenchFailure("the claims behind the waiting jobs took \(claimed) of 5000 jobs")
        }
        idle.sort()
        busy.sort()
        waiting.sort()
        progress("baton idle look behind \(backlog) ready jobs of another kind: p50 \(round3(idle[25])) ms")
        progress("baton claim of 100 behind \(backlog) ready jobs of another kind: p50 \(round3(busy[25])) ms")
        progress(
            "baton claim of 100 behind \(backlog) jobs of its own kind waiting for their time: p50 \(round3(waiting[25])) ms"
        )
        return ((idle[25], idle[45]), (busy[25], busy[45]), (waiting[25], waiting[45]))
    }

    /// Submitted first (one graph of N independent no-op jobs), then run to the end by one
    /// `DurableWorker` with ``processSlots`` slots: as many jobs held at once as the claim loop of 500 it
    /// is compared with (it had 256 until 29 Nov, half the loop's, and measured 0.61–0.77 of it; with 500,
    /// 0.77–0.92 in four interleaved pairs). Rates as in ``burnDown(jobs:workers:logger:)``.
    func workerBurnDown(jobs: Int, logger: Logger) async throws -> (Double, Double) {
        let schema = fresh("burnw")
        let store = try await store(schema, logger)
        var graph = JobGraph(name: "burn")
        for index in 0..<jobs { graph.add(BenchNoOp.self, input: index, name: "j\(index)", retry: .never) }
        let run = try await store.submit(graph)
        let span = BenchSpan()
        let worker = try DurableWorker(
            store: store, jobs: [BenchNoOp(span: span)],
            configuration: configuration("w", logger, slots: Self.processSlots))
        let start = ContinuousClock.now
        try await worker.run(until: run)
        let wall = ContinuousClock.now - start
        let ran = span.count
        let seconds = span.seconds(since: start)
        await dropSchema(schema, using: store)
        store.close()
        guard ran == jobs else { throw BenchFailure("worker burn-down ran \(ran) of \(jobs) jobs") }
        let rate = Double(jobs) / seconds
        progress("baton burndown through a DurableWorker n=\(jobs): \(Int(rate)) jobs/s")
        return (rate, Double(jobs) / wall.seconds)
    }

    /// An idle `DurableWorker`; one-job graphs submitted 20 ms apart; submit→start is from just before
    /// `submit` to the job's body starting. `sharedStore`: the worker runs on the submitting store, so
    /// submissions hand it their jobs; otherwise on a store of its own, woken by LISTEN/NOTIFY.
    /// The first submission, which opens the submitting connection and prepares its statements (10–16 ms
    /// here), is a warm-up: printed and returned apart (`first`), not counted in the percentiles.
    func latency(
        samples: Int, sharedStore: Bool, logger: Logger
    ) async throws -> (p50: Double, p99: Double, first: Double) {
        let schema = fresh(sharedStore ? "latency_local" : "latency")
        let submitter = try await store(schema, logger)
        let workerStore = sharedStore ? submitter : try await store(schema, logger)
        let starts = BenchTimes()
        let worker = try DurableWorker(
            store: workerStore, jobs: [BenchStamp(starts: starts)], configuration: configuration("idle", logger))
        let running = Task { try await worker.run() }
        // Let the listener connect (a benchmark, not a test: a short poll is fine here).
        let deadline = ContinuousClock.now + .seconds(10)
        while !workerStore.isListening && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await Task.sleep(for: .milliseconds(200))
        var latencies: [Double] = []
        var submitCalls: [Double] = []
        var first = 0.0
        for sample in 0...samples {
            var graph = JobGraph(name: "l\(sample)")
            graph.add(BenchStamp.self, input: sample, retry: .never)
            let submitted = ContinuousClock.now
            _ = try await submitter.submit(graph)
            submitCalls.append((ContinuousClock.now - submitted).seconds * 1000)
            // Waits without polling (a polling loop would take CPU from the worker and the server).
            let watchdog = Task {
                try await Task.sleep(for: .seconds(10))
                starts.giveUp(sample)
            }
            let started = await starts.started(sample)
            watchdog.cancel()
            guard let started else { throw BenchFailure("sample \(sample) did not start within 10 s") }
            if sample == 0 {
                first = (started - submitted).seconds * 1000
                submitCalls.removeAll()
            } else {
                latencies.append((started - submitted).seconds * 1000)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        worker.shutdown()
        _ = try await running.value
        if !sharedStore { workerStore.close() }
        await dropSchema(schema, using: submitter)
        submitter.close()
        let ping = try await roundTrip(logger: logger)
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            round3(latencies[min(latencies.count - 1, Int((p / 100 * Double(latencies.count - 1)).rounded()))])
        }
        submitCalls.sort()
        progress(
            "baton latency (worker on \(sharedStore ? "the submitting store" : "another store")): p50 \(percentile(50)) ms, p99 \(percentile(99)) ms "
                + "(the submit call itself: p50 \(round3(submitCalls[submitCalls.count / 2])) ms; "
                + "a `SELECT 1` through postgres-nio's pool: p50 \(round3(ping)) ms; "
                + "the first submission, a warm-up not counted: \(round3(first)) ms)")
        return (percentile(50), percentile(99), round3(first))
    }

    /// The median time of `SELECT 1` through a postgres-nio pool of this process: the floor under each
    /// of the round trips that submit→start is made of.
    func roundTrip(logger: Logger) async throws -> Double {
        let configuration = try PostgresStoreConfiguration(url: url)
        let client = PostgresClient(
            configuration: PostgresClient.Configuration(
                host: configuration.host, port: configuration.port, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: .disable))
        let running = Task { await client.run() }
        defer { running.cancel() }
        var times: [Double] = []
        for index in 0..<300 {
            let start = ContinuousClock.now
            _ = try await client.query("SELECT 1", logger: logger).collect()
            if index >= 100 { times.append((ContinuousClock.now - start).seconds * 1000) }
        }
        times.sort()
        return times[times.count / 2]
    }

    /// A chain of N jobs, each taking the output of the one before as its input, run by one worker.
    func chain(length: Int, logger: Logger) async throws -> Double {
        let schema = fresh("chain")
        let store = try await store(schema, logger)
        var graph = JobGraph(name: "chain")
        var previous = graph.add(BenchNoOp.self, input: 0, name: "c0", retry: .never)
        for index in 1..<length {
            previous = graph.add(BenchNoOp.self, inputFrom: previous, name: "c\(index)", retry: .never)
        }
        let run = try await store.submit(graph)
        let span = BenchSpan()
        let worker = try DurableWorker(
            store: store, jobs: [BenchNoOp(span: span)], configuration: configuration("c", logger))
        try await worker.run(until: run)
        let ran = span.count
        await dropSchema(schema, using: store)
        store.close()
        guard ran == length else { throw BenchFailure("chain ran \(ran) of \(length) jobs") }
        let perStep = span.seconds * 1000 / Double(length - 1)
        let tenths = span.tenths().map { "\(round3($0))" }.joined(separator: " ")
        progress("baton chain n=\(length): \(round3(perStep)) ms per step (by tenth of the chain: \(tenths))")
        return perStep
    }

    /// A random DAG (job i depends on up to 4 distinct jobs among the 50 before it, fixed seed),
    /// submitted as one graph and run by W workers. Seconds from the first start to the last.
    func dag(jobs: Int, workers: Int, logger: Logger) async throws -> (Double, Double) {
        let schema = fresh("dag")
        let submitter = try await store(schema, logger)
        var graph = JobGraph(name: "dag")
        var handles: [JobGraph.Handle<Int>] = []
        var random = SplitMix64(seed: 12)  // the same DAG in every run
        for index in 0..<jobs {
            var after: Set<Int> = []
            for _ in 0..<min(index, 4) { after.insert(index - 1 - Int(random.next() % UInt64(min(index, 50)))) }
            handles.append(
                graph.add(
                    BenchNoOp.self, input: index, name: "d\(index)", after: after.sorted().map { handles[$0] },
                    retry: .never))
        }
        let submitStart = ContinuousClock.now
        _ = try await submitter.submit(graph)
        let submit = (ContinuousClock.now - submitStart).seconds
        let span = BenchSpan()
        let stores = try await (0..<workers).asyncMap { _ in try await store(schema, logger) }
        try await drain(stores, total: jobs, batch: 100, span: span)
        for store in stores { store.close() }
        let ran = span.count
        await dropSchema(schema, using: submitter)
        submitter.close()
        guard ran == jobs else { throw BenchFailure("DAG ran \(ran) of \(jobs) jobs") }
        progress("baton dag n=\(jobs): \(round3(span.seconds)) s (submit \(round3(submit)) s)")
        return (span.seconds, submit)
    }

    /// Worker loops on the store's protocol, as `DurableWorker` drives it (claim a batch of up to `batch`,
    /// run, report the batch and claim the next in one call), one loop per store; an empty claim waits
    /// 1 ms (a benchmark).
    /// The batch sizes of the burn-down: Baton's loops claim (and report) up to this many jobs at a
    /// time, and pgqueuer dequeues this many (its `batch_size`). 100 was pgqueuer's tuning in the issue;
    /// 500 suits both better here (a sweep of 100 / 250 / 500 / 1,000 on 24 Nov: pgqueuer's best was
    /// 15–17k jobs/s at 250–1,000, Baton's 46k at 500, with 1,000 slower for Baton).
    static let batches = [100, 500]

    /// The slots of each `DurableWorker` process of the process burn-down: as many as the claim loops'
    /// larger batch, so a worker claims (and reports) as much at a time.
    static let processSlots = 500

    func drain(_ stores: [PostgresJobStore], total: Int, batch: Int, span: BenchSpan) async throws {
        let done = BenchCounter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, store) in stores.enumerated() {
                group.addTask {
                    // As a DurableWorker does: each batch's reports go with the claim of the next batch.
                    var claimed: [ClaimedJob] = []
                    while done.value < total {
                        if claimed.isEmpty {
                            claimed = try await store.claim(
                                worker: "b\(index)", kinds: [BenchNoOp.kind], limit: batch, lease: .seconds(60))
                            if claimed.isEmpty {
                                try await Task.sleep(for: .milliseconds(1))
                                continue
                            }
                        }
                        for _ in claimed { span.mark() }
                        let finished = claimed.count
                        claimed = try await store.finish(
                            claimed.map { .init(lease: $0.lease, outcome: .succeeded(output: Data("0".utf8))) },
                            thenClaim: batch, worker: "b\(index)", kinds: [BenchNoOp.kind], lease: .seconds(60)
                        ).claimed
                        done.add(finished)
                    }
                    // Jobs claimed after the last count was reached: none are left (all `total` ran).
                    if !claimed.isEmpty {
                        throw BenchFailure("burn-down claimed \(claimed.count) jobs beyond \(total)")
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    // MARK: Peers

    var peersDirectory: URL {
        var directory = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { directory.deleteLastPathComponent() }
        return directory.appendingPathComponent("Benchmarks/peers")
    }

    /// The Python to run the peers with, or nil (said on standard error) when they are skipped.
    func peers() async -> String? {
        if peersPython == "none" {
            progress("peers: skipped (--peers none)")
            return nil
        }
        if let peersPython { return peersPython }
        let setup = peersDirectory.appendingPathComponent("setup.sh").path
        progress("peers: installing pgqueuer, procrastinate and chancy from PyPI into a venv (\(setup))")
        let result = await BenchProcess.run(["/bin/bash", setup], timeout: .seconds(quick ? 120 : 600))
        let venv = result.output.split(separator: "\n").last.map(String.init) ?? ""
        guard result.status == 0, !venv.isEmpty else {
            progress(
                "peers: SKIPPED — Benchmarks/peers/setup.sh failed (status \(result.status); is PyPI reachable?). "
                    + "Baton's figures above stand alone; no ratios.")
            return nil
        }
        return venv + "/bin/python"
    }

    func runPeer(_ python: String, _ arguments: [String]) async -> [String: Any]? {
        let script = peersDirectory.appendingPathComponent("peers_bench.py").path
        progress("peer: \(arguments.joined(separator: " "))")
        let result = await BenchProcess.run(
            [python, script, "--url", url] + arguments, timeout: .seconds(quick ? 120 : 900))
        guard result.status == 0,
            let last = result.output.split(separator: "\n").last,
            let object = try? JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any]
        else {
            progress("peer \(arguments.joined(separator: " ")) failed (status \(result.status)); left out")
            return nil
        }
        return object
    }

    // MARK: Report

    func report(_ lines: [[String: Any]]) {
        func rows(_ peer: String?, _ workload: String) -> [[String: Any]] {
            lines.filter {
                ($0["workload"] as? String) == workload && (peer == nil || ($0["peer"] as? String) == peer)
            }
        }
        func number(_ line: [String: Any], _ key: String) -> Double? { (line[key] as? NSNumber)?.doubleValue }
        let peerBurns = rows(nil, "burndown").filter { ($0["peer"] as? String) != "baton" }
        let bestPeer = peerBurns.max { (number($0, "jobs_per_s") ?? 0) < (number($1, "jobs_per_s") ?? 0) }
        let batonBurns = rows("baton", "burndown")
        let bestBaton = batonBurns.max { (number($0, "jobs_per_s") ?? 0) < (number($1, "jobs_per_s") ?? 0) }
        var summary: [String: Any] = ["workload": "ratios"]
        if let bestBaton, let bestPeer, let ours = number(bestBaton, "jobs_per_s"),
            let theirs = number(bestPeer, "jobs_per_s")
        {
            summary["burndown_best_baton_over_best_peer"] = round3(ours / theirs)
            let peerBatch = (bestPeer["tuning"] as? [String: Any])?["batch_size"].map { ", batch \($0)" } ?? ""
            summary["burndown_best_peer"] =
                "\(bestPeer["peer"] ?? "?") ×\(bestPeer["workers"] ?? "?") workers\(peerBatch)"
            summary["burndown_best_baton"] =
                "\(bestBaton["workers"] ?? "?") worker loops, batch \(bestBaton["batch"] ?? "?")"
            for line in batonBurns {
                if let rate = number(line, "jobs_per_s") {
                    let key = "burndown_\(line["workers"] ?? "?")w_b\(line["batch"] ?? "?")_over_best_peer"
                    summary[key] = round3(rate / theirs)
                }
            }
        }
        let peerLatency = rows(nil, "latency").filter { ($0["peer"] as? String) != "baton" }
        let bestLatency = peerLatency.min { (number($0, "p50_ms") ?? .infinity) < (number($1, "p50_ms") ?? .infinity) }
        if let ours = rows("baton", "latency").first, let bestLatency, let p50 = number(ours, "p50_ms"),
            let theirs = number(bestLatency, "p50_ms")
        {
            summary["latency_p50_best_peer_over_baton"] = round3(theirs / p50)
            summary["latency_best_peer"] = bestLatency["peer"] ?? "?"
        }
        if let chancy = rows("chancy", "chain").first, let chancyStep = number(chancy, "ms_per_job"),
            let ours = rows("baton", "chain").last, let step = number(ours, "ms_per_step")
        {
            summary["chain_step_chancy_over_baton"] = round3(chancyStep / step)
        }
        let chains = rows("baton", "chain").compactMap { line in number(line, "ms_per_step") }
        if chains.count == 2 { summary["chain_step_large_over_small"] = round3(chains[1] / chains[0]) }
        let dags = rows("baton", "dag").compactMap { line in number(line, "us_per_job") }
        if dags.count == 2 { summary["dag_per_job_large_over_small"] = round3(dags[1] / dags[0]) }
        // Targets of issue 27 (informational; nothing is asserted on time): DurableWorker processes
        // against pgqueuer's best batch size with as many processes, and one worker against one loop.
        var targets: [String] = []
        for line in rows("baton", "burndown-processes") {
            guard let rate = number(line, "jobs_per_s"), let workers = line["workers"] as? Int else { continue }
            let peer = rows("pgqueuer", "burndown").filter { ($0["workers"] as? Int) == workers }
                .max { (number($0, "jobs_per_s") ?? 0) < (number($1, "jobs_per_s") ?? 0) }
            guard let theirs = peer.flatMap({ number($0, "jobs_per_s") }) else { continue }
            summary["burndown_processes_\(workers)_over_pgqueuer_best"] = round3(rate / theirs)
            targets.append(
                verdict(
                    "\(workers) DurableWorker process(es) ≥ 3× pgqueuer's best batch with as many", rate >= 3 * theirs,
                    "\(Int(rate)) against \(Int(theirs)) jobs/s: \(round3(rate / theirs))×"))
        }
        if let worker = rows("baton", "burndown-worker").first.flatMap({ number($0, "jobs_per_s") }),
            let loop = rows("baton", "burndown").filter({ ($0["workers"] as? Int) == 1 })
                .compactMap({ number($0, "jobs_per_s") }).max()
        {
            targets.append(
                verdict(
                    "one DurableWorker ≥ 80 % of one claim loop", worker >= 0.8 * loop,
                    "\(Int(worker)) against \(Int(loop)) jobs/s: \(round3(worker / loop))×"))
        }
        if let rate = bestBaton.flatMap({ number($0, "jobs_per_s") }) {
            targets.append(verdict("burn-down ≥ 14,000 jobs/s", rate >= 14_000, "\(Int(rate)) jobs/s"))
            if let theirs = bestPeer.flatMap({ number($0, "jobs_per_s") }) {
                targets.append(
                    verdict("burn-down ≥ 3× the best peer", rate >= 3 * theirs, "\(round3(rate / theirs))×"))
            }
        }
        if let ours = rows("baton", "latency").first, let p50 = number(ours, "p50_ms"), let p99 = number(ours, "p99_ms")
        {
            targets.append(verdict("submit→start across processes p50 ≤ 3 ms", p50 <= 3, "\(p50) ms"))
            targets.append(verdict("submit→start across processes p99 ≤ 10 ms", p99 <= 10, "\(p99) ms"))
        }
        if let ours = rows("baton", "latency-local").first, let p50 = number(ours, "p50_ms"),
            let p99 = number(ours, "p99_ms")
        {
            targets.append(verdict("submit→start p50 < 2 ms, worker on the submitting store", p50 < 2, "\(p50) ms"))
            targets.append(verdict("submit→start p99 < 10 ms, worker on the submitting store", p99 < 10, "\(p99) ms"))
        }
        if let step = chains.last { targets.append(verdict("chain step < 10 ms", step < 10, "\(round3(step)) ms")) }
        if chains.count == 2 {
            targets.append(
                verdict(
                    "chain linear (per step large/small ≤ 1.5)", chains[1] / chains[0] <= 1.5,
                    "\(round3(chains[1] / chains[0]))"))
        }
        if dags.count == 2 {
            targets.append(
                verdict(
                    "DAG linear (per job large/small ≤ 1.5)", dags[1] / dags[0] <= 1.5, "\(round3(dags[1] / dags[0]))"))
        }
        emit(summary)
        for line in targets { say("# target: " + line) }
    }

    func verdict(_ name: String, _ met: Bool, _ value: String) -> String {
        "\(met ? "MET" : "MISSED") \(name): \(value)"
    }

    func emit(_ line: [String: Any]) {
        if let data = try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys]) {
            say(String(decoding: data, as: UTF8.self))
        }
    }
}

func progress(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

func round1(_ value: Double) -> Double { (value * 10).rounded() / 10 }
func round3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = "benchmark check failed: " + description }
}

/// A job that does nothing but note when it started.
/// Jobs of the worker's own kind in the look workload (never run).
struct BenchOwn: DurableJob {
    static let kind = "bench.own"
    func run(_ input: Int, context: DurableJobContext) async throws -> Int { input }
}

struct BenchNoOp: DurableJob {
    static let kind = "bench.noop"
    var span = BenchSpan()
    func run(_ input: Int, context: DurableJobContext) async throws -> Int {
        span.mark()
        return input
    }
}

/// Records when each job's body starts, by input.
struct BenchStamp: DurableJob {
    static let kind = "bench.stamp"
    let starts: BenchTimes
    func run(_ input: Int, context: DurableJobContext) async throws -> Int {
        starts.record(input, at: .now)
        return input
    }
}

/// The first and last start of a workload's bodies, and how many ran.
final class BenchSpan: Sendable {
    private let state = Protected<(first: ContinuousClock.Instant?, last: ContinuousClock.Instant?, count: Int)>(
        (nil, nil, 0))
    private let marks = Protected<[ContinuousClock.Instant]>([])
    func mark() {
        let now = ContinuousClock.now
        state.withLock { state in
            if state.first == nil { state.first = now }
            state.last = now
            state.count += 1
        }
        marks.withLock { $0.append(now) }
    }
    /// Milliseconds per start in each tenth of the starts, in order (shows whether steps slow down).
    func tenths() -> [Double] {
        let marks = marks.withLock { $0 }
        guard marks.count >= 20 else { return [] }
        return (0..<10).map { part in
            let from = part * (marks.count - 1) / 10
            let to = (part + 1) * (marks.count - 1) / 10
            return (marks[to] - marks[from]).seconds * 1000 / Double(max(1, to - from))
        }
    }
    var count: Int { state.withLock { $0.count } }
    /// From `start` to the last start.
    func seconds(since start: ContinuousClock.Instant) -> Double {
        state.withLock { state in state.last.map { ($0 - start).seconds } ?? .nan }
    }
    var seconds: Double {
        state.withLock { state in
            guard let first = state.first, let last = state.last else { return .nan }
            return (last - first).seconds
        }
    }
}

final class BenchCounter: Sendable {
    private let count = Protected(0)
    var value: Int { count.withLock { $0 } }
    func add(_ n: Int) { count.withLock { $0 += n } }
}

final class BenchTimes: Sendable {
    private struct State {
        var times: [Int: ContinuousClock.Instant] = [:]
        var waiters: [Int: CheckedContinuation<ContinuousClock.Instant?, Never>] = [:]
    }
    private let state = Protected(State())

    func record(_ run: Int, at: ContinuousClock.Instant) {
        let waiter = state.withLock { state in
            state.times[run] = at
            return state.waiters.removeValue(forKey: run)
        }
        waiter?.resume(returning: at)
    }

    /// When `run` started: at once if it has, else when it does (nil after ``giveUp(_:)``).
    func started(_ run: Int) async -> ContinuousClock.Instant? {
        await withCheckedContinuation { continuation in
            let known = state.withLock { state -> ContinuousClock.Instant?? in
                if let time = state.times[run] { return .some(time) }
                state.waiters[run] = continuation
                return nil
            }
            if let known { continuation.resume(returning: known) }
        }
    }

    func giveUp(_ run: Int) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: run) }
        waiter?.resume(returning: nil)
    }
}

/// Runs a program to its end on a Dispatch thread (never blocking the cooperative pool), killing
/// it at the time limit; returns its status and standard output. Standard error passes through.
enum BenchProcess {
    static func run(_ arguments: [String], timeout: Duration) async -> (status: Int32, output: String) {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: arguments[0])
                process.arguments = Array(arguments.dropFirst())
                let pipe = Pipe()
                process.standardOutput = pipe
                do {
                    try process.run()
                } catch {
                    progress("could not start \(arguments[0]): \(error)")
                    continuation.resume(returning: (-1, ""))
                    return
                }
                let timer = DispatchWorkItem {
                    progress(
                        "\(arguments.dropFirst().prefix(6).joined(separator: " ")): no end after \(timeout); killed")
                    process.terminate()
                }
                DispatchQueue.global().asyncAfter(deadline: .now() + timeout.seconds, execute: timer)
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                timer.cancel()
                continuation.resume(returning: (process.terminationStatus, String(decoding: data, as: UTF8.self)))
            }
        }
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async throws -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
