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

    @Test("an offer is the room less the jobs waiting for the worker; none is written without room unless one is open")
    func offerCountsWaiting() throws {
        let book = PostgresHandoff()
        #expect(book.park("w", kinds: ["k"], limit: 0, lease: .seconds(10)) == nil, "no room, nothing open")
        let first = try #require(book.park("w", kinds: ["k", "k", "a"], limit: 3, lease: .seconds(10)))
        #expect(first.room == 3 && first.kinds == ["a", "k"] && first.worker == "w" && first.received == 0)
        let key = try #require(book.key(of: "w"))
        #expect(first.key == key)
        #expect(book.receive(key: key, jobs: [Self.claimed(1)]) == [], "taken in")
        let second = try #require(book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10)))
        #expect(second.room == 2, "one job waits for the worker")
        #expect(second.received == 1 && second.sequence > first.sequence && second.key == key)
        let closing = try #require(book.park("w", kinds: ["k"], limit: 1, lease: .seconds(10)))
        #expect(closing.room == 0, "an open offer is written again with no room")
    }

    @Test("a claim withdraws an open offer once; a failed withdrawal leaves it open for the next claim")
    func claimWithdraws() throws {
        let book = PostgresHandoff()
        #expect(book.take(for: "w", limit: 4).withdrawal == nil, "nothing offered")
        let offer = try #require(book.park("w", kinds: ["k"], limit: 2, lease: .seconds(10)))
        let first = try #require(book.take(for: "w", limit: 4).withdrawal)
        #expect(first.key == offer.key && first.sequence > offer.sequence && first.received == 0)
        #expect(book.take(for: "w", limit: 4).withdrawal == nil, "withdrawn already")
        book.withdrawalFailed(first, worker: "w")
        let again = try #require(book.take(for: "w", limit: 4).withdrawal)
        #expect(again.sequence > first.sequence)
    }

    @Test("hand-overs arrive in their worker's inbox, counted; a claim takes no more than its limit, higher priority first")
    func receiveAndTake() throws {
        let book = PostgresHandoff()
        #expect(book.receive(key: "elsewhere", jobs: [Self.claimed(9)]) == nil, "another store's offer")
        _ = try #require(book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10)))
        let key = try #require(book.key(of: "w"))
        #expect(book.owns(key: Substring(key)) && !book.owns(key: "elsewhere"))
        var low = Self.claimed(1)
        low = ClaimedJob(
            lease: low.lease, run: low.run, name: low.name, kind: low.kind, input: low.input, attempt: 1,
            maxAttempts: 1, priority: -1, timeout: nil, leaseExpires: low.leaseExpires)
        #expect(book.receive(key: key, jobs: [low, Self.claimed(2), Self.claimed(3)]) == [])
        #expect(book.waiting(for: "w") == 3)
        let taken = book.take(for: "w", limit: 2)
        #expect(taken.jobs.map(\.job) == [DurableJobID(2), DurableJobID(3)], "priority 0 before -1, older first")
        #expect(book.take(for: "w", limit: 5).jobs.map(\.job) == [DurableJobID(1)])
        let next = try #require(book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10)))
        #expect(next.received == 3, "what arrived is counted, taken or not")
    }

    @Test("a retired worker's waiting jobs are given back, and so is what arrives for it later; parking again starts a new key")
    func retire() throws {
        let book = PostgresHandoff()
        _ = try #require(book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10)))
        let key = try #require(book.key(of: "w"))
        #expect(book.receive(key: key, jobs: [Self.claimed(1)]) == [])
        let retired = book.retire("w")
        #expect(retired.key == key && retired.jobs.map(\.job) == [DurableJobID(1)])
        #expect(book.receive(key: key, jobs: [Self.claimed(2)])?.map(\.job) == [DurableJobID(2)], "given back")
        #expect(book.take(for: "w", limit: 5).jobs.isEmpty && book.take(for: "w", limit: 5).withdrawal == nil)
        let fresh = try #require(book.park("w", kinds: ["k"], limit: 3, lease: .seconds(10)))
        #expect(fresh.key != key && fresh.received == 0)
        #expect(book.receive(key: key, jobs: [Self.claimed(3)])?.count == 1, "the old key stays retired")
    }

    @Test("a hand-over's notification is read back as the claims it carries; anything else is not one")
    func notes() throws {
        #expect(HandoverNote.key(of: "") == nil && HandoverNote.key(of: "hkey") == nil)
        #expect(HandoverNote.key(of: "habc {}") == "abc")
        let payload =
            #"habc {"e" : 1795691963.5, "r" : 7, "j" : [[11, 4611686018427387903, "n\"ame", "k", "aGk=\n", 3, -2, 1.5], [12, 5, "m", "k", null, 1, 0, null]]}"#
        let jobs = try HandoverNote.jobs(of: payload)
        #expect(jobs.count == 2)
        #expect(jobs[0].lease == Lease(job: DurableJobID(11), token: 4_611_686_018_427_387_903))
        #expect(jobs[0].name == "n\"ame" && jobs[0].input == Data("hi".utf8) && jobs[0].maxAttempts == 3)
        #expect(jobs[0].priority == -2 && jobs[0].timeout == .seconds(1.5) && jobs[0].attempt == 1)
        #expect(jobs[0].run == DurableRunID(7) && jobs[0].leaseExpires == Date(storeTime: 1_795_691_963.5))
        #expect(jobs[1].input.isEmpty && jobs[1].timeout == nil)
        #expect(throws: (any Error).self) { try HandoverNote.jobs(of: #"habc {"e" : 1, "r" : 1, "j" : [[1]]}"#) }
    }
}

/// Submissions, through any store, claim their jobs for idle workers that offered room in the inserting
/// statement, and send the claims to the offering store in their notification.
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

    /// `worker`'s offer as the table has it: (room, handed), nil without a row.
    static func offer(_ store: PostgresJobStore, _ worker: String) async throws -> (room: Int, handed: Int)? {
        guard let key = store.handoff.key(of: worker) else { return nil }
        return try await store.client.query(
            "SELECT room, handed::int FROM \(unescaped: store.configuration.schema).offers WHERE key = \(key)"
        ).collect().first?.decode((Int, Int).self)
    }

    /// Offers `worker`'s room, once the store listens, and returns once the offer is written.
    static func park(_ store: PostgresJobStore, _ worker: String, limit: Int, lease: Duration = .seconds(30)) async throws {
        try #require(await eventually(within: .seconds(30)) { store.isListening }, "the store is not listening")
        try #require(
            try await store.offer(worker: worker, kinds: ["k"], limit: limit, lease: lease), "no offer was written")
    }

    /// Waits until `count` jobs wait for `worker` in `store` (their notification arrived).
    static func arrived(_ store: PostgresJobStore, _ worker: String, _ count: Int) async throws {
        try #require(
            await eventually(within: .seconds(30)) { store.handoff.waiting(for: worker) == count },
            "\(count) handed-over jobs did not arrive for \(worker) within 30 s (\(store.handoff.waiting(for: worker)) did)")
    }

    /// A second store on the same tables: a submitter in another process.
    static func other(_ configuration: PostgresStoreConfiguration) async throws -> PostgresJobStore {
        try await PostgresJobStore(configuration: configuration, logger: TestPostgres.logger)
    }

    @Test(
        "a submission in another process claims due jobs of the offered kinds for an idle worker, within its room, and sends them to the worker's store"
    )
    func handsOverInTheInsert() async throws {
        try await TestPostgres.withStore("handover") { store, configuration in
            let submitter = try await Self.other(configuration)
            defer { submitter.close() }
            try await Self.park(store, "w", limit: 2)
            let graph = Self.graph(
                "four", [("k", 1, true), ("other", 9, true), ("k", 5, true), ("k", 3, true), ("k", 9, false)])
            let run = try await submitter.submit(graph, uniqueKey: nil)
            let rows = try await Self.rows(store, run: run.run)
            // j2 (priority 5) and j3 (3) are handed over; j0 has the room of none, j1 is of another kind,
            // j4 is not due.
            #expect(rows["j2"]?.0 == "running" && rows["j2"]?.1 == 1 && rows["j2"]?.2 == "w")
            #expect(rows["j3"]?.0 == "running" && rows["j3"]?.2 == "w")
            for name in ["j0", "j1", "j4"] {
                #expect(rows[name]?.0 == "ready" && rows[name]?.1 == 0 && rows[name]?.2 == nil, "\(name)")
            }
            let offer = try await Self.offer(store, "w")
            #expect(offer?.room == 0 && offer?.handed == 2, "\(String(describing: offer))")
            try await Self.arrived(store, "w", 2)
            #expect(submitter.handoff.waiting(for: "w") == 0, "only the offering store takes them")

            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 5, lease: .seconds(30))
            #expect(claimed.map(\.name) == ["j2", "j3"], "the handed-over jobs alone, higher priority first")
            for job in claimed {
                #expect(job.lease.token == rows[job.name]?.3, "the token stored with the job")
                #expect(job.attempt == 1 && job.maxAttempts == 2 && job.kind == "k" && job.run == run.run)
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
            try await Self.park(store, "w", limit: 4)
            #expect(try await Self.offer(store, "w")?.room == 4)
            #expect(try await store.claim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30)).isEmpty)
            #expect(try await Self.offer(store, "w")?.room == 0)
            let run = try await store.submit(Self.graph("one", [("k", 0, true)]), uniqueKey: nil)
            #expect(try await Self.rows(store, run: run.run)["j0"]?.0 == "ready")
            let other = try await store.claim(worker: "other", kinds: ["k"], limit: 4, lease: .seconds(30))
            #expect(other.map(\.name) == ["j0"])
        }
    }

    @Test("an offer written late (an older sequence number) does not undo the withdrawal of a claim made after it")
    func lateOfferChangesNothing() async throws {
        try await TestPostgres.withStore("handover_late") { store, _ in
            try await Self.park(store, "w", limit: 4)
            let backend = try #require(store.listener.backend)
            let late = try #require(store.handoff.park("w", kinds: ["k"], limit: 4, lease: .seconds(30)))
            #expect(try await store.claim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30)).isEmpty)
            _ = try await store.prepared("offer", PostgresJobStore.offerStatement(late, backend: backend, now: 0))
            #expect(try await Self.offer(store, "w")?.room == 0, "the claim's withdrawal stands")
        }
    }

    @Test(
        "a claim leaves room for the jobs a submission handed over that have not arrived: the worker never holds more than it offered"
    )
    func roomForJobsOnTheirWay() async throws {
        try await TestPostgres.withStore("handover_coming") { store, _ in
            let ready = try await store.submit(Self.graph("ready", [("k", 0, true), ("k", 0, true)]), uniqueKey: nil)
            try await Self.park(store, "w", limit: 2)
            // A submission handed one job over; its notification has not arrived.
            _ = try await store.query("UPDATE offers SET room = room - 1, handed = handed + 1")
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 2, lease: .seconds(30))
            #expect(claimed.count == 1, "room for one beside the job on its way")
            // The next offer counts it too, until it arrives.
            try #require(try await store.offer(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30)))
            #expect(try await Self.offer(store, "w")?.room == 0)
            let rows = try await Self.rows(store, run: ready.run)
            #expect(rows.values.filter { $0.0 == "ready" }.count == 1)
        }
    }

    @Test("a worker's completion-and-claim returns the jobs handed to it first, and claims only the room left")
    func finishThenClaimTakesHandedJobs() async throws {
        try await TestPostgres.withStore("handover_finish") { store, configuration in
            let submitter = try await Self.other(configuration)
            defer { submitter.close() }
            _ = try await submitter.submit(Self.graph("first", [("k", 0, true)]), uniqueKey: nil)
            let first = try await store.claim(worker: "w", kinds: ["k"], limit: 3, lease: .seconds(30))
            try #require(first.count == 1)
            let waiting = try await submitter.submit(Self.graph("waiting", [("k", 0, true)]), uniqueKey: nil)
            // One attempt running, room for two more: the next submission's two jobs are handed over.
            try await Self.park(store, "w", limit: 2)
            let handed = try await submitter.submit(
                Self.graph("handed", [("k", 0, true), ("k", 0, true)]), uniqueKey: nil)
            try await Self.arrived(store, "w", 2)
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
            try await Self.park(dying, "w", limit: 2, lease: .seconds(10))
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
        "an offer whose listening server process has ended (the process died, or its connection was cut) is not used",
        arguments: [false, true])
    func offerOfAnEndedListener(closes: Bool) async throws {
        try await TestPostgres.withStore("handover_ended") { observer, configuration in
            let worker = try await Self.other(configuration)
            defer { worker.close() }
            try await Self.park(worker, "w", limit: 2)
            let pid = try #require(worker.listener.backend?.pid)
            if closes {
                worker.close()
            } else {
                _ = try await observer.query("SELECT pg_terminate_backend(\(pid))")
            }
            try await withDeadline(.seconds(30), "the listening server process ending") {
                while try await observer.query("SELECT 1 FROM pg_stat_activity WHERE pid = \(pid)").count > 0 {
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
            let key = try #require(worker.handoff.key(of: "w"))
            let room = try await observer.query("SELECT room FROM offers WHERE key = \(key)").first?.decode(Int.self)
            #expect(room == 2, "the offer is still in the table")
            let run = try await observer.submit(Self.graph("after", [("k", 0, true)]), uniqueKey: nil)
            #expect(try await Self.rows(observer, run: run.run)["j0"]?.0 == "ready", "not handed to a dead listener")
        }
    }

    @Test(
        "a worker that stops (withdraws its offer for good, or unregisters) gives back the jobs handed to it and not taken, and gets no more",
        arguments: [false, true])
    func stoppingGivesBack(unregisters: Bool) async throws {
        try await TestPostgres.withStore("handover_retired") { store, _ in
            try await Self.park(store, "w", limit: 4)
            let run = try await store.submit(Self.graph("two", [("k", 0, true), ("k", 0, true)]), uniqueKey: nil)
            #expect(try await Self.rows(store, run: run.run).values.allSatisfy { $0.0 == "running" })
            try await Self.arrived(store, "w", 2)
            if unregisters {
                try await store.unregister(worker: "w")
            } else {
                await store.withdrawClaim(worker: "w")
            }
            let rows = try await Self.rows(store, run: run.run)
            #expect(rows.values.allSatisfy { $0.0 == "ready" && $0.1 == 0 && $0.2 == nil }, "\(rows)")
            #expect(try await store.query("SELECT 1 FROM offers").isEmpty, "the offer is deleted")
            let later = try await store.submit(Self.graph("later", [("k", 0, true)]), uniqueKey: nil)
            #expect(try await Self.rows(store, run: later.run)["j0"]?.0 == "ready")
            let claimed = try await store.claim(worker: "other", kinds: ["k"], limit: 5, lease: .seconds(30))
            #expect(claimed.count == 3)
            #expect(claimed.allSatisfy { $0.attempt == 1 })
        }
    }

    @Test("jobs that arrive for a worker that has stopped are given back")
    func lateArrivalGivenBack() async throws {
        try await TestPostgres.withStore("handover_late_arrival") { store, configuration in
            let submitter = try await Self.other(configuration)
            defer { submitter.close() }
            try await Self.park(store, "w", limit: 1)
            let key = try #require(store.handoff.key(of: "w"))
            // The hand-over is made while the worker stops: its notification is held back (as if in
            // flight) and delivered afterwards.
            let run = try await submitter.submit(Self.graph("late", [("k", 0, true)]), uniqueKey: nil)
            try await Self.arrived(store, "w", 1)
            let job = try #require(store.handoff.take(for: "w", limit: 1).jobs.first)
            await store.withdrawClaim(worker: "w")
            #expect(try await Self.rows(store, run: run.run)["j0"]?.0 == "running", "taken before the stop")
            store.receive(
                handover: "h\(key) "
                    + #"{"e" : 1, "r" : \#(run.run.rawValue), "j" : [[\#(job.job.rawValue), \#(job.lease.token), "j0", "k", null, 2, 0, null]]}"#
            )
            try await withDeadline(.seconds(30), "the late job given back") {
                while try await Self.rows(store, run: run.run)["j0"]?.0 != "ready" {
                    try await Task.sleep(for: .milliseconds(5))
                }
            }
        }
    }

    @Test(
        "the insert's reply is lost after its commit, or the flush's: the run is stored once, and its job handed over once",
        arguments: ["submit insert", "submit"])
    func lostReply(fault: String) async throws {
        try await TestPostgres.withStore("handover_lost") { store, _ in
            try await Self.park(store, "w", limit: 4)
            store.faults.loseReply(of: fault)
            let run = try await store.submit(Self.graph("lost", [("k", 0, true)]), uniqueKey: nil)
            let count = try await store.client.query(
                "SELECT count(*)::int FROM \(unescaped: store.configuration.schema).runs"
            ).collect().first?.decode(Int.self)
            #expect(count == 1)
            let rows = try await Self.rows(store, run: run.run)
            try await Self.arrived(store, "w", 1)
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30))
            #expect(claimed.map(\.name) == ["j0"])
            #expect(claimed.first?.lease.token == rows["j0"]?.3)
            #expect(try await store.claim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30)).isEmpty)
            #expect(try await Self.offer(store, "w")?.handed == 1)
        }
    }

    @Test("claims that fill the notification travel intact; a job whose claim would not fit is inserted ready")
    func largeClaims() async throws {
        try await TestPostgres.withStore("handover_large") { store, configuration in
            let submitter = try await Self.other(configuration)
            defer { submitter.close() }
            try await Self.park(store, "w", limit: 8)
            // Names that escape to six bytes a character, inputs of every byte value.
            let name = String(repeating: "\u{1}\"é", count: 100)
            let input = Data((0..<2000).map { UInt8($0 % 256) })
            let big = Data(repeating: 7, count: 6000)
            let graph = GraphSpec(
                name: "large",
                jobs: [
                    JobSpec(name: name, kind: "k", input: input, retry: .immediate(maxAttempts: 1)),
                    JobSpec(name: "big", kind: "k", input: big, retry: .immediate(maxAttempts: 1)),
                    JobSpec(name: "small", kind: "k", input: Data("s".utf8), retry: .immediate(maxAttempts: 1)),
                ])
            let run = try await submitter.submit(graph, uniqueKey: nil)
            try await Self.arrived(store, "w", 2)
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 8, lease: .seconds(30))
            #expect(Set(claimed.map(\.name)) == [name, "small"])
            #expect(claimed.first { $0.name == name }?.input == input)
            let rows = try await Self.rows(store, run: run.run)
            #expect(rows["big"]?.0 == "ready", "its claim would not fit in the notification")
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

    /// Waits until `worker`'s offer in the table has `room` (nil: any room); throws after 30 s.
    static func offered(_ store: PostgresJobStore, _ worker: String, room: Int? = nil) async throws {
        try await withDeadline(.seconds(30), "\(worker) offering room \(room.map(String.init) ?? "")") {
            while true {
                if let offer = try await Self.offer(store, worker), room.map({ offer.room == $0 }) ?? (offer.room > 0) {
                    return
                }
                try await Task.sleep(for: .milliseconds(2))
            }
        }
    }

    @Test(
        "a worker with submissions from many tasks at once, on its store or another: every job runs once, never more at once than the worker's limit",
        arguments: [false, true])
    func workerWithManySubmitters(elsewhere: Bool) async throws {
        try await TestPostgres.withStore("handover_worker") { store, configuration in
            let submitter = elsewhere ? try await Self.other(configuration) : store
            defer { if elsewhere { submitter.close() } }
            let total = 120
            let gauge = Gauge(total: total)
            let worker = try DurableWorker(
                store: store, jobs: [Gauged(gauge: gauge)],
                configuration: .init(id: "local", maxConcurrentJobs: 3, pollInterval: .seconds(30)))
            let running = Task { try await worker.run() }
            defer { running.cancel() }
            try await Self.offered(store, "local")
            try await withDeadline(.seconds(120), "submitting \(total) one-job graphs from 4 tasks") {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for part in 0..<4 {
                        group.addTask {
                            for index in stride(from: part, to: total, by: 4) {
                                var graph = JobGraph(name: "g\(index)")
                                graph.add(Gauged.self, input: index, retry: .never)
                                _ = try await submitter.submit(graph)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await withDeadline(.seconds(120), "every job running") { await gauge.done.waitAsync() }
            let handed = try #require(try await Self.offer(store, "local")?.handed)
            #expect(handed > 0, "no job was handed over")
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
            try await Self.offered(store, "local", room: 3)  // the idle worker offers its 3 slots
            try await submit(0)
            try #require(await eventually(within: .seconds(30)) { gauge.running == 1 }, "the first job did not start")
            try await Self.offered(store, "local", room: 2)  // with one attempt running, 2 slots
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
