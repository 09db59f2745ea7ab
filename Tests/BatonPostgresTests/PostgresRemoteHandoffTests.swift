import Baton
import BatonDurable
import BatonTesting
import Foundation
import PostgresNIO
import Testing

@testable import BatonPostgres

/// Offers of idle workers to other stores, and hand-overs to them (``RemoteOffer``, ``RemoteHand``),
/// without a server.
@Suite("PostgreSQL hand-over across stores: book-keeping")
struct PostgresRemoteHandoffBookTests {
    /// A store's book-keeping that records the offers it sends.
    final class Book: Sendable {
        let book: PostgresHandoff
        let sent = Protected<[RemoteOffer]>([])
        init(_ key: String, withdrawDelay: Duration = .zero) {
            book = PostgresHandoff(key: key, withdrawDelay: withdrawDelay)
            book.setPublisher { [sent] offers in sent.withLock { $0 += offers } }
        }
        /// The offers sent since the last call.
        func drain() -> [RemoteOffer] {
            sent.withLock { sent in
                defer { sent = [] }; return sent
            }
        }
    }

    @Test(
        "an idle worker's offer reaches other stores only while its store listens, and carries its room, kinds and lease"
    )
    func offersNeedAListener() throws {
        let b = Book("b")
        b.book.park("w", kinds: ["k", "a"], limit: 2, lease: .seconds(10))
        #expect(b.drain().isEmpty, "not listening: other stores could not check that the worker's store is alive")
        b.book.listening(as: 42)
        let offer = try #require(b.drain().first)
        #expect(offer.store == "b" && offer.worker == "w" && offer.room == 2 && offer.pid == 42)
        #expect(offer.kinds == ["a", "k"] && offer.lease == 10)
        b.book.park("w", kinds: ["k", "a"], limit: 2, lease: .seconds(10))
        #expect(b.drain().isEmpty, "the same room is not told again")
        b.book.reofferAll()
        #expect(b.drain().map(\.room) == [2], "unless a store that started listening asks")
        b.book.listening(as: nil)
        b.book.listening(as: 43)
        let again = try #require(b.drain().first, "a new listening process is told with the parked workers' offers")
        #expect(again.pid == 43 && again.room == 2 && again.sequence > offer.sequence)
        _ = b.book.take(for: "w", limit: 2)
        #expect(b.drain().isEmpty, "a claim that may find nothing does not withdraw the offer")
        b.book.busy("w")
        let withdrawn = try #require(b.drain().first, "a claim that found jobs withdraws it")
        #expect(withdrawn.room == 0 && withdrawn.sequence > again.sequence)
        b.book.busy("w")
        #expect(b.drain().isEmpty, "withdrawn once")
        b.book.park("w", kinds: ["k"], limit: 1, lease: .seconds(10))
        #expect(b.drain().map(\.room) == [1])
        _ = b.book.retire("w")
        #expect(b.drain().map(\.room) == [0], "a stopping worker withdraws its offer")
    }

    @Test(
        "a smaller room is told after a delay, and not at all when the worker parks again with the room other stores know"
    )
    func smallerRoomWaits() throws {
        let b = Book("b", withdrawDelay: .seconds(3600))
        b.book.listening(as: 1)
        b.book.park("w", kinds: ["k"], limit: 3, lease: .seconds(5))
        #expect(b.drain().map(\.room) == [3])
        _ = b.book.take(for: "w", limit: 3)
        b.book.busy("w")
        #expect(b.drain().isEmpty, "the withdrawal waits")
        b.book.park("w", kinds: ["k"], limit: 3, lease: .seconds(5))
        b.book.settle("w")  // What the end of the delay does.
        #expect(b.drain().isEmpty, "parked again with the room other stores know: nothing to tell")
        _ = b.book.take(for: "w", limit: 3)
        b.book.busy("w")
        #expect(b.drain().isEmpty)
        b.book.settle("w")
        #expect(b.drain().map(\.room) == [0], "withdrawn once the delay is over")
        b.book.park("w", kinds: ["k"], limit: 3, lease: .seconds(5))
        #expect(b.drain().map(\.room) == [3], "a larger room is told at once")
        _ = b.book.take(for: "w", limit: 3)
        b.book.busy("w", full: true)
        #expect(b.drain().map(\.room) == [0], "a claim that filled the worker's room withdraws at once")
        b.book.park("w", kinds: ["k"], limit: 3, lease: .seconds(5))
        #expect(b.drain().map(\.room) == [3])
        _ = b.book.retire("w")
        #expect(b.drain().map(\.room) == [0], "a stopping worker's withdrawal does not wait")
    }

    @Test(
        "a submission hands jobs to one other store's worker within its room and kinds; that store takes what its worker still has room for"
    )
    func handOverAcrossStores() throws {
        let a = Book("a")
        let b = Book("b")
        b.book.listening(as: 7)
        b.book.park("w", kinds: ["k"], limit: 2, lease: .seconds(10))
        let offer = try #require(b.drain().first)
        a.book.learn(offer)
        b.book.learn(offer)
        #expect(b.book.remoteOffer(store: "b", worker: "w") == nil, "a store ignores its own offers")
        #expect(a.book.remoteOffer(store: "b", worker: "w")?.room == 2)
        let ticket = try #require(
            a.book.reserve(
                kinds: ["k", "other", "k", "k"], priorities: [0, 9, 5, 1], eligible: [true, true, true, true]))
        #expect(ticket.remote?.worker == "w" && ticket.remote?.pid == 7)
        #expect(ticket.workers.keys.sorted() == [2, 3], "the two of its kind with the highest priority")
        #expect(a.book.remoteOffer(store: "b", worker: "w")?.room == 0)
        #expect(a.book.reserve(kinds: ["k"], priorities: [0], eligible: [true]) == nil, "its room is used up")
        #expect(!a.book.cancel(ticket), "nothing of this store to settle")

        // The other store receives three (another submission took the same room): it takes two.
        let jobs = (1...3).map { PostgresHandoffBookTests.claimed(Int64($0)) }
        let (taken, rest) = b.book.receive(jobs, for: "w")
        #expect(taken == 2 && rest.map(\.job) == [DurableJobID(3)])
        #expect(b.drain().isEmpty, "the room other stores believe in is what the worker has: nothing to tell")
        #expect(b.book.take(for: "w", limit: 5).jobs.map(\.job) == [DurableJobID(1), DurableJobID(2)])
        let late = b.book.receive([PostgresHandoffBookTests.claimed(4)], for: "w")
        #expect(late.taken == 0 && late.rest.count == 1, "a worker that is not parked takes nothing")
        #expect(b.book.receive([PostgresHandoffBookTests.claimed(5)], for: "nobody").taken == 0)
    }

    @Test(
        "jobs handed over while a claim of the worker is under way wait for its end and take the room it leaves; the rest are given back"
    )
    func handedDuringAClaim() {
        let b = Book("b")
        b.book.listening(as: 1)
        b.book.park("w", kinds: ["k"], limit: 3, lease: .seconds(5))
        b.book.beginClaim("w")
        _ = b.book.take(for: "w", limit: 3)
        let jobs =
            (1...3).map { PostgresHandoffBookTests.claimed(Int64($0)) } + [
                PostgresHandoffBookTests.claimed(4, kind: "other")
            ]
        let got = b.book.receive(jobs, for: "w")
        #expect(got.taken == 0 && got.rest.isEmpty, "they wait for the claim")
        b.book.beginClaim("w")  // A second claim (the report loop's) under way.
        let first = b.book.endClaim("w", room: 1, kinds: ["k"])
        #expect(first.late.map(\.job) == [DurableJobID(1)])
        #expect(first.excess.map(\.job) == [DurableJobID(4)], "another kind is given back at once")
        let second = b.book.endClaim("w", room: 1, kinds: ["k"])
        #expect(second.late.map(\.job) == [DurableJobID(2)])
        #expect(second.excess.map(\.job) == [DurableJobID(3)], "beyond the room the last claim left")
        #expect(b.book.received == 2)
        let after = b.book.receive([PostgresHandoffBookTests.claimed(5)], for: "w")
        #expect(after.rest.count == 1, "no claim under way and not parked: given back")
    }

    @Test("a claim's end keeps room for the jobs still on their way to the worker from this store's submissions")
    func endClaimKeepsRoomForJobsOnTheirWay() throws {
        let b = Book("b")
        b.book.listening(as: 1)
        b.book.park("w", kinds: ["k"], limit: 2, lease: .seconds(5))
        // A submission through the worker's own store reserved one of its two slots; its insert is under way.
        let ticket = try #require(b.book.reserve(kinds: ["k"], priorities: [0], eligible: [true]))
        // The worker's completion-and-claim: its statement claims the one slot left.
        b.book.beginClaim("w")
        #expect(b.book.withdraw("w") == 1)
        _ = b.book.receive([PostgresHandoffBookTests.claimed(1)], for: "w")
        let end = b.book.endClaim("w", room: 2 - 1, kinds: ["k"])
        #expect(end.late.isEmpty && end.excess.map(\.job) == [DurableJobID(1)] && end.full)
        #expect(b.book.deliver(ticket, [("w", PostgresHandoffBookTests.claimed(2))]).isEmpty)
        #expect(b.book.take(for: "w", limit: 1).jobs.map(\.job) == [DurableJobID(2)], "its slot was kept")
    }

    @Test(
        "a new listening process tells every offer again: the parked workers' and withdrawals for the others; the offers heard before are forgotten"
    )
    func reconnect() throws {
        let b = Book("b")
        b.book.listening(as: 1, started: 100)
        b.book.park("w", kinds: ["k"], limit: 2, lease: .seconds(5))
        b.book.park("v", kinds: ["k"], limit: 1, lease: .seconds(5))
        #expect(Set(b.drain().map(\.worker)) == ["w", "v"])
        b.book.learn(
            RemoteOffer(store: "c", worker: "x", sequence: 1, room: 3, lease: 5, pid: 2, started: 0, kinds: ["k"]))
        _ = b.book.take(for: "v", limit: 1)
        b.book.listening(as: nil)
        b.book.busy("v")
        #expect(b.drain().isEmpty, "not listening: nothing can be told")
        b.book.listening(as: 3, started: 300)
        let told = b.drain().sorted { $0.worker < $1.worker }
        #expect(told.map(\.worker) == ["v", "w"] && told.map(\.room) == [0, 2], "\(told)")
        #expect(told.allSatisfy { $0.pid == 3 && $0.started == 300 })
        #expect(b.book.remoteOffer(store: "c", worker: "x") == nil, "its withdrawal may have been missed")
        let jobs = [PostgresHandoffBookTests.claimed(1, kind: "other")]
        #expect(b.book.receive(jobs, for: "w").taken == 0, "a job of a kind the worker did not offer is given back")
    }

    @Test("room reserved for a hand-over that was not sent is given back, unless a newer offer came")
    func restoreRoom() throws {
        let a = Book("a")
        a.book.learn(
            RemoteOffer(store: "b", worker: "w", sequence: 1, room: 2, lease: 5, pid: 9, started: 0, kinds: ["k"]))
        let ticket = try #require(a.book.reserve(kinds: ["k", "k"], priorities: [0, 0], eligible: [true, true]))
        #expect(a.book.remoteOffer(store: "b", worker: "w")?.room == 0)
        a.book.restore(ticket, count: 2)
        #expect(a.book.remoteOffer(store: "b", worker: "w")?.room == 2)
        let again = try #require(a.book.reserve(kinds: ["k"], priorities: [0], eligible: [true]))
        a.book.learn(
            RemoteOffer(store: "b", worker: "w", sequence: 2, room: 1, lease: 5, pid: 9, started: 0, kinds: ["k"]))
        a.book.restore(again, count: 1)
        #expect(a.book.remoteOffer(store: "b", worker: "w")?.room == 1, "the newer offer stands as told")
        // An offer found dead takes every offer of its store's process with it.
        a.book.learn(
            RemoteOffer(store: "b", worker: "v", sequence: 3, room: 1, lease: 5, pid: 9, started: 0, kinds: ["k"]))
        a.book.learn(
            RemoteOffer(store: "c", worker: "u", sequence: 1, room: 1, lease: 5, pid: 9, started: 0, kinds: ["k"]))
        a.book.forget(try #require(a.book.remoteOffer(store: "b", worker: "w")))
        #expect(
            a.book.remoteOffer(store: "b", worker: "v") == nil && a.book.remoteOffer(store: "c", worker: "u") != nil)
    }

    @Test(
        "offers are ordered by their sequence: an older one arriving late does not stand, nor one the insert found dead"
    )
    func offerOrder() throws {
        let a = Book("a")
        func offer(_ sequence: UInt64, room: Int, pid: Int32 = 9) -> RemoteOffer {
            RemoteOffer(
                store: "b", worker: "w", sequence: sequence, room: room, lease: 5, pid: pid, started: 0, kinds: ["k"])
        }
        a.book.learn(offer(2, room: 0))
        a.book.learn(offer(1, room: 3))
        #expect(a.book.reserve(kinds: ["k"], priorities: [0], eligible: [true]) == nil, "withdrawn by the newer")
        a.book.learn(offer(3, room: 3))
        let ticket = try #require(a.book.reserve(kinds: ["k"], priorities: [0], eligible: [true]))
        a.book.forget(try #require(ticket.remote))
        #expect(a.book.reserve(kinds: ["k"], priorities: [0], eligible: [true]) == nil, "forgotten")
        #expect(a.book.remoteOffer(store: "b", worker: "w") == nil)
        a.book.learn(offer(4, room: 1, pid: 10))
        #expect(a.book.reserve(kinds: ["k"], priorities: [0], eligible: [true])?.remote?.pid == 10)
    }

    @Test("local workers come first; a notification carries no more than fits in PostgreSQL's 8,000 bytes")
    func localFirstAndSize() throws {
        let a = Book("a")
        a.book.learn(
            RemoteOffer(store: "b", worker: "far", sequence: 1, room: 100, lease: 5, pid: 9, started: 0, kinds: ["k"]))
        a.book.park("near", kinds: ["k"], limit: 1, lease: .seconds(5))
        let local = try #require(a.book.reserve(kinds: ["k", "k"], priorities: [0, 0], eligible: [true, true]))
        #expect(local.remote == nil && local.workers.values.map(\.worker) == ["near"])
        let remote = try #require(
            a.book.reserve(
                kinds: ["k", "k", "k"], priorities: [0, 0, 0], eligible: [true, true, true], sizes: [3000, 3000, 3000]))
        #expect(remote.workers.keys.sorted() == [0, 1], "the third would not fit")
        // A ticket whose inputs are larger than estimated carries what fits; the rest are inserted ready.
        let big = GraphSpec(
            name: "big",
            jobs: (0..<3).map { JobSpec(name: "j\($0)", kind: "k", input: Data(repeating: 7, count: 3000)) })
        let (text, cut) = try #require(remote.remoteMessage(graph: big, expires: 1))
        #expect(cut.workers.keys.sorted() == [0], "4,000 bytes of base64 each: one fits")
        #expect(text.utf8.count + 21 * 2 < 8000)
        let huge = GraphSpec(name: "huge", jobs: [JobSpec(name: "j", kind: "k", input: Data(count: 7000))])
        #expect(remote.remoteMessage(graph: huge, expires: 1) == nil, "nothing fits")
        // Many small jobs: the estimate keeps the notification under PostgreSQL's limit.
        a.book.learn(
            RemoteOffer(store: "c", worker: "many", sequence: 1, room: 500, lease: 5, pid: 9, started: 0, kinds: ["s"]))
        let count = 300
        let small = GraphSpec(
            name: "small", jobs: (0..<count).map { JobSpec(name: "job-\($0)", kind: "s", input: Data("\($0)".utf8)) })
        let ticket = try #require(
            a.book.reserve(
                kinds: small.jobs.map(\.kind), priorities: small.jobs.map { Int32($0.priority) },
                eligible: Array(repeating: true, count: count),
                sizes: small.jobs.map { $0.name.utf8.count + $0.kind.utf8.count + ($0.input?.count ?? 0) * 4 / 3 }))
        let (smallText, smallCut) = try #require(ticket.remoteMessage(graph: small, expires: 1))
        #expect(smallCut.workers.count > 50, "\(smallCut.workers.count) carried")
        let ids = (0..<smallCut.workers.count).map { "\(Int64.max - Int64($0))" }.joined(separator: ",")
        #expect((smallText + "\(Int64.max):" + ids).utf8.count < 8000)
    }

    @Test(
        "a hand-over's text gives back the claims as sent, with the identities the insert appends; a damaged one is refused"
    )
    func messageRoundTrip() throws {
        let a = Book("a")
        a.book.learn(
            RemoteOffer(store: "b", worker: "w", sequence: 1, room: 2, lease: 30, pid: 9, started: 0, kinds: ["k"]))
        let graph = GraphSpec(
            name: "g",
            jobs: [
                JobSpec(
                    name: "one", kind: "k", input: Data("in|\n,:".utf8), priority: 3, retry: .immediate(maxAttempts: 4),
                    timeout: .seconds(2)),
                JobSpec(name: "two ✓", kind: "k"),
            ])
        let ticket = try #require(a.book.reserve(kinds: ["k", "k"], priorities: [3, 0], eligible: [true, true]))
        let (text, cut) = try #require(ticket.remoteMessage(graph: graph, expires: 1000))
        #expect(cut.workers.count == 2)
        #expect(RemoteHand.target(of: text[...]) == "b", "the store's key is read without decoding the rest")
        let (hand, run, ids) = try #require(RemoteHand.decode((text + "12:40,41")[...]))
        #expect(hand.store == "b" && hand.worker == "w" && run == 12 && ids == [40, 41])
        let jobs = hand.claimed(run: run, ids: ids)
        #expect(jobs.map(\.name) == ["one", "two ✓"] && jobs.map(\.job) == [DurableJobID(40), DurableJobID(41)])
        #expect(jobs[0].input == Data("in|\n,:".utf8) && jobs[0].maxAttempts == 4 && jobs[0].priority == 3)
        #expect(jobs[0].timeout == .seconds(2) && jobs[1].timeout == nil && jobs.allSatisfy { $0.attempt == 1 })
        #expect(jobs[0].lease.token == ticket.workers[0]?.token && jobs[1].lease.token == ticket.workers[1]?.token)
        #expect(jobs.allSatisfy { $0.leaseExpires == Date(storeTime: 1000) })
        #expect(RemoteHand.decode((text + "12:40")[...]) == nil, "an identity missing")
        #expect(RemoteHand.decode("Hb {not json\n1:2"[...]) == nil)
        #expect(RemoteHand.decode(("Hc" + text.dropFirst(2) + "12:40,41")[...]) == nil, "another store's key inside")
        #expect(RemoteHand.decode("O{}"[...]) == nil)
    }
}

/// Hand-overs between two store objects on one schema, as between two processes.
@Suite("PostgreSQL hand-over across stores", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresRemoteHandoffTests {
    /// Runs `body` with a second store on the schema of `store` (another process's, as far as the
    /// hand-over goes), closed afterwards.
    static func withOtherStore<T>(
        _ configuration: PostgresStoreConfiguration, _ body: (PostgresJobStore) async throws -> T
    ) async throws -> T {
        let other = try await PostgresJobStore(configuration: configuration, logger: TestPostgres.logger)
        defer { other.close() }
        return try await body(other)
    }

    @Test(
        "a submission through one store claims due jobs in its insert for an idle worker of another, and sends it the claims"
    )
    func handsOverToAnotherStore() async throws {
        try await TestPostgres.withStore("remote_hand") { a, configuration in
            try await Self.withOtherStore(configuration) { b in
                try await PostgresFaultTests.eventually("the worker's store listening") { b.isListening }
                b.parkClaim(worker: "w", kinds: ["k"], limit: 2, lease: .seconds(30))
                try await PostgresFaultTests.eventually("the first store hearing the offer") {
                    a.handoff.remoteOffer(store: b.handoff.key, worker: "w")?.room == 2
                }
                let graph = PostgresHandoffTests.graph("three", [("k", 1, true), ("k", 5, true), ("k", 3, true)])
                let run = try await a.submit(graph, uniqueKey: nil)
                let rows = try await PostgresHandoffTests.rows(a, run: run.run)
                #expect(rows["j1"]?.0 == "running" && rows["j1"]?.1 == 1 && rows["j1"]?.2 == "w")
                #expect(rows["j2"]?.0 == "running" && rows["j2"]?.2 == "w")
                #expect(rows["j0"]?.0 == "ready" && rows["j0"]?.2 == nil, "beyond the worker's room")
                // The claims arrive in the insert's notification: the worker's claim returns them with no
                // statement (the ready one stays ready).
                try await PostgresFaultTests.eventually("the claims reaching the worker's store") {
                    b.handoff.offer(of: "w") == nil
                }
                let claimed = try await b.claim(worker: "w", kinds: ["k"], limit: 5, lease: .seconds(30))
                #expect(claimed.map(\.name) == ["j1", "j2"])
                for job in claimed {
                    #expect(job.lease.token == rows[job.name]?.3, "the token stored with the job")
                    #expect(
                        job.run == run.run && job.attempt == 1 && job.maxAttempts == 2 && job.timeout == .seconds(30))
                    #expect(job.input == Data(job.name.dropFirst().utf8))
                }
                let reports = claimed.map { AttemptReport(lease: $0.lease, outcome: .succeeded(output: Data())) }
                #expect(try await b.finish(reports) == [.accepted(.succeeded), .accepted(.succeeded)])
                #expect(try await PostgresHandoffTests.rows(a, run: run.run)["j0"]?.0 == "ready")
                // Damaged notifications change nothing.
                for text in ["O{", "Ox", "R", "H", "H\(b.handoff.key) {", "H\(b.handoff.key) {}\n1:2", "Hnobody {"] {
                    b.message(text)
                }
                #expect(b.handoff.received == 2)
                #expect(try await PostgresHandoffTests.rows(a, run: run.run)["j0"]?.0 == "ready")
            }
        }
    }

    @Test(
        "the insert's reply is lost after its commit, or the flush's: the claims went out once, the retry sends none, and the job runs once",
        arguments: ["submit insert", "submit"])
    func lostReplyAcrossStores(fault: String) async throws {
        try await TestPostgres.withStore("remote_lost") { a, configuration in
            try await Self.withOtherStore(configuration) { b in
                try await PostgresFaultTests.eventually("the worker's store listening") { b.isListening }
                b.parkClaim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30))
                try await PostgresFaultTests.eventually("the first store hearing the offer") {
                    a.handoff.remoteOffer(store: b.handoff.key, worker: "w")?.room == 4
                }
                a.faults.loseReply(of: fault)
                let run = try await a.submit(PostgresHandoffTests.graph("lost", [("k", 0, true)]), uniqueKey: nil)
                let count = try await a.client.query(
                    "SELECT count(*)::int FROM \(unescaped: configuration.schema).runs"
                ).collect().first?.decode(Int.self)
                #expect(count == 1)
                let rows = try await PostgresHandoffTests.rows(a, run: run.run)
                #expect(rows["j0"]?.0 == "running" && rows["j0"]?.2 == "w")
                try await PostgresFaultTests.eventually("the claims reaching the worker's store") {
                    b.handoff.received == 1
                }
                let claimed = try await b.claim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30))
                #expect(claimed.map(\.name) == ["j0"])
                #expect(claimed.first?.lease.token == rows["j0"]?.3)
                #expect(try await b.claim(worker: "w", kinds: ["k"], limit: 4, lease: .seconds(30)).isEmpty)
                #expect(try await a.claim(worker: "x", kinds: ["k"], limit: 4, lease: .seconds(30)).isEmpty)
                #expect(b.handoff.received == 1, "handed over once")
            }
        }
    }

    @Test(
        "an offer whose store's listening server process is gone hands nothing over: the jobs are inserted ready, and the offer is forgotten"
    )
    func deadListener() async throws {
        try await TestPostgres.withStore("remote_dead") { a, configuration in
            // A server process that existed and is gone.
            let connection = try await PostgresConnection.connect(
                configuration: try configuration.connectionConfiguration(), id: 9, logger: TestPostgres.logger)
            let pid = try await connection.query("SELECT pg_backend_pid()", logger: TestPostgres.logger).collect()
                .first!.decode(Int32.self)
            try await connection.close()
            try await PostgresFaultTests.eventually("the server process ending") {
                try await a.client.query("SELECT count(*)::int FROM pg_stat_activity WHERE pid = \(pid)")
                    .collect().first!.decode(Int.self) == 0
            }
            a.handoff.learn(
                RemoteOffer(
                    store: "gone", worker: "w", sequence: 1, room: 5, lease: 30, pid: pid, started: 0, kinds: ["k"]))
            let run = try await a.submit(
                PostgresHandoffTests.graph("two", [("k", 0, true), ("k", 0, true)]), uniqueKey: nil)
            let rows = try await PostgresHandoffTests.rows(a, run: run.run)
            #expect(rows.values.allSatisfy { $0.0 == "ready" && $0.1 == 0 && $0.2 == nil && $0.3 == nil }, "\(rows)")
            #expect(a.handoff.remoteOffer(store: "gone", worker: "w") == nil, "forgotten")
            let claimed = try await a.claim(worker: "x", kinds: ["k"], limit: 5, lease: .seconds(30))
            #expect(claimed.count == 2, "the jobs are anyone's")
        }
    }

    @Test("jobs handed over to a worker that claimed meanwhile are given back, and claimed by another")
    func givenBack() async throws {
        try await TestPostgres.withStore("remote_back") { a, configuration in
            try await Self.withOtherStore(configuration) { b in
                try await PostgresFaultTests.eventually("the worker's store listening") { b.isListening }
                b.parkClaim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
                try await PostgresFaultTests.eventually("the first store hearing the offer") {
                    a.handoff.remoteOffer(store: b.handoff.key, worker: "w")?.room == 1
                }
                // The worker claims (finding nothing): it is no longer parked, but the first store does not
                // know yet.
                #expect(try await b.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30)).isEmpty)
                let run = try await a.submit(PostgresHandoffTests.graph("one", [("k", 0, true)]), uniqueKey: nil)
                try await PostgresFaultTests.eventually("the job given back") {
                    try await PostgresHandoffTests.rows(a, run: run.run)["j0"]?.0 == "ready"
                }
                let claimed = try await a.claim(worker: "x", kinds: ["k"], limit: 1, lease: .seconds(30))
                #expect(claimed.map(\.name) == ["j0"])
            }
        }
    }

    @Test(
        "workers of two stores, submissions through one of them and a third from many tasks at once: every job runs once, no worker runs more than its limit, and jobs crossed between stores"
    )
    func workersOfTwoStores() async throws {
        try await TestPostgres.withStore("remote_workers") { a, configuration in
            try await Self.withOtherStore(configuration) { b in
                try await Self.withOtherStore(configuration) { c in
                    try await Self.crossing(a, b, c, schema: configuration.schema)
                }
            }
        }
    }

    struct Counted: DurableJob {
        static let kind = PostgresHandoffTests.Gauged.kind
        let gauge: PostgresHandoffTests.Gauge
        let both: PostgresHandoffTests.Gauge
        func run(_ input: Int, context: DurableJobContext) async throws -> Int {
            both.enter(input)
            defer { both.leave() }
            return try await PostgresHandoffTests.Gauged(gauge: gauge).run(input, context: context)
        }
    }

    /// Workers on `a` and `b`; submissions through `a` (its own worker first) and `c` (no worker).
    static func crossing(
        _ a: PostgresJobStore, _ b: PostgresJobStore, _ c: PostgresJobStore, schema: String
    ) async throws {
        let total = 120
        let gauges = [PostgresHandoffTests.Gauge(total: total), PostgresHandoffTests.Gauge(total: total)]
        let both = PostgresHandoffTests.Gauge(total: total)
        let workers = try [a, b].enumerated().map { index, store in
            try DurableWorker(
                store: store, jobs: [Counted(gauge: gauges[index], both: both)],
                configuration: .init(id: "w\(index)", maxConcurrentJobs: 2, pollInterval: .seconds(30)))
        }
        let running = workers.map { worker in Task { try await worker.run() } }
        defer { running.forEach { $0.cancel() } }
        try await PostgresFaultTests.eventually("the submitting stores hearing the idle workers") {
            c.handoff.remoteOffer(store: a.handoff.key, worker: "w0") != nil
                && c.handoff.remoteOffer(store: b.handoff.key, worker: "w1") != nil
                && a.handoff.remoteOffer(store: b.handoff.key, worker: "w1") != nil
        }
        try await withDeadline(.seconds(120), "submitting \(total) one-job graphs from 4 tasks") {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for part in 0..<4 {
                    let store = part % 2 == 0 ? a : c
                    group.addTask {
                        for index in stride(from: part, to: total, by: 4) {
                            var graph = JobGraph(name: "g\(index)")
                            graph.add(PostgresHandoffTests.Gauged.self, input: index, retry: .never)
                            _ = try await store.submit(graph)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await withDeadline(.seconds(120), "every job running") { await both.done.waitAsync() }
        for worker in workers { worker.shutdown() }
        for task in running {
            try await withDeadline(.seconds(30), "the workers stopping") { try await task.value }
        }
        for (index, gauge) in gauges.enumerated() {
            let most = gauge.state.withLock { $0.most }
            #expect(most <= 2, "worker w\(index) ran \(most) attempts at once, over its limit of 2")
        }
        let counts = both.state.withLock { $0.runs }
        #expect(counts.count == total && counts.values.allSatisfy { $0 == 1 }, "runs per job: \(counts)")
        let states = try await a.client.query(
            "SELECT state, attempts, count(*)::int FROM \(unescaped: schema).jobs GROUP BY 1, 2"
        ).collect().map { try $0.decode((String, Int, Int).self) }
        #expect(states.count == 1 && states.first?.0 == "succeeded" && states.first?.1 == 1, "\(states)")
        #expect(a.handoff.received + b.handoff.received > 0, "no job was handed over across the stores")
    }
}
