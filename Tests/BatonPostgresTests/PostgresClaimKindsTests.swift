import BatonDurable
import Foundation
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

    /// A worker with nothing to do behind another kind's backlog, ready and waiting for its time: each
    /// look for work (a claim, and the time of the next due job) read every ready job of the other kind
    /// while one index held all ready jobs in priority order. Measured by what the statements read
    /// (EXPLAIN ANALYZE of the generic plans), each call in a transaction that is rolled back.
    @Test("a claim and the next due time read only the ready jobs of their own kinds")
    func looksReadOnlyTheirKinds() async throws {
        try await TestPostgres.withStore("claim_kinds_read") { store, _ in
            _ = try await store.submit(Self.graph("b", kind: "other", count: 3000), uniqueKey: nil)
            _ = try await store.submit(
                Self.graph("later", kind: "other", count: 3000, notBefore: Date().addingTimeInterval(3600)),
                uniqueKey: nil)
            _ = try await store.submit(Self.graph("m", kind: "mine", count: 1), uniqueKey: nil)
            try await store.client.query("ANALYZE jobs")
            let calls: [(String, String, String, String)] = [
                (
                    "claim", "float8, text[], bigint, text, float8, text[]",
                    PostgresJobStore.ClaimReadyOfOneKind.sql, "NULL, '{mine}', 100, 'w', 60, '{}'"
                ),
                (
                    "claim", "float8, text[], bigint, text, float8, text[]", PostgresJobStore.ClaimReady.sql,
                    "NULL, '{mine,none}', 100, 'w', 60, '{}'"
                ),
                ("next due", "float8, text[]", PostgresJobStore.NextDue.sql, "NULL, '{mine}'"),
                ("next due", "float8, text[]", PostgresJobStore.NextDue.sql, "NULL, '{mine,none}'"),
            ]
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
                // Rows a scan read and left out, and rows a scan returned: none near a backlog's 3,000.
                let counts = plan.flatMap { line -> [Int] in
                    line.matches(of: /(?:Rows Removed by Filter: |actual time=[0-9.]+\.\.[0-9.]+ rows=)(\d+)/)
                        .compactMap { Int($0.output.1) }
                }
                #expect(!counts.isEmpty, "\(name) (\(arguments)): no row counts in the plan:\n\(text)")
                #expect(
                    counts.allSatisfy { $0 < 100 }, "\(name) (\(arguments)) reads the other kind's jobs:\n\(text)")
                #expect(!text.contains("Seq Scan on jobs "), "\(name) (\(arguments)) reads the jobs in full:\n\(text)")
            }
        }
    }

    /// A claim of several kinds must lock only the jobs it takes: locking each kind's first `limit`
    /// held rows that other claimers then skipped (and wrote a lock for each). Here one claim of 10 over
    /// two kinds holds its transaction open; a second claimer must still find the other 10.
    @Test("a claim of several kinds locks only the jobs it takes; another claimer takes the rest meanwhile")
    func aClaimOfSeveralKindsLocksWhatItTakes() async throws {
        try await TestPostgres.withStore("claim_kinds_locks") { store, configuration in
            // Priorities 10…1 in each kind: the first 10 of all are five of each.
            _ = try await store.submit(Self.graph("a", kind: "a", count: 10, priority: { 10 - $0 }), uniqueKey: nil)
            _ = try await store.submit(Self.graph("b", kind: "b", count: 10, priority: { 10 - $0 }), uniqueKey: nil)
            let first = try await TestPostgres.connect(configuration, id: 1)
            do {
                try await first.query(
                    PostgresQuery(unsafeSQL: "SET search_path TO \"\(configuration.schema)\""),
                    logger: TestPostgres.logger)
                try await first.query("BEGIN", logger: TestPostgres.logger)
                try await first.query(
                    PostgresQuery(
                        unsafeSQL:
                            "PREPARE held(float8, text[], bigint, text, float8, text[]) AS \(PostgresJobStore.ClaimReady.sql)"
                    ), logger: TestPostgres.logger)
                let held = try await first.query(
                    "EXECUTE held(NULL, '{a,b}', 10, 'first', 60, '{}')", logger: TestPostgres.logger
                ).collect()
                #expect(held.count == 10, "the first claim took \(held.count) of 10")
                // While the first claim's transaction holds its rows.
                let second = try await store.claim(worker: "second", kinds: ["b", "a"], limit: 10, lease: .seconds(60))
                #expect(
                    Set(second.map(\.name)) == Set((5..<10).flatMap { ["a\($0)", "b\($0)"] }),
                    "the second claim took \(second.map(\.name).sorted())")
                try await first.query("ROLLBACK", logger: TestPostgres.logger)
                try await first.close()
            } catch {
                try? await first.close()
                throw error
            }
        }
    }
}
