import Baton
import BatonDurable
import BatonTesting
import Foundation
import PostgresNIO
import Testing

@testable import BatonPostgres

/// Calls whose reply is lost after the server committed (the connection dropped at `COMMIT`): the
/// store sends them again, and so may a worker. Each test arms ``PostgresFaults`` so that the first
/// call commits and then fails as a dropped connection does; the store's own retry follows.
@Suite("PostgreSQL retried calls", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresRetryTests {
    /// a → b; a retries.
    static func graph() -> GraphSpec {
        GraphSpec(
            name: "retried",
            jobs: [
                JobSpec(name: "a", kind: "retry.k", input: Data("1".utf8), retry: .immediate(maxAttempts: 3)),
                JobSpec(name: "b", kind: "retry.k", input: Data("2".utf8), dependencies: [.init(index: 0)]),
            ])
    }

    static func claim(_ store: PostgresJobStore, _ worker: String = "w") async throws -> [ClaimedJob] {
        try await store.claim(worker: worker, kinds: ["retry.k"], limit: 10, lease: .seconds(60))
    }

    /// A success of the attempt of `lease` that adds job `name`, waiting for `existing`.
    static func success(of lease: Lease, adding name: String, after existing: DurableJobID) -> AttemptReport {
        AttemptReport(
            lease: lease, outcome: .succeeded(output: Data("1".utf8)),
            additions: RunAddition(
                jobs: [JobSpec(name: name, kind: "retry.k", input: Data("0".utf8))], after: [existing]))
    }

    static func number(_ store: PostgresJobStore, _ query: PostgresQuery) async throws -> Int {
        try await store.client.query(query).collect()[0].decode(Int.self)
    }

    @Test("a completion committed but unanswered is accepted on retry, once; its dependent is readied once")
    func finishReplyLost() async throws {
        try await TestPostgres.withStore("finishlost") { store, _ in
            let run = try await store.submit(Self.graph(), uniqueKey: nil)
            let a = try await Self.claim(store)
            #expect(a.map(\.name) == ["a"])
            let report = AttemptReport(lease: a[0].lease, outcome: .succeeded(output: Data("\"a\"".utf8)))
            store.faults.loseReply(of: "finish")
            #expect(try await store.finish([report]) == [.accepted(.succeeded)])
            // The worker's own retry of the same report: the same answer, and nothing changes.
            #expect(try await store.finish([report]) == [.accepted(.succeeded)])
            #expect(try await Self.number(store, "SELECT unfinished FROM runs WHERE id = \(run.run.rawValue)") == 1)
            #expect(try await Self.claim(store).map(\.name) == ["b"])
            #expect(try await Self.claim(store).isEmpty)
            // Not a repeat: another output under the same token.
            let other = AttemptReport(lease: a[0].lease, outcome: .succeeded(output: Data("\"other\"".utf8)))
            #expect(try await store.finish([other]) == [.rejected])
            let output = try await store.snapshot(of: run.run).jobs.first { $0.name == "a" }?.output
            #expect(output == Data("\"a\"".utf8))
        }
    }

    @Test(
        "a failure committed but unanswered is one retry, not two, and is recognised when sent again after later attempts ended"
    )
    func failureReplyLost() async throws {
        try await TestPostgres.withStore("faillost") { store, _ in
            _ = try await store.submit(Self.graph(), uniqueKey: nil)
            let first = try await Self.claim(store)[0]
            let failure = AttemptReport(lease: first.lease, outcome: .failed(message: "boom", retryable: true))
            store.faults.loseReply(of: "finish")
            #expect(try await store.finish([failure]) == [.accepted(.ready)])
            #expect(try await store.finish([failure]) == [.accepted(.ready)])
            let second = try await Self.claim(store)
            #expect(second.map(\.attempt) == [2])  // Not 3: the failure was counted once.
            let success = AttemptReport(lease: second[0].lease, outcome: .succeeded(output: Data("0".utf8)))
            #expect(try await store.finish([success]) == [.accepted(.succeeded)])
            // The first attempt's failure, sent again after the second attempt finished (a worker's retry of
            // a report whose reply was lost): answered as the first time, changing nothing.
            #expect(try await store.finish([failure]) == [.accepted(.ready)])
            #expect(try await Self.number(store, "SELECT count(*)::int FROM jobs WHERE state = 'succeeded'") == 1)
            // A different report under that token is not a repeat.
            let other = AttemptReport(lease: first.lease, outcome: .cancelled(reason: "no"))
            #expect(try await store.finish([other]) == [.rejected])
            // A different kind of report under a finished token is not a repeat either.
            let cancelled = AttemptReport(lease: second[0].lease, outcome: .cancelled(reason: "late"))
            #expect(try await store.finish([cancelled]) == [.rejected])
        }
    }

    @Test(
        "a snooze committed but unanswered is one snooze, and a snooze that ended its job cancelled is recognised after a retry"
    )
    func snoozeReplyLost() async throws {
        try await TestPostgres.withStore("snoozelost") { store, _ in
            let run = try await store.submit(Self.graph(), uniqueKey: nil)
            let first = try await Self.claim(store)[0]
            let snooze = AttemptReport(lease: first.lease, outcome: .snoozed(wait: .zero))
            store.faults.loseReply(of: "finish")
            #expect(try await store.finish([snooze]) == [.accepted(.ready)])
            #expect(try await store.finish([snooze]) == [.accepted(.ready)])
            #expect(try await Self.number(store, "SELECT max_attempts FROM jobs WHERE idx = 0") == 3 + 1)
            // Asked to cancel while it ran: its snooze ends it cancelled, and a retry of the job does not
            // make that report a stranger when it is sent again.
            let second = try await Self.claim(store)[0]
            try await store.cancel(job: second.job, reason: "stop")
            let cancelling = AttemptReport(lease: second.lease, outcome: .snoozed(wait: .seconds(5)))
            #expect(try await store.finish([cancelling]) == [.accepted(.cancelled)])
            _ = try await store.retry(run: run.run)
            #expect(try await store.finish([cancelling]) == [.accepted(.cancelled)])
        }
    }

    @Test("a success of a job asked to cancel, committed but unanswered, is cancelled once, also after a retry")
    func cancelledSuccessReplyLost() async throws {
        try await TestPostgres.withStore("cancelsuccesslost") { store, _ in
            let run = try await store.submit(Self.graph(), uniqueKey: nil)
            let first = try await Self.claim(store)[0]
            try await store.cancel(job: first.job, reason: "stop")
            let success = AttemptReport(lease: first.lease, outcome: .succeeded(output: Data("1".utf8)))
            store.faults.loseReply(of: "finish")
            #expect(try await store.finish([success]) == [.accepted(.cancelled)])
            #expect(try await store.finish([success]) == [.accepted(.cancelled)])
            #expect(try await Self.number(store, "SELECT count(*)::int FROM attempts WHERE outcome = 'cancelled'") == 1)
            _ = try await store.retry(run: run.run)
            #expect(try await store.finish([success]) == [.accepted(.cancelled)])
            // Through the call that reports and claims in one trip, too.
            let (results, _) = try await store.finish(
                [success], thenClaim: 1, worker: "w", kinds: ["retry.k"], lease: .seconds(30))
            #expect(results == [.accepted(.cancelled)])
        }
    }

    @Test("a success whose added jobs were refused, committed but unanswered, is answered as failed again")
    func refusedAdditionsReplyLost() async throws {
        try await TestPostgres.withStore("refusedlost") { store, _ in
            let run = try await store.submit(Self.graph(), uniqueKey: nil)
            let a = try await Self.claim(store)[0]
            // Waiting for its own dependent makes a cycle: the store refuses the addition and fails `a`.
            let report = Self.success(of: a.lease, adding: "x", after: run.jobs[1])
            store.faults.loseReply(of: "finish")
            #expect(try await store.finish([report]) == [.accepted(.failed)])
            #expect(try await store.finish([report]) == [.accepted(.failed)])
            #expect(try await Self.number(store, "SELECT count(*)::int FROM jobs") == 2)
            #expect(try await Self.number(store, "SELECT count(*)::int FROM jobs WHERE state = 'failed'") == 1)
        }
    }

    @Test("a success whose added jobs conflict with a running job, committed but unanswered, is one retry, not two")
    func conflictingAdditionsReplyLost() async throws {
        try await TestPostgres.withStore("conflictlost") { store, _ in
            var graph = Self.graph()
            graph.jobs[1].dependencies = []  // b runs beside a
            let run = try await store.submit(graph, uniqueKey: nil)
            let claimed = try await Self.claim(store)
            let a = try #require(claimed.first { $0.name == "a" })
            let report = Self.success(of: a.lease, adding: "x", after: run.jobs[1])
            store.faults.loseReply(of: "finish")
            #expect(try await store.finish([report]) == [.accepted(.ready)])
            #expect(try await store.finish([report]) == [.accepted(.ready)])
            #expect(try await Self.number(store, "SELECT count(*)::int FROM jobs") == 2, "nothing added")
            #expect(try await store.attempts(of: run.jobs[0]).map(\.outcome) == [.failed], "one failed attempt")
            let second = try await Self.claim(store)
            #expect(second.map(\.attempt) == [2], "tried again as attempt 2, not 3")
            // Sent again after the second attempt ended (a worker's retry of a report whose reply was lost):
            // answered as the first time, changing nothing.
            let done = AttemptReport(lease: second[0].lease, outcome: .succeeded(output: Data("2".utf8)))
            #expect(try await store.finish([done]) == [.accepted(.succeeded)])
            #expect(try await store.finish([report]) == [.accepted(.ready)])
            #expect(try await store.attempts(of: run.jobs[0]).map(\.outcome) == [.failed, .succeeded])
        }
    }

    @Test("an addition of 10,000 jobs with their edges and categories commits within a short operation timeout")
    func largeAddition() async throws {
        try await withDeadline(.seconds(300), "an addition of 10,000 jobs") {
            try await TestPostgres.withStore("largeadd") { store, configuration in
                let run = try await store.submit(Self.graph(), uniqueKey: nil)
                let a = try await Self.claim(store)[0]
                var jobs: [JobSpec] = []
                for index in 0..<10_000 {
                    jobs.append(
                        JobSpec(
                            name: "page", kind: "retry.k", input: Data("0".utf8),
                            dependencies: index == 0 ? [] : [.init(index: index - 1)],
                            categories: [.named("site", limit: 4)]))
                }
                // A limit one statement can meet on a loaded machine, with no time for 30,000 of them.
                var short = configuration
                short.operationTimeout =
                    ProcessInfo.processInfo.environment["BATON_SANITIZER"] == nil ? .seconds(5) : .seconds(20)
                let impatient = try await TestPostgres.open(configuration: short, logger: TestPostgres.logger)
                defer { impatient.close() }
                let start = ContinuousClock.now
                let report = AttemptReport(
                    lease: a.lease, outcome: .succeeded(output: Data("1".utf8)), additions: RunAddition(jobs: jobs))
                #expect(try await impatient.finish([report]) == [.accepted(.succeeded)])
                print("PostgreSQL addition of 10,000 jobs: \(ContinuousClock.now - start)")
                #expect(
                    try await Self.number(store, "SELECT count(*)::int FROM jobs WHERE added_by IS NOT NULL") == 10_000)
                // a → b, and the chain of 9,999.
                #expect(try await Self.number(store, "SELECT count(*)::int FROM edges") == 10_000)
                #expect(try await Self.number(store, "SELECT count(*)::int FROM job_categories") == 10_000)
                let names = try await store.snapshot(of: run.run).jobs.map(\.name)
                #expect(Set(names).count == 10_002, "unique names")
                #expect(names.last == "page #10000")
            }
        }
    }

    @Test("a transaction of many answered statements outlasts the operation timeout in one try")
    func answeredStatementsAreProgress() async throws {
        try await withDeadline(.seconds(120), "a transaction of eight slow statements") {
            try await TestPostgres.withStore("progress") { _, configuration in
                // Each statement is answered well within the limit; all eight together take twice as long.
                // The limit bounds one unanswered request: an addition of 10,000 jobs whose statements
                // did not count as progress was abandoned and rolled back on a loaded machine, and each
                // retry, as slow, was abandoned in turn until the store gave up (CI, stop 45).
                var short = configuration
                short.operationTimeout = .seconds(2)
                short.reconnectDeadline = .seconds(10)
                let impatient = try await TestPostgres.open(configuration: short, logger: TestPostgres.logger)
                defer { impatient.close() }
                let tries = Protected(0)
                let answered = try await impatient.transaction("slow") { connection in
                    tries.withLock { $0 += 1 }
                    var answered = 0
                    for _ in 0..<8 {
                        try await connection.liveQuery("SELECT pg_sleep(0.5)", logger: TestPostgres.logger)
                        answered += 1
                    }
                    return answered
                }
                #expect(answered == 8)
                #expect(tries.withLock { $0 } == 1, "not abandoned and tried again")
            }
        }
    }

    @Test("a submission committed but unanswered is retried into the same run, not a second one")
    func submitReplyLost() async throws {
        try await TestPostgres.withStore("submitlost") { store, _ in
            store.faults.loseReply(of: "submit")
            let submitted = try await store.submit(Self.graph(), uniqueKey: nil)
            #expect(submitted.existing == false)
            #expect(submitted.jobs.count == 2)
            #expect(try await Self.number(store, "SELECT count(*)::int FROM runs") == 1)
            #expect(try await Self.number(store, "SELECT count(*)::int FROM jobs") == 2)
            // With a unique key too; a later submission with that key finds the run as existing.
            store.faults.loseReply(of: "submit")
            let keyed = try await store.submit(Self.graph(), uniqueKey: "nightly")
            #expect(keyed.existing == false)
            let again = try await store.submit(Self.graph(), uniqueKey: "nightly")
            #expect(again.existing == true)
            #expect(again.run == keyed.run)
            #expect(try await Self.number(store, "SELECT count(*)::int FROM runs") == 2)
            // The same submission identity sent twice (a caller's own retry) stores one run.
            let first = try await store.submit(Self.graph(), uniqueKey: nil, submission: "caller-1")
            let second = try await store.submit(Self.graph(), uniqueKey: nil, submission: "caller-1")
            #expect(first.run == second.run)
            #expect(first.jobs == second.jobs)
            #expect(try await Self.number(store, "SELECT count(*)::int FROM runs") == 3)
        }
    }

    @Test("claims hand out distinct random tokens")
    func claimTokens() async throws {
        try await TestPostgres.withStore("tokens") { store, _ in
            var graph = GraphSpec(name: "many")
            for index in 0..<50 {
                graph.jobs.append(JobSpec(name: "j\(index)", kind: "retry.k", input: Data("0".utf8)))
            }
            _ = try await store.submit(graph, uniqueKey: nil)
            let claimed = try await store.claim(worker: "w", kinds: ["retry.k"], limit: 50, lease: .seconds(60))
            #expect(claimed.count == 50)
            #expect(Set(claimed.map(\.lease.token)).count == 50)
            #expect(claimed.allSatisfy { $0.lease.token > 0 })
        }
    }
}
