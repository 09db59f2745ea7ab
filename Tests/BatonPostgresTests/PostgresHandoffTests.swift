import Baton
import BatonDurable
import BatonTesting
import Foundation
import JobStoreConformance
import PostgresNIO
import Testing

@testable import BatonPostgres

/// The book-keeping of hand-overs (``PostgresHandoff``), without a server.
@Suite("PostgreSQL hand-over book-keeping")
struct PostgresHandoffBookTests {
    static func claimed(_ job: Int64, kind: String = "k") -> ClaimedJob {
        ClaimedJob(
            lease: Lease(job: DurableJobID(job), token: job), run: DurableRunID(1), name: "j\(job)", kind: kind,
            input: Data(), attempt: 1, maxAttempts: 1, priority: 0, timeout: nil, leaseExpires: Date())
    }

    @Test("an offer is bounded by its room and its kinds, and fills higher priority first, then older first")
    func offerBounds() throws {
        let book = PostgresHandoff()
        #expect(book.reserve(kinds: ["k"], priorities: [0], eligible: [true]) == nil, "no offer, no ticket")
        book.park("w", kinds: ["k"], limit: 2, lease: .seconds(10))
        let ticket = try #require(
            book.reserve(
                kinds: ["k", "other", "k", "k", "k"], priorities: [1, 9, 1, 5, 9],
                eligible: [true, true, true, true, false]))
        // Index 4 is not due and index 1 is of another kind: the two best remaining are 3 (priority 5), then 0.
        #expect(ticket.workers.keys.sorted() == [0, 3])
        for hand in ticket.workers.values {
            #expect(hand.worker == "w" && hand.lease == .seconds(10) && hand.token > 0)
        }
        let values = ticket.values(count: 5, now: 100)
        #expect(values.owners == ["w", "", "", "w", ""])
        #expect(values.expiries == [110, 0, 0, 110, 0], "leases count from the time the insert is sent")
        #expect(values.tokens[0] != values.tokens[3] && values.tokens[1] == 0)
        #expect(book.offer(of: "w") == nil, "the room is used up")
        #expect(book.reserve(kinds: ["k"], priorities: [0], eligible: [true]) == nil)
    }

    @Test("a claim withdraws the offer and leaves room for jobs on their way; a ticket settles once")
    func claimWithdraws() throws {
        let book = PostgresHandoff()
        book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10))
        let ticket = try #require(book.reserve(kinds: ["k"], priorities: [0], eligible: [true]))
        #expect(book.offer(of: "w") == 2)
        let early = book.take(for: "w", limit: 3)
        #expect(early.jobs.isEmpty)
        #expect(early.room == 2, "the reserved job is on its way: room for 2 of the 3")
        #expect(book.offer(of: "w") == nil, "a claim withdraws the offer")
        #expect(book.reserve(kinds: ["k"], priorities: [0], eligible: [true]) == nil)
        #expect(book.deliver(ticket, [("w", Self.claimed(7))]).isEmpty)
        #expect(book.deliver(ticket, [("w", Self.claimed(7))]).isEmpty, "a second delivery does nothing")
        #expect(!book.cancel(ticket), "a delivered ticket has nothing left to cancel")
        let late = book.take(for: "w", limit: 3)
        #expect(late.jobs.map(\.job) == [DurableJobID(7)], "delivered once")
        #expect(late.room == 2)
    }

    @Test("an offer counts the jobs already on their way to the worker, or waiting for it, against its room")
    func offerCountsPending() throws {
        let book = PostgresHandoff()
        book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10))
        let ticket = try #require(book.reserve(kinds: ["k"], priorities: [0], eligible: [true]))
        _ = book.take(for: "w", limit: 3)
        book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10))
        #expect(book.offer(of: "w") == 2, "one job is on its way")
        _ = book.deliver(ticket, [("w", Self.claimed(1))])
        book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10))
        #expect(book.offer(of: "w") == 2, "one job waits for the worker's claim")
        book.park("w", kinds: ["k"], limit: 1, lease: .seconds(10))
        #expect(book.offer(of: "w") == nil, "no room beside the waiting job")
        let taken = book.take(for: "w", limit: 3)
        #expect(taken.jobs.count == 1 && taken.room == 2)
    }

    @Test("a submission's tries hand over once: a try sent after the hand-over stores its jobs ready")
    func progressHandsOverOnce() {
        let progress = HandoverProgress()
        #expect(progress.delivering() == nil, "nothing was sent")
        #expect(progress.sending(at: 5) == 5)
        #expect(progress.sending(at: 7) == 7, "a retry before the hand-over claims again, leases from its own time")
        #expect(progress.delivering() == 5, "the hand-over's leases count from the earliest try")
        #expect(progress.sending(at: 9) == nil, "after the hand-over, a retry claims nothing")
        #expect(progress.delivering() == nil)
    }

    @Test("a claim takes no more than its limit; what a retired worker had, or receives later, is given back")
    func retire() throws {
        let book = PostgresHandoff()
        book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10))
        let first = try #require(
            book.reserve(kinds: ["k", "k"], priorities: [0, 0], eligible: [true, true]))
        let second = try #require(book.reserve(kinds: ["k"], priorities: [0], eligible: [true]))
        _ = book.deliver(first, [("w", Self.claimed(1)), ("w", Self.claimed(2))])
        #expect(book.take(for: "w", limit: 1).jobs.map(\.job) == [DurableJobID(1)])
        #expect(book.withdraw("w") == 2, "one job waits for the worker, one is on its way")
        #expect(book.retire("w").map(\.job) == [DurableJobID(2)], "the job not taken is given back")
        #expect(book.deliver(second, [("w", Self.claimed(3))]).map(\.job) == [DurableJobID(3)])
        #expect(book.take(for: "w", limit: 5).jobs.isEmpty)
        // Parking again brings the worker back.
        book.park("w", kinds: ["k"], limit: 1, lease: .seconds(10))
        let third = try #require(book.reserve(kinds: ["k"], priorities: [0], eligible: [true]))
        #expect(book.deliver(third, [("w", Self.claimed(4))]).isEmpty)
    }
}

/// Submissions through a store claim their jobs for the store's idle workers in the inserting statement.
@Suite("PostgreSQL hand-over", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresHandoffTests {
    static func graph(_ name: String, _ jobs: [(kind: String, priority: Int, due: Bool)]) -> GraphSpec {
        GraphSpec(
            name: name,
            jobs: jobs.enumerated().map { index, job in
                JobSpec(
                    name: "j\(index)", kind: job.kind, input: Data("\(index)".utf8), priority: job.priority,
                    retry: .immediate(maxAttempts: 2), timeout: .seconds(30),
                    notBefore: job.due ? nil : Date().addingTimeInterval(3600))
            })
    }

    static func rows(
        _ store: PostgresJobStore, run: DurableRunID
    ) async throws -> [String: (String, Int, String?, Int64?)] {
        var result: [String: (String, Int, String?, Int64?)] = [:]
        for try await (name, state, attempts, owner, token) in try await store.client.query(
            "SELECT name, state, attempts, lease_owner, lease_token FROM \(unescaped: store.configuration.schema).jobs WHERE run = \(run.rawValue)"
        ).decode((String, String, Int, String?, Int64?).self) {
            result[name] = (state, attempts, owner, token)
        }
        return result
    }

    @Test(
        "the insert claims due jobs of the offered kinds for an idle worker, within its room, and its next claim returns them as claimed"
    )
    func handsOverInTheInsert() async throws {
        try await TestPostgres.withStore("handover") { store, _ in
            store.parkClaim(worker: "w", kinds: ["k"], limit: 2, lease: .seconds(30))
            let graph = Self.graph(
                "four", [("k", 1, true), ("other", 9, true), ("k", 5, true), ("k", 3, true), ("k", 9, false)])
            let run = try await store.submit(graph, uniqueKey: nil)
            let rows = try await Self.rows(store, run: run.run)
            // j2 (priority 5) and j3 (3) are handed over; j0 has the room of none, j1 is of another kind,
            // j4 is not due.
            #expect(rows["j2"]?.0 == "running" && rows["j2"]?.1 == 1 && rows["j2"]?.2 == "w")
            #expect(rows["j3"]?.0 == "running" && rows["j3"]?.2 == "w")
            for name in ["j0", "j1", "j4"] {
                #expect(rows[name]?.0 == "ready" && rows[name]?.1 == 0 && rows[name]?.2 == nil, "\(name)")
            }
            #expect(store.handoff.offer(of: "w") == nil)

            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 5, lease: .seconds(30))
            #expect(claimed.map(\.name) == ["j2", "j3"], "the handed-over jobs alone, higher priority first")
            for job in claimed {
                #expect(job.lease.token == rows[job.name]?.3, "the token stored with the job")
                #expect(job.attempt == 1 && job.maxAttempts == 2 && job.kind == "k")
                #expect(job.timeout == .seconds(30))
                #expect(job.input == Data(job.name.dropFirst().utf8))
            }
            // Their leases are the store's like any claim's: renewed, and completed once.
            let renewed = try await store.renew(claimed.map(\.lease), worker: "w", lease: .seconds(30))
            #expect(
                renewed.allSatisfy {
                    if case .renewed = $0 { return true }
                    return false
                }, "\(renewed)")
            let reports = claimed.map { AttemptReport(lease: $0.lease, outcome: .succeeded(output: Data("1".utf8))) }
            #expect(try await store.finish(reports) == [.accepted(.succeeded), .accepted(.succeeded)])
            let forged = claimed.map {
                AttemptReport(
                    lease: Lease(job: $0.job, token: $0.lease.token + 1), outcome: .succeeded(output: Data("2".utf8)))
            }
            #expect(try await store.finish(forged) == [.rejected, .rejected], "another token is refused")
            // The next claim takes the ready one the usual way.
            let next = try await store.claim(worker: "w", kinds: ["k"], limit: 5, lease: .seconds(30))
            #expect(next.map(\.name) == ["j0"])
        }
    }

    @Test("a claim withdraws the offer: the next submission's jobs are inserted ready, for any worker")
    func claimWithdrawsTheOffer() async throws {
        try await TestPostgres.withStore("handover_withdrawn") { store, _ in
            store.parkClaim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30))
            #expect(try await store.claim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30)).isEmpty)
            let run = try await store.submit(Self.graph("one", [("k", 0, true)]), uniqueKey: nil)
            #expect(try await Self.rows(store, run: run.run)["j0"]?.0 == "ready")
            let other = try await store.claim(worker: "other", kinds: ["k"], limit: 4, lease: .seconds(30))
            #expect(other.map(\.name) == ["j0"])
        }
    }

    @Test(
        "a claim leaves room for the jobs a submission in flight is handing over: the worker never holds more than it offered"
    )
    func roomForJobsOnTheirWay() async throws {
        try await TestPostgres.withStore("handover_coming") { store, _ in
            let ready = try await store.submit(Self.graph("ready", [("k", 0, true)]), uniqueKey: nil)
            store.parkClaim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
            // A submission's insert in flight (reserved, not yet answered).
            let ticket = try #require(store.handoff.reserve(kinds: ["k"], priorities: [0], eligible: [true]))
            #expect(try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30)).isEmpty)
            #expect(try await Self.rows(store, run: ready.run)["j0"]?.0 == "ready", "the claim took no job")
            let more = try await store.claim(worker: "w", kinds: ["k"], limit: 2, lease: .seconds(30))
            #expect(more.map(\.name) == ["j0"], "room for one beside the job on its way")
            store.handoff.cancel(ticket)
        }
    }

    @Test("a worker's completion-and-claim returns the jobs handed to it first, and claims only the room left")
    func finishThenClaimTakesHandedJobs() async throws {
        try await TestPostgres.withStore("handover_finish") { store, _ in
            _ = try await store.submit(Self.graph("first", [("k", 0, true)]), uniqueKey: nil)
            let first = try await store.claim(worker: "w", kinds: ["k"], limit: 3, lease: .seconds(30))
            try #require(first.count == 1)
            let waiting = try await store.submit(Self.graph("waiting", [("k", 0, true)]), uniqueKey: nil)
            // One attempt running, room for two more: the next submission's two jobs are handed over.
            store.parkClaim(worker: "w", kinds: ["k"], limit: 2, lease: .seconds(30))
            let handed = try await store.submit(Self.graph("handed", [("k", 0, true), ("k", 0, true)]), uniqueKey: nil)
            let done = AttemptReport(lease: first[0].lease, outcome: .succeeded(output: Data("1".utf8)))
            let (results, claimed) = try await store.finish(
                [done], thenClaim: 2, worker: "w", kinds: ["k"], lease: .seconds(30))
            #expect(results == [.accepted(.succeeded)])
            #expect(Set(claimed.map(\.job)) == Set(handed.jobs), "the handed-over jobs, and nothing beyond the room")
            #expect(try await Self.rows(store, run: waiting.run)["j0"]?.0 == "ready")
            // With room left over, the same call claims the ready job too.
            let next = AttemptReport(lease: claimed[0].lease, outcome: .succeeded(output: Data("1".utf8)))
            let (_, more) = try await store.finish([next], thenClaim: 2, worker: "w", kinds: ["k"], lease: .seconds(30))
            #expect(more.map(\.job) == waiting.jobs)
        }
    }

    @Test(
        "jobs handed over to a worker whose process dies before it takes them are orphans like any claimed job: claimed again when their leases expire"
    )
    func handedJobsOfADeadProcess() async throws {
        try await TestPostgres.withStore("handover_dead") { observer, configuration in
            let clock = ManualDurableClock()
            let dying = try await PostgresJobStore(
                configuration: configuration, clock: clock.clock, logger: TestPostgres.logger)
            dying.parkClaim(worker: "w", kinds: ["k"], limit: 2, lease: .seconds(10))
            let run = try await dying.submit(Self.graph("orphans", [("k", 0, true)]), uniqueKey: nil)
            #expect(try await Self.rows(observer, run: run.run)["j0"]?.2 == "w")
            dying.close()  // the process is gone: the handed-over job was never taken

            let survivor = try await PostgresJobStore(
                configuration: configuration, clock: clock.clock, logger: TestPostgres.logger)
            defer { survivor.close() }
            #expect(try await survivor.claim(worker: "v", kinds: ["k"], limit: 2, lease: .seconds(10)).isEmpty)
            clock.advance(by: .seconds(11))
            let again = try await survivor.claim(worker: "v", kinds: ["k"], limit: 2, lease: .seconds(10))
            #expect(again.map(\.job) == run.jobs)
            #expect(again.map(\.attempt) == [2], "the handed-over claim counted as an attempt, as a lost claim does")
        }
    }

    @Test(
        "a worker that stops (withdraws its offer for good, or unregisters) gives back the jobs handed to it and not taken, and gets no more",
        arguments: [false, true])
    func stoppingGivesBack(unregisters: Bool) async throws {
        try await TestPostgres.withStore("handover_retired") { store, _ in
            store.parkClaim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30))
            let run = try await store.submit(Self.graph("two", [("k", 0, true), ("k", 0, true)]), uniqueKey: nil)
            #expect(try await Self.rows(store, run: run.run).values.allSatisfy { $0.0 == "running" })
            if unregisters {
                try await store.unregister(worker: "w")
            } else {
                await store.withdrawClaim(worker: "w")
            }
            let rows = try await Self.rows(store, run: run.run)
            #expect(rows.values.allSatisfy { $0.0 == "ready" && $0.1 == 0 && $0.2 == nil }, "\(rows)")
            let later = try await store.submit(Self.graph("later", [("k", 0, true)]), uniqueKey: nil)
            #expect(try await Self.rows(store, run: later.run)["j0"]?.0 == "ready")
            let claimed = try await store.claim(worker: "other", kinds: ["k"], limit: 5, lease: .seconds(30))
            #expect(claimed.count == 3)
            #expect(claimed.allSatisfy { $0.attempt == 1 })
        }
    }

    @Test(
        "the insert's reply is lost after its commit, or the flush's: the run is stored once, and its job handed over once",
        arguments: ["submit insert", "submit"])
    func lostReply(fault: String) async throws {
        try await TestPostgres.withStore("handover_lost") { store, _ in
            store.parkClaim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30))
            store.faults.loseReply(of: fault)
            let run = try await store.submit(Self.graph("lost", [("k", 0, true)]), uniqueKey: nil)
            let count = try await store.client.query(
                "SELECT count(*)::int FROM \(unescaped: store.configuration.schema).runs"
            ).collect().first?.decode(Int.self)
            #expect(count == 1)
            let rows = try await Self.rows(store, run: run.run)
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30))
            #expect(claimed.map(\.name) == ["j0"])
            #expect(claimed.first?.lease.token == rows["j0"]?.3)
            #expect(try await store.claim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30)).isEmpty)
        }
    }

    /// Counts the attempts running at once, and each input's runs; opens `done` at the `total`th run.
    final class Gauge: Sendable {
        let state = Protected((running: 0, most: 0, runs: [Int: Int]()))
        let total: Int
        let done = Gate()
        /// Attempts wait for it before they end (nil: they end at once).
        let hold: Gate?
        init(total: Int, hold: Gate? = nil) {
            self.total = total
            self.hold = hold
        }
        var running: Int { state.withLock { $0.running } }
        func enter(_ input: Int) {
            let all = state.withLock { state in
                state.running += 1
                state.most = max(state.most, state.running)
                state.runs[input, default: 0] += 1
                return state.runs.count == total
            }
            if all { done.open() }
        }
        func leave() { state.withLock { $0.running -= 1 } }
    }

    struct Gauged: DurableJob {
        static let kind = "test.pg-gauged"
        let gauge: Gauge
        func run(_ input: Int, context: DurableJobContext) async throws -> Int {
            gauge.enter(input)
            defer { gauge.leave() }
            await gauge.hold?.waitAsync()
            for _ in 0..<Int.random(in: 0...3) { await Task.yield() }
            return input
        }
    }

    @Test(
        "a worker on the submitting store, with submissions from many tasks at once: every job runs once, never more at once than the worker's limit"
    )
    func workerOnTheSubmittingStore() async throws {
        try await TestPostgres.withStore("handover_worker") { store, _ in
            let total = 120
            let gauge = Gauge(total: total)
            let worker = try DurableWorker(
                store: store, jobs: [Gauged(gauge: gauge)],
                configuration: .init(id: "local", maxConcurrentJobs: 3, pollInterval: .seconds(30)))
            let running = Task { try await worker.run() }
            defer { running.cancel() }
            let offered = await eventually(within: .seconds(30)) { store.handoff.offer(of: "local") != nil }
            try #require(offered, "the idle worker did not offer its room within 30 s")
            try await withDeadline(.seconds(120), "submitting \(total) one-job graphs from 4 tasks") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for part in 0..<4 {
                        group.addTask {
                            for index in stride(from: part, to: total, by: 4) {
                                var graph = JobGraph(name: "g\(index)")
                                graph.add(Gauged.self, input: index, retry: .never)
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
            let (most, counts) = gauge.state.withLock { ($0.most, $0.runs) }
            #expect(most <= 3, "\(most) attempts ran at once, over the worker's limit of 3")
            #expect(counts.count == total && counts.values.allSatisfy { $0 == 1 }, "runs per job: \(counts)")
            let states = try await store.client.query(
                "SELECT state, attempts, count(*)::int FROM \(unescaped: store.configuration.schema).jobs GROUP BY 1, 2"
            ).collect().map { try $0.decode((String, Int, Int).self) }
            #expect(states.count == 1 && states.first?.0 == "succeeded" && states.first?.1 == 1, "\(states)")
            #expect(states.first?.2 == total)
        }
    }

    @Test("an idle worker with attempts running offers only the room they leave, and never runs more than its limit")
    func offersItsFreeRoom() async throws {
        try await TestPostgres.withStore("handover_room") { store, _ in
            let hold = Gate()
            let gauge = Gauge(total: 6, hold: hold)
            let worker = try DurableWorker(
                store: store, jobs: [Gauged(gauge: gauge)],
                configuration: .init(id: "local", maxConcurrentJobs: 3, pollInterval: .seconds(30)))
            let running = Task { try await worker.run() }
            defer {
                hold.open()
                running.cancel()
            }
            func submit(_ index: Int) async throws {
                var graph = JobGraph(name: "g\(index)")
                graph.add(Gauged.self, input: index, retry: .never)
                _ = try await store.submit(graph)
            }
            try #require(
                await eventually(within: .seconds(30)) { store.handoff.offer(of: "local") == 3 },
                "the idle worker did not offer its 3 slots")
            try await submit(0)
            try #require(await eventually(within: .seconds(30)) { gauge.running == 1 }, "the first job did not start")
            try #require(
                await eventually(within: .seconds(30)) { store.handoff.offer(of: "local") == 2 },
                "with one attempt running, the worker should offer 2 slots; it offers \(String(describing: store.handoff.offer(of: "local")))"
            )
            for index in 1..<6 { try await submit(index) }
            try #require(
                await eventually(within: .seconds(30)) { gauge.running == 3 }, "the worker did not fill its 3 slots")
            let states = try await store.client.query(
                "SELECT state, count(*)::int FROM \(unescaped: store.configuration.schema).jobs GROUP BY 1 ORDER BY 1"
            ).collect().map { try $0.decode((String, Int).self) }
            #expect(states.map(\.0) == ["ready", "running"] && states.map(\.1) == [3, 3], "\(states)")
            hold.open()
            try await withDeadline(.seconds(60), "every job running") { await gauge.done.waitAsync() }
            worker.shutdown()
            try await withDeadline(.seconds(30), "the worker stopping") { try await running.value }
            let (most, counts) = gauge.state.withLock { ($0.most, $0.runs) }
            #expect(most == 3, "\(most) attempts ran at once; the worker's limit is 3")
            #expect(counts.count == 6 && counts.values.allSatisfy { $0 == 1 }, "runs per job: \(counts)")
        }
    }
}
