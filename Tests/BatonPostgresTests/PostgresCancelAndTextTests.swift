import Baton
import BatonDurable
import BatonTesting
import Foundation
import PostgresNIO
import Testing

@testable import BatonPostgres

/// A cancellation racing a claim, and messages PostgreSQL's text cannot hold as they are.
@Suite("PostgreSQL cancellation races and stored text", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresCancelAndTextTests {
    /// Runs `hold` in a transaction on a connection of its own, then `call` beside it, and commits
    /// once the server says `call` waits for that transaction's locks; returns what `call` returns.
    static func holdingTransaction<T: Sendable>(
        _ store: PostgresJobStore, _ hold: (PostgresConnection) async throws -> Void,
        whileWaiting call: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let logger = TestPostgres.logger
        return try await store.client.withConnection { holder in
            try await holder.query("BEGIN", logger: logger)
            do {
                let pid = try await holder.query("SELECT pg_backend_pid()", logger: logger).collect()
                    .first?.decode(Int32.self)
                try await hold(holder)
                let waiting = Task { try await call() }
                while true {
                    let blocked = try await store.client.query(
                        "SELECT count(*)::int FROM pg_stat_activity WHERE \(pid) = ANY(pg_blocking_pids(pid))"
                    ).collect().first?.decode(Int.self)
                    if blocked ?? 0 > 0 { break }
                    await Task.yield()
                }
                try await holder.query("COMMIT", logger: logger)
                return try await waiting.value
            } catch {
                _ = try? await holder.query("ROLLBACK", logger: logger)
                throw error
            }
        }
    }

    @Test("cancel(run:) while a claim of one of its jobs is being committed asks the claimed job to stop")
    func cancelRunRacingAClaim() async throws {
        try await withDeadline(.seconds(60), "a cancellation racing a claim") {
            try await TestPostgres.withStore("cancelrace") { store, _ in
                let run = try await store.submit(
                    GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]),
                    uniqueKey: nil)
                let job = run.jobs[0].rawValue
                let token: Int64 = 42
                let expires = Date().timeIntervalSince1970 + 3600
                let logger = TestPostgres.logger
                // Connection 1 claims the job as the claiming statements do (locked, marked running), and
                // holds its transaction open until connection 2's cancellation waits for it.
                try await Self.holdingTransaction(store) { claimer in
                    try await claimer.query("SELECT id FROM jobs WHERE id = \(job) FOR UPDATE", logger: logger)
                    try await claimer.query(
                        """
                        UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = 'w',
                            lease_token = \(token), lease_expires = \(expires) WHERE id = \(job)
                        """, logger: logger)
                } whileWaiting: {
                    try await store.cancel(run: run.run, reason: "stop")
                }
                let status = try await store.renew(
                    [Lease(job: DurableJobID(job), token: token)], worker: "w", lease: .seconds(30))
                guard case .cancelRequested(let reason, _) = status.first else {
                    Issue.record("the claimed job was not asked to stop: \(status)")
                    return
                }
                #expect(reason == "stop")
            }
        }
    }

    @Test("retry(run:) while a job's addition is being committed plans with the added jobs: what waits for them waits")
    func retryRunRacingAnAddition() async throws {
        try await withDeadline(.seconds(60), "a retry racing an addition") {
            try await TestPostgres.withStore("retryrace") { store, _ in
                func job(_ name: String, _ kind: String, _ dependencies: [JobSpec.Dependency] = []) -> JobSpec {
                    JobSpec(
                        name: name, kind: kind, input: Data("1".utf8), dependencies: dependencies, retry: .never)
                }
                let run = try await store.submit(
                    GraphSpec(
                        name: "g",
                        jobs: [
                            job("config", "c"), job("list", "l"),
                            job("report", "r", [.init(index: 0), .init(index: 1, includingAdded: true)]),
                        ]), uniqueKey: nil)
                let list = run.jobs[1].rawValue
                _ = try await store.claim(worker: "w", kinds: ["l"], limit: 1, lease: .seconds(600))
                let config = try await store.claim(worker: "w", kinds: ["c"], limit: 1, lease: .seconds(600))
                _ = try await store.finish([
                    AttemptReport(lease: config[0].lease, outcome: .failed(message: "no", retryable: false))
                ])
                let logger = TestPostgres.logger
                // Connection 1 records list's success with a page added, as `finish` does, and holds its
                // transaction open until the retry waits for it.
                let addition = RunAddition(jobs: [job("page", "p")])
                _ = try await Self.holdingTransaction(store) { adder in
                    try await adder.query("SELECT id FROM jobs WHERE id = \(list) FOR UPDATE", logger: logger)
                    let now = Date().timeIntervalSince1970
                    try await PostgresJobStore.addJobs(adder, addition, by: list, now: now, logger: logger)
                    try await PostgresJobStore.finishJob(
                        adder, id: list, state: .succeeded, error: nil, output: Data("1".utf8), now: now,
                        logger: logger)
                } whileWaiting: {
                    try await store.retry(run: run.run)
                }
                let again = try await store.claim(worker: "w", kinds: ["c"], limit: 1, lease: .seconds(600))
                #expect(
                    try await store.finish([.init(lease: again[0].lease, outcome: .succeeded(output: Data("1".utf8)))])
                        == [.accepted(.succeeded)])
                #expect(
                    try await store.claim(worker: "w", kinds: ["r"], limit: 1, lease: .seconds(600)).isEmpty,
                    "the report waits for the page added while the retry waited")
                let page = try await store.claim(worker: "w", kinds: ["p"], limit: 1, lease: .seconds(600))
                #expect(page.map(\.name) == ["page"])
                _ = try await store.finish(
                    page.map { .init(lease: $0.lease, outcome: .succeeded(output: Data("1".utf8))) })
                #expect(try await store.claim(worker: "w", kinds: ["r"], limit: 1, lease: .seconds(600)).count == 1)
            }
        }
    }

    struct Fails: DurableJob {
        static let kind = "test.pg-fails-with-nul"
        struct Failure: Error, CustomStringConvertible {
            var description: String { "bad\0byte" }
        }
        func run(_ input: String, context: DurableJobContext) async throws -> String { throw Failure() }
    }

    @Test("a job failing with a NUL character in its error is recorded as failed, and the worker goes on")
    func failureMessageWithNul() async throws {
        try await TestPostgres.withStore("nulmessage") { store, _ in
            var graph = JobGraph(name: "g")
            let failing = graph.add(Fails.self, input: "x", retry: .never)
            let echo = graph.add(PostgresRoundTrip.Echo.self, input: "fine")
            let run = try await store.submit(graph)
            let worker = try DurableWorker(
                store: store, jobs: [Fails(), PostgresRoundTrip.Echo()],
                configuration: .init(id: "nul", pollInterval: .milliseconds(50)))
            try await withDeadline(.seconds(30), "the run with a NUL in a failure message") {
                let counts = try await worker.run(until: run).counts
                #expect(counts == [.succeeded: 1, .failed: 1])
            }
            #expect(try await store.record(of: run[failing]).lastError == "bad\u{FFFD}byte")
            #expect(try await store.output(of: echo, in: run) == "fine")
        }
    }

    @Test(
        "a failure cascading to 4,000 dependents and down a chain of 50 is recorded in one attempt under a short operation timeout, each dependent naming what stopped it"
    )
    func longCascadeIsNotAbandoned() async throws {
        try await withDeadline(.seconds(300), "a cascade through 4,000 dependents") {
            try await TestPostgres.withStore("cascade") { store, configuration in
                var jobs = [JobSpec(name: "root", kind: "k", input: Data("1".utf8), retry: .never)]
                func add(_ name: String, after dependencies: [JobSpec.Dependency]) {
                    jobs.append(JobSpec(name: name, kind: "k", input: Data("1".utf8), dependencies: dependencies))
                }
                for index in 0..<4_000 { add("d\(index)", after: [.init(index: 0)]) }
                // A chain below the root: a level of the cascade each.
                add("c0", after: [.init(index: 0)])
                for index in 1..<50 { add("c\(index)", after: [.init(index: jobs.count - 1)]) }
                // Runs regardless after the chain's end: made ready, not cancelled.
                add("cleanup", after: [.init(index: jobs.count - 1, runRegardless: true)])
                // Regardless of the root but not of d0: cancelled, by d0.
                add("mixed", after: [.init(index: 0, runRegardless: true), .init(index: 1)])
                let run = try await store.submit(GraphSpec(name: "fan-out", jobs: jobs), uniqueKey: nil)
                let root = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(600))
                #expect(root.map(\.name) == ["root"])
                // Every statement of the cascade is answered at once; a limit that one statement can meet
                // on a loaded machine (a single step once went unanswered for 5 s under ThreadSanitizer in
                // CI), and no time to retry in: an abandoned attempt fails the call.
                let limit: Duration =
                    ProcessInfo.processInfo.environment["BATON_SANITIZER"] == nil ? .seconds(5) : .seconds(20)
                var short = configuration
                short.operationTimeout = limit
                short.reconnectDeadline = limit
                // Opening gives up as soon, too: on a server that other tests keep busy (too many clients
                // for a moment) it is tried again, up to 60 times.
                var opened: PostgresJobStore?
                for attempt in 1...60 where opened == nil {
                    do {
                        opened = try await TestPostgres.open(configuration: short, logger: TestPostgres.logger)
                    } catch let error as DurableError where error.code == .storeFailure && attempt < 60 {}
                }
                let impatient = try #require(opened)
                defer { impatient.close() }
                let start = ContinuousClock.now
                let results = try await impatient.finish(
                    root.map { AttemptReport(lease: $0.lease, outcome: .failed(message: "no", retryable: false)) })
                #expect(results == [.accepted(.failed)])
                print("PostgreSQL cascade through 4,052 dependents: \(ContinuousClock.now - start) (limit \(limit))")
                let snapshot = try await store.snapshot(of: run.run)
                let byName = Dictionary(uniqueKeysWithValues: snapshot.jobs.map { ($0.name, $0) })
                #expect(byName["root"]?.state == .failed)
                let fanned = (0..<4_000).compactMap { byName["d\($0)"] }
                #expect(fanned.count == 4_000)
                #expect(fanned.allSatisfy { $0.state == .cancelled && $0.lastError == "dependency 'root' failed" })
                #expect(byName["c0"]?.lastError == "dependency 'root' failed")
                for index in 1..<50 {
                    #expect(byName["c\(index)"]?.state == .cancelled)
                    #expect(byName["c\(index)"]?.lastError == "dependency 'c\(index - 1)' was cancelled")
                }
                #expect(byName["cleanup"]?.state == .ready)
                #expect(byName["mixed"]?.state == .cancelled)
                #expect(byName["mixed"]?.lastError == "dependency 'd0' was cancelled")
                let summary = try await store.runs(RunFilter()).runs.first { $0.id == run.run }
                #expect(summary?.unfinished == 1, "only the cleanup is left")
                #expect(summary?.failed == 1)
                #expect(summary?.cancelled == 4_051)
            }
        }
    }
}
