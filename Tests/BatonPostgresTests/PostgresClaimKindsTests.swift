import BatonDurable
import Foundation
import JobStoreConformance
import PostgresNIO
import Testing

@testable import BatonPostgres

/// Claims by kind on PostgreSQL: what a look for work reads, and what a claim of several kinds locks.
@Suite("PostgreSQL claims by kind", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresClaimKindsTests {
    /// `count` independent jobs of `kind`, with the priorities `priority(index)` and an optional start time.
    static func graph(
        _ name: String, kind: String, count: Int, priority: (Int) -> Int = { _ in 2 }, notBefore: Date? = nil
    ) -> GraphSpec {
        var graph = GraphSpec(name: name)
        for index in 0..<count {
            graph.jobs.append(
                JobSpec(
                    name: "\(name)\(index)", kind: kind, input: Data(), priority: priority(index), retry: .never,
                    notBefore: notBefore))
        }
        return graph
    }

    /// What each statement of `calls` (label, parameter types, text, arguments) reads, by EXPLAIN
    /// ANALYZE of its generic plan, each in a transaction that is rolled back: every row count in the
    /// plan (rows a scan returned, rows it read and left out) must stay under 100.
    static func expectReadsLittle(_ store: PostgresJobStore, _ calls: [(String, String, String, String)]) async throws {
        for (index, (name, types, sql, arguments)) in calls.enumerated() {
            let plan: [String] = try await store.client.withConnection { connection in
                try await connection.query("SET plan_cache_mode = force_generic_plan", logger: TestPostgres.logger)
                try await connection.query("BEGIN", logger: TestPostgres.logger)
                try await connection.query(
                    PostgresQuery(unsafeSQL: "PREPARE kinds_test_\(index)(\(types)) AS \(sql)"),
                    logger: TestPostgres.logger)
                let rows = try await connection.query(
                    PostgresQuery(unsafeSQL: "EXPLAIN ANALYZE EXECUTE kinds_test_\(index)(\(arguments))"),
                    logger: TestPostgres.logger
                ).collect()
                try await connection.query("ROLLBACK", logger: TestPostgres.logger)
                try await connection.query(
                    PostgresQuery(unsafeSQL: "DEALLOCATE kinds_test_\(index)"), logger: TestPostgres.logger)
                return try rows.map { try $0.decode(String.self) }
            }
            let text = plan.joined(separator: "\n")
            let counts = plan.flatMap { line -> [Int] in
                line.matches(of: /(?:Rows Removed by Filter: |actual time=[0-9.]+\.\.[0-9.]+ rows=)(\d+)/)
                    .compactMap { Int($0.output.1) }
            }
            #expect(!counts.isEmpty, "\(name) (\(arguments)): no row counts in the plan:\n\(text)")
            #expect(counts.allSatisfy { $0 < 100 }, "\(name) (\(arguments)) reads a backlog:\n\(text)")
            #expect(!text.contains("Seq Scan on jobs "), "\(name) (\(arguments)) reads the jobs in full:\n\(text)")
        }
    }

    static let claimTypes = "float8, text[], bigint, text, float8, text[], text"

    /// A worker with nothing to do behind another kind's backlog, ready and waiting for its time: each
    /// look for work (a claim, and the time of the next due job) read every ready job of the other kind
    /// while one index held all ready jobs in priority order. The next due time must not read the
    /// worker's own waiting jobs either (a `min` over all its kinds read every one of them).
    @Test("a claim and the next due time read only the ready jobs of their own kinds that matter")
    func looksReadOnlyTheirKinds() async throws {
        try await TestPostgres.withStore("claim_kinds_read") { store, _ in
            _ = try await store.submit(Self.graph("b", kind: "other", count: 3000), uniqueKey: nil)
            let inAnHour = Date().addingTimeInterval(3600)
            _ = try await store.submit(
                Self.graph("later", kind: "other", count: 3000, notBefore: inAnHour), uniqueKey: nil)
            _ = try await store.submit(Self.graph("m", kind: "mine", count: 1), uniqueKey: nil)
            try await store.client.query("ANALYZE jobs")
            try await Self.expectReadsLittle(
                store,
                [
                    (
                        "claim", Self.claimTypes, PostgresJobStore.ClaimReadyOfOneKind.sql,
                        "NULL, '{mine}', 100, 'w', 60, '{}', 'x'"
                    ),
                    (
                        "claim", Self.claimTypes, PostgresJobStore.ClaimReady.sql,
                        "NULL, '{mine,none}', 100, 'w', 60, '{}', 'x'"
                    ),
                    ("next due", "float8, text[]", PostgresJobStore.NextDue.sql, "NULL, '{mine}'"),
                ])
            // The worker's own kind waiting for its time (as retries backing off do): a claim read past
            // every one of them while they were in the claims' index.
            _ = try await store.submit(
                Self.graph("mine-later", kind: "mine", count: 3000, notBefore: inAnHour), uniqueKey: nil)
            // And jobs running, whose leases have not expired: asked whether one had, the planner expected
            // to meet one early in a scan of the whole table, and read every job.
            for _ in 0..<4 {
                _ = try await store.claim(worker: "other", kinds: ["other"], limit: 500, lease: .seconds(600))
            }
            try await store.client.query("ANALYZE jobs")
            try await Self.expectReadsLittle(
                store,
                [
                    (
                        "claim", Self.claimTypes, PostgresJobStore.ClaimReadyOfOneKind.sql,
                        "NULL, '{mine}', 100, 'w', 60, '{}', 'x'"
                    ),
                    (
                        "claim", Self.claimTypes, PostgresJobStore.ClaimReady.sql,
                        "NULL, '{mine,none}', 100, 'w', 60, '{}', 'x'"
                    ),
                    ("next due", "float8, text[]", PostgresJobStore.NextDue.sql, "NULL, '{mine}'"),
                    ("next due", "float8, text[]", PostgresJobStore.NextDue.sql, "NULL, '{mine,other}'"),
                ])
            #expect(try await store.nextDueDate(kinds: ["none", "mine"]) != nil)
        }
    }

    /// A claim promotes the waiting jobs of its kinds that came due, up to 1,000, and holds their rows
    /// while it runs: a claim beside it skips them and may find nothing. The jobs it promotes and does
    /// not take must wake the listeners, or the other workers would wait for their polling interval.
    @Test("a claim that makes due jobs claimable without taking them all wakes the other workers")
    func promotionWakesListeners() async throws {
        try await Self.expectWakes("claim_promotion_wakes") { store, clock in
            _ = try await store.submit(
                Self.graph("later", kind: "mine", count: 3, notBefore: clock.now.addingTimeInterval(60)),
                uniqueKey: nil)
            #expect(try await store.claim(worker: "w", kinds: ["mine"], limit: 1, lease: .seconds(30)).isEmpty)
        } claim: { store, clock in
            clock.advance(by: .seconds(60))
            let one = try await store.claim(worker: "w", kinds: ["mine"], limit: 1, lease: .seconds(30))
            #expect(one.map(\.name) == ["later0"])
        } after: { store in
            let rest = try await store.claim(worker: "w", kinds: ["mine"], limit: 5, lease: .seconds(30))
            #expect(rest.map(\.name) == ["later1", "later2"])
        }
    }

    /// A claim of one kind locks its first ready jobs before it weighs them against the due ones: when a
    /// due job takes the place of one of them, that one stays locked until the claim ends, and a claim
    /// beside it skipped it. Nothing was promoted, so only this says that it is there.
    @Test("a claim that held a ready job it did not take, for a due one, wakes the other workers")
    func passedOverWakesListeners() async throws {
        try await Self.expectWakes("claim_passed_over_wakes") { store, clock in
            // d is older than r, and waits for its time.
            _ = try await store.submit(
                Self.graph("d", kind: "mine", count: 1, notBefore: clock.now.addingTimeInterval(60)), uniqueKey: nil)
            _ = try await store.submit(Self.graph("r", kind: "mine", count: 1), uniqueKey: nil)
        } claim: { store, clock in
            clock.advance(by: .seconds(60))
            let one = try await store.claim(worker: "w", kinds: ["mine"], limit: 1, lease: .seconds(30))
            #expect(one.map(\.name) == ["d0"])
        } after: { store in
            let rest = try await store.claim(worker: "w", kinds: ["mine"], limit: 5, lease: .seconds(30))
            #expect(rest.map(\.name) == ["r0"])
        }
    }

    /// Runs `claim` on a store with a test clock, prepared by `setup`, while listening on its channel,
    /// and expects a notification within 30 s; then `after`.
    static func expectWakes(
        _ name: String, setup: (PostgresJobStore, ManualDurableClock) async throws -> Void,
        claim: @escaping @Sendable (PostgresJobStore, ManualDurableClock) async throws -> Void,
        after: (PostgresJobStore) async throws -> Void
    ) async throws {
        let configuration = try TestPostgres.configuration(name)
        let clock = ManualDurableClock()
        let store = try await TestPostgres.open(configuration: configuration, clock: clock.clock)
        defer { store.close() }
        do {
            try await setup(store, clock)
            let listener = try await TestPostgres.connect(configuration, id: 7)
            let heard = try await listener.listen(on: store.channel) { notifications in
                try await claim(store, clock)
                return try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        for try await _ in notifications { return true }
                        return false
                    }
                    group.addTask {
                        try await Task.sleep(for: .seconds(30))  // a deadline, not a wait for the notification
                        return false
                    }
                    let first = try await group.next()!
                    group.cancelAll()
                    return first
                }
            }
            try await listener.close()
            #expect(heard, "no notification within 30 s of the claim")
            try await after(store)
            try await TestPostgres.drop(configuration.schema, using: store)
        } catch {
            try? await TestPostgres.drop(configuration.schema, using: store)
            throw error
        }
    }

    /// A job that adds jobs to its run must learn which names are taken: each added name, its numbered
    /// forms `name #k`, and the run's names beyond ASCII (Swift's equality is not the server's). That
    /// read every name of the run at each addition: a crawler adding jobs one by one to a large run.
    @Test(
        "the names that jobs added to a run can meet are found through the run's name indexes, not by reading the run"
    )
    func takenNamesReadLittle() async throws {
        try await TestPostgres.withStore("taken_names") { store, _ in
            var graph = Self.graph("p", kind: "other", count: 3000)
            // A name longer than a btree entry's room (2,704 bytes), random so that it does not compress:
            // the index holds names' first 400 characters.
            let long = String((0..<3000).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement()! })
            let extra =
                ["fetch", "fetch #x", "fetch #", "café", "\u{212A}", long, long + " #2", long + "x"]
                + (1...40).map { "fetch #\($0)" }
            for name in extra {
                graph.jobs.append(JobSpec(name: name, kind: "other", input: Data(), priority: 2, retry: .never))
            }
            let run = try await store.submit(graph, uniqueKey: nil)
            _ = try await store.submit(Self.graph("p", kind: "other", count: 3000), uniqueKey: nil)  // another run
            try await store.client.query("ANALYZE jobs")
            try await Self.expectReadsLittle(
                store,
                [
                    (
                        "taken names", "bigint, text[]", PostgresJobStore.takenNamesSQL,
                        "\(run.run.rawValue), '{p5,fetch,new}'"
                    )
                ])
            let taken = try await store.client.withConnection { connection in
                try await PostgresJobStore.takenNames(
                    connection, run: run.run.rawValue, among: ["p5", "fetch", "new", "p5"], logger: TestPostgres.logger)
            }
            #expect(taken == Set(["p5", "fetch", "café", "\u{212A}"] + (1...40).map { "fetch #\($0)" }))
            let takenLong = try await store.client.withConnection { connection in
                try await PostgresJobStore.takenNames(
                    connection, run: run.run.rawValue, among: [long, "p5 #2"], logger: TestPostgres.logger)
            }
            #expect(takenLong == [long, long + " #2", "café", "\u{212A}"])
        }
    }

    /// A claim of several kinds must lock only the jobs it takes, and take the best of what no other
    /// claimer holds. One claim holds its transaction open (a statement of ``PostgresJobStore/ClaimReady``
    /// on a connection of the test's own); a second claimer must find the rest. Locking each kind's
    /// first `limit` held rows the second claimer then skipped; sharing the places out by kind before
    /// locking gave the held kind's places to nothing.
    @Test(
        "a claim of several kinds locks only the jobs it takes; another claimer takes the best of the rest",
        arguments: [
            // (jobs of a, their priorities; jobs of b, their priorities; the held claim's limit; what the
            // second claim of limit `held` takes)
            ("equal priorities", 10, 10, 10, Set((5..<10).flatMap { ["a\($0)", "b\($0)"] })),
            ("a above b", 10, 0, 10, Set((0..<10).map { "b\($0)" })),
            ("held a above b above the rest of a", 6, -1, 3, Set(["b0", "b1", "b2"])),
        ])
    func aClaimOfSeveralKindsLocksWhatItTakes(
        scenario: String, aCount: Int, bOffset: Int, held: Int, expected: Set<String>
    ) async throws {
        try await TestPostgres.withStore("claim_kinds_locks") { store, configuration in
            switch bOffset {
            case 10:  // a and b at 10…1: the first 10 of all are five of each
                _ = try await store.submit(Self.graph("a", kind: "a", count: 10, priority: { 10 - $0 }), uniqueKey: nil)
                _ = try await store.submit(Self.graph("b", kind: "b", count: 10, priority: { 10 - $0 }), uniqueKey: nil)
            case 0:  // a at 20…11, b at 10…1
                _ = try await store.submit(Self.graph("a", kind: "a", count: 10, priority: { 20 - $0 }), uniqueKey: nil)
                _ = try await store.submit(Self.graph("b", kind: "b", count: 10, priority: { 10 - $0 }), uniqueKey: nil)
            default:  // three of a at 10, three of a at 1, three of b at 5
                _ = try await store.submit(
                    Self.graph("a", kind: "a", count: aCount, priority: { $0 < 3 ? 10 : 1 }), uniqueKey: nil)
                _ = try await store.submit(Self.graph("b", kind: "b", count: 3, priority: { _ in 5 }), uniqueKey: nil)
            }
            let first = try await TestPostgres.connect(configuration, id: 1)
            do {
                try await first.query(
                    PostgresQuery(unsafeSQL: "SET search_path TO \"\(configuration.schema)\""),
                    logger: TestPostgres.logger)
                try await first.query("BEGIN", logger: TestPostgres.logger)
                try await first.query(
                    PostgresQuery(
                        unsafeSQL: "PREPARE held(\(Self.claimTypes)) AS \(PostgresJobStore.ClaimReady.sql)"),
                    logger: TestPostgres.logger)
                let rows = try await first.query(
                    PostgresQuery(unsafeSQL: "EXECUTE held(NULL, '{a,b}', \(held), 'first', 60, '{}', 'x')"),
                    logger: TestPostgres.logger
                ).collect()
                let taken = try rows.filter { try $0.makeRandomAccess()["claimed"].decode(Bool?.self) == true }
                #expect(taken.count == held, "\(scenario): the first claim took \(taken.count) of \(held)")
                // While the first claim's transaction holds its rows.
                let second = try await store.claim(
                    worker: "second", kinds: ["b", "a"], limit: held, lease: .seconds(60))
                #expect(
                    Set(second.map(\.name)) == expected,
                    "\(scenario): the second claim took \(second.map(\.name).sorted())")
                try await first.query("ROLLBACK", logger: TestPostgres.logger)
                try await first.close()
            } catch {
                try? await first.close()
                throw error
            }
        }
    }
}
