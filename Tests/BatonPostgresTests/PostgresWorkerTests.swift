import Baton
import BatonDurable
import BatonTesting
import Foundation
import Logging
import NIOPosix
import PostgresNIO
import Testing

@testable import BatonPostgres

/// `DurableWorker`s on PostgreSQL as users run them: submissions from many tasks, workers whose
/// machines' clocks disagree, and a session stuck holding a category's lock.
@Suite("DurableWorker on PostgreSQL", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresWorkerTests {
    /// Counts the attempts running at once — in all, per job, and of the category — and each job's runs.
    final class Gauge: Sendable {
        struct State {
            var running = 0
            var most = 0
            var perJob: [String: Int] = [:]
            var mostPerJob = 0
            var inCategory = 0
            var mostInCategory = 0
            var runs: [String: Int] = [:]
        }
        let state = Protected(State())
        let total: Int
        let done = Gate()
        /// Attempts wait for it before they end (nil: they end at once).
        let hold: Gate?
        init(total: Int, hold: Gate? = nil) {
            self.total = total
            self.hold = hold
        }
        func enter(_ name: String, category: Bool) {
            let all = state.withLock { state in
                state.running += 1
                state.most = max(state.most, state.running)
                state.perJob[name, default: 0] += 1
                state.mostPerJob = max(state.mostPerJob, state.perJob[name]!)
                if category {
                    state.inCategory += 1
                    state.mostInCategory = max(state.mostInCategory, state.inCategory)
                }
                state.runs[name, default: 0] += 1
                return state.runs.count == total
            }
            if all { done.open() }
        }
        func leave(_ name: String, category: Bool) {
            state.withLock { state in
                state.running -= 1
                state.perJob[name, default: 0] -= 1
                if category { state.inCategory -= 1 }
            }
        }
    }

    struct Work: Codable {
        var milliseconds: Int
        var category: Bool
    }

    /// Runs for `milliseconds` (0: yields a few times), counted by the gauge.
    struct Gauged: DurableJob {
        static let kind = "test.pg-gauged"
        let gauge: Gauge
        func run(_ input: Work, context: DurableJobContext) async throws -> Int {
            gauge.enter(context.name, category: input.category)
            defer { gauge.leave(context.name, category: input.category) }
            await gauge.hold?.waitAsync()
            if input.milliseconds > 0 {
                try await Task.sleep(for: .milliseconds(input.milliseconds))
            } else {
                for _ in 0..<Int.random(in: 0...3) { await Task.yield() }
            }
            return input.milliseconds
        }
    }

    static func states(_ store: PostgresJobStore) async throws -> [String: Int] {
        var result: [String: Int] = [:]
        for row in try await store.client.query(
            "SELECT state, count(*)::int FROM \(unescaped: store.configuration.schema).jobs GROUP BY 1"
        ).collect() {
            let (state, count) = try row.decode((String, Int).self)
            result[state] = count
        }
        return result
    }

    @Test(
        "a worker on the submitting store, with submissions from many tasks at once: every job runs once, never more at once than the worker's limit"
    )
    func workerOnTheSubmittingStore() async throws {
        try await TestPostgres.withStore("worker_local") { store, _ in
            let total = 120
            let gauge = Gauge(total: total)
            let worker = try DurableWorker(
                store: store, jobs: [Gauged(gauge: gauge)],
                configuration: .init(id: "local", maxConcurrentJobs: 3, pollInterval: .seconds(30)))
            let running = Task { try await worker.run() }
            defer { running.cancel() }
            try await withDeadline(.seconds(120), "submitting \(total) one-job graphs from 4 tasks") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for part in 0..<4 {
                        group.addTask {
                            for index in stride(from: part, to: total, by: 4) {
                                var graph = JobGraph(name: "g\(index)")
                                graph.add(
                                    Gauged.self, input: Work(milliseconds: 0, category: false), name: "j\(index)",
                                    retry: .never)
                                _ = try await store.submit(graph)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await withDeadline(.seconds(120), "every job running") { await gauge.done.waitAsync() }
            // A graceful shutdown sends every report before it returns.
            worker.shutdown()
            try await withDeadline(.seconds(30), "the worker stopping") { try await running.value }
            let state = gauge.state.current
            #expect(state.most <= 3, "\(state.most) attempts ran at once, over the worker's limit of 3")
            #expect(state.runs.count == total && state.runs.values.allSatisfy { $0 == 1 }, "runs: \(state.runs)")
            #expect(try await Self.states(store) == ["succeeded": total])
        }
    }

    @Test(
        "workers whose machines' clocks differ by 10 s share leases judged by the server's clock: no job runs twice at once, no category over its limit, and an orphan is claimed again"
    )
    func clockSkew() async throws {
        try await TestPostgres.withStore("skew") { store, configuration in
            // Two stores as on two machines: one clock 5 s ahead, one 5 s behind. A store judging leases
            // by its own clock would end the other's live leases (4 s) at once and run their jobs again
            // beside the first attempt.
            let ahead = try await TestPostgres.open(
                configuration: configuration, clock: .system(offsetBy: .seconds(5)), logger: TestPostgres.logger)
            let behind = try await TestPostgres.open(
                configuration: configuration, clock: .system(offsetBy: .seconds(-5)), logger: TestPostgres.logger)
            defer {
                ahead.close()
                behind.close()
            }
            let db = DurableCategory.named("db", limit: 2)
            var graph = JobGraph(name: "skewed")
            graph.add(Gauged.self, input: Work(milliseconds: 50, category: false), name: "orphan", priority: .veryHigh)
            for index in 0..<40 {
                let category = index % 2 == 0
                graph.add(
                    Gauged.self, input: Work(milliseconds: 150, category: category), name: "j\(index)",
                    categories: category ? [db] : [])
            }
            let run = try await store.submit(graph)
            // The orphan: claimed by a worker that vanished at once (its lease ends 1 s later).
            let vanished = try await store.claim(
                worker: "vanished", kinds: [Gauged.kind], limit: 1, lease: .seconds(1))
            #expect(vanished.map(\.name) == ["orphan"])
            let gauge = Gauge(total: 41)
            func worker(_ id: String, _ store: PostgresJobStore) throws -> DurableWorker {
                try DurableWorker(
                    store: store, jobs: [Gauged(gauge: gauge)],
                    configuration: .init(
                        id: id, maxConcurrentJobs: 4, leaseDuration: .seconds(4), renewInterval: .milliseconds(500),
                        pollInterval: .milliseconds(100), retention: nil))
            }
            let first = try worker("ahead", ahead)
            let second = try worker("behind", behind)
            try await withDeadline(.seconds(120), "both workers running the skewed run to its end") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await first.run(until: run) }
                    group.addTask { try await second.run(until: run) }
                    try await group.waitForAll()
                }
            }
            let state = gauge.state.current
            #expect(state.mostPerJob == 1, "a job ran twice at once: \(state.runs.filter { $0.value > 1 })")
            #expect(state.mostInCategory <= 2, "\(state.mostInCategory) jobs held 'db' (limit 2) at once")
            #expect(state.runs.count == 41, "runs: \(state.runs)")
            let explanation = try await store.explain(run: run.id)
            #expect(explanation.counts == [.succeeded: 41])
            // (A loaded machine may make an attempt outlive its lease and run again, after it: at-least-once.)
            #expect(
                explanation["orphan"].map { $0.attempts >= 2 } == true,
                "the orphan was claimed again once its lease ended")
            #expect(explanation.clock == "the database server's clock")
        }
    }

    @Test(
        "a session that holds a category's lock stalls only the jobs of that category: the others flow, and the held ones run once it lets go"
    )
    func stuckSessionStallsOnlyItsCategory() async throws {
        try await TestPostgres.withStore("stuck") { store, configuration in
            try await Self.withStuckSession(configuration, id: 7) { stuck in
                try await Self.runWhileStuck(stuck, store: store)
            }
        }
    }

    /// Runs `body` while another client (a paused worker, a half-open connection, psql) sits in a
    /// transaction holding the lock that guards category "one"'s count; closes that client after.
    static func withStuckSession(
        _ configuration: PostgresStoreConfiguration, id: Int, _ body: (PostgresConnection) async throws -> Void
    ) async throws {
        let stuck = try await TestPostgres.connect(configuration, id: id)
        do {
            try await stuck.query("BEGIN", logger: TestPostgres.logger)
            try await stuck.query(
                "SELECT pg_advisory_xact_lock(hashtext(\(configuration.schema + ":category:one")))",
                logger: TestPostgres.logger)
            try await body(stuck)
            try await stuck.close()
        } catch {
            try? await stuck.close()
            throw error
        }
    }

    /// The body of ``stuckSessionStallsOnlyItsCategory()``, with `stuck` the other client's connection.
    static func runWhileStuck(_ stuck: PostgresConnection, store: PostgresJobStore) async throws {
        let one = DurableCategory.named("one", limit: 1)
        var graph = JobGraph(name: "stuck")
        for index in 0..<300 {
            let category = index % 30 == 0
            graph.add(
                Gauged.self, input: Work(milliseconds: 0, category: category), name: "j\(index)",
                categories: category ? [one] : [])
        }
        let run = try await store.submit(graph)
        let gauge = Gauge(total: 290)
        let worker = try DurableWorker(
            store: store, jobs: [Gauged(gauge: gauge)],
            configuration: .init(id: "w", maxConcurrentJobs: 16, pollInterval: .milliseconds(100)))
        let running = Task { try await worker.run(until: run) }
        defer { running.cancel() }
        try await withDeadline(
            .seconds(60), "the 290 jobs without category 'one' running while another session holds its lock"
        ) { await gauge.done.waitAsync() }
        let held = try await store.explain(run: run.id)
        let waiting = held.jobs.filter { Int($0.name.dropFirst())! % 30 == 0 }
        #expect(waiting.count == 10 && waiting.allSatisfy { $0.state == .ready }, "\(waiting)")
        #expect(gauge.state.current.mostInCategory == 0, "a job of 'one' ran while its lock was held")
        // The other session lets go: the held category's jobs run.
        try await stuck.query("ROLLBACK", logger: TestPostgres.logger)
        try await withDeadline(.seconds(60), "the jobs of category 'one' running once the lock is free") {
            _ = try await running.value
        }
        #expect(try await store.explain(run: run.id).counts == [.succeeded: 300])
    }

    @Test(
        "a claim with room for one passes over the jobs of a category whose lock another session holds, however many come first"
    )
    func claimPassesOverABusyCategory() async throws {
        try await TestPostgres.withStore("stuck_front") { store, configuration in
            try await Self.withStuckSession(configuration, id: 8) { stuck in
                // Twenty jobs of the held category come first (higher priority), then one without.
                let one = DurableCategory.named("one", limit: 30)
                var graph = JobGraph(name: "front")
                for index in 0..<20 {
                    graph.add(
                        Gauged.self, input: Work(milliseconds: 0, category: true), name: "held\(index)",
                        priority: .high, categories: [one])
                }
                graph.add(Gauged.self, input: Work(milliseconds: 0, category: false), name: "free")
                _ = try await store.submit(graph)
                let claimed = try await store.claim(
                    worker: "w", kinds: [Gauged.kind], limit: 1, lease: .seconds(30))
                #expect(claimed.map(\.name) == ["free"])
                #expect(try await store.claim(worker: "w", kinds: [Gauged.kind], limit: 5, lease: .seconds(30)).isEmpty)
                try await stuck.query("ROLLBACK", logger: TestPostgres.logger)
                let freed = try await store.claim(worker: "w", kinds: [Gauged.kind], limit: 25, lease: .seconds(30))
                #expect(freed.count == 20)
                #expect(freed.allSatisfy { $0.name.hasPrefix("held") }, "\(freed.map(\.name))")
            }
        }
    }

    /// Records each attempt (job name and attempt number) and tells a stream of every start.
    struct Counted: DurableJob {
        static let kind = "test.pg-cut-counted"
        let attempts: Protected<[String: [Int]]>
        let started: AsyncStream<Int>.Continuation
        func run(_ input: Int, context: DurableJobContext) async throws -> Int {
            let count = attempts.withLock { attempts in
                attempts[context.name, default: []].append(context.attempt)
                return attempts.values.reduce(0) { $0 + $1.count }
            }
            started.yield(count)
            return input
        }
    }

    @Test(
        "a worker whose store's sessions are terminated every 25 attempts: no call waits on a closed connection, every job succeeds, no attempt number is used twice"
    )
    func connectionsCutMidRun() async throws {
        try await TestPostgres.withStore("worker_cut") { observer, base in
            var configuration = base
            configuration.applicationName = "baton-cut-\(UInt32.random(in: 0...UInt32.max))"
            configuration.fallbackPollInterval = .milliseconds(50)
            // No call may wait for an answer on a closed connection: the operation timeout, which would
            // end such a wait, is longer than the test's deadline. (Before 29 Nov a statement sent on a
            // connection the server had just ended waited for it: this test hung until its deadline.)
            configuration.operationTimeout = .seconds(600)
            let store = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            defer { store.close() }
            #expect(store.reportCallsInFlight == 2)
            let total = 300
            var graph = JobGraph(name: "cut")
            for index in 0..<total {
                graph.add(Counted.self, input: index, name: "j\(index)", retry: .immediate(maxAttempts: 10))
            }
            let run = try await observer.submit(graph)
            let attempts = Protected<[String: [Int]]>([:])
            let (starts, started) = AsyncStream<Int>.makeStream()
            let worker = try DurableWorker(
                store: store, jobs: [Counted(attempts: attempts, started: started)],
                configuration: .init(
                    id: "cut", maxConcurrentJobs: 16, leaseDuration: .seconds(3), renewInterval: .seconds(1),
                    pollInterval: .milliseconds(200)))
            let name = configuration.applicationName
            // The cuts follow the attempts' starts (no timer): after every 25th, every session of the
            // worker's store is terminated, whatever call it is in.
            defer { started.finish() }  // (also when the run fails: the cuts end)
            let cutsDuringRun = Protected(0)
            let cuts = Task {
                var cuts = 0
                var next = 25
                for await count in starts where count >= next {
                    next = count + 25
                    let terminated = try await observer.client.query(
                        "SELECT count(*)::int FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = \(name)) t"
                    ).collect()[0].decode(Int.self)
                    if terminated > 0 {
                        cuts += 1
                        cutsDuringRun.withLock { $0 += 1 }
                    }
                }
                return cuts
            }
            try await withDeadline(.seconds(90), "the run finishing while its worker's connections are cut") {
                let explanation = try await worker.run(until: run)
                #expect(explanation.jobs.count == total)
            }
            let cutBeforeTheEnd = cutsDuringRun.current
            started.finish()
            _ = try await cuts.value
            #expect(cutBeforeTheEnd >= 5, "only \(cutBeforeTheEnd) cuts reached the worker's sessions during the run")
            let seen = attempts.current
            #expect(seen.count == total, "\(total - seen.count) jobs never started")
            let repeated = seen.filter { Set($0.value).count != $0.value.count }
            #expect(repeated.isEmpty, "attempt numbers used twice: \(repeated.sorted { $0.key < $1.key }.prefix(5))")
            #expect(try await Self.states(store) == ["succeeded": total])
        }
    }

    @Test("the store's sessions bound the locks a stuck client can hold, and their waits for others'")
    func sessionsHaveServerSideLimits() async throws {
        var configuration = try TestPostgres.configuration("limits")
        configuration.lockTimeout = .milliseconds(1500)
        configuration.idleInTransactionTimeout = .seconds(7)
        let store = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
        defer { store.close() }
        let rows = try await store.client.query(
            "SELECT current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout')"
        ).collect()
        let (lock, idle) = try #require(rows.first).decode((String, String).self)
        #expect(lock == "1500ms")
        #expect(idle == "7s")
        try await TestPostgres.drop(configuration.schema, using: store)
    }
}
