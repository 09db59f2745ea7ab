import BatonDurable
import Foundation
import PostgresNIO
import Testing

@testable import BatonPostgres

/// The plans PostgreSQL picks for the two statements every step of every run goes through: completing
/// an attempt, and claiming. Each must reach the tables of jobs, edges and categories through an index, whatever the
/// table's statistics say. A durable queue's statistics are wrong most of the time (states move faster
/// than `ANALYZE`), and a plan that reads the jobs table in full makes every step cost time in
/// proportion to the table: a 10,000-job chain took 3.6–4.5 ms per step against 2.0 ms for 1,000.
///
/// Checked with generic plans (`plan_cache_mode = force_generic_plan`), the plans a long-lived
/// connection ends up with for prepared statements, on four kinds of statistics: those of a store
/// that just took two large submissions, "mostly pending", "mostly ready" and "mostly finished"; and
/// the completing statement's plan for one call's values (a batch of 500 reports) on statistics taken
/// when every job was ready.
@Suite("PostgreSQL statement plans", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresPlanTests {
    /// The scans that read a whole table of jobs, edges or categories, in `plan`'s text.
    static func fullScans(_ plan: [String]) -> [String] {
        plan.filter { line in
            ["jobs", "edges", "job_categories", "holders"].contains { line.contains("Seq Scan on \($0) ") }
        }
    }

    static func plans(_ store: PostgresJobStore) async throws -> [String: [String]] {
        try await store.client.withConnection { connection in
            try await connection.query("SET plan_cache_mode = force_generic_plan", logger: TestPostgres.logger)
            var plans: [String: [String]] = [:]
            let statements: [(String, String, String, String)] = [
                (
                    "finish", "bigint[], bigint[], bytea[], float8, text",
                    PostgresJobStore.FinishSucceeded.sql, "'{5}', '{7}', '{\"\\\\x00\"}', 1e9, 'x'"
                ),
                (
                    "claim", "float8, text[], bigint, text, float8, text[], text",
                    PostgresJobStore.ClaimReadyOfOneKind.sql,
                    "1e9, '{k}', 100, 'w', 2e9, '{}', 'x'"
                ),
                (
                    "claim_kinds", "float8, text[], bigint, text, float8, text[], text",
                    PostgresJobStore.ClaimReady.sql, "1e9, '{k,other}', 100, 'w', 2e9, '{}', 'x'"
                ),
            ]
            for (name, types, sql, arguments) in statements {
                let statement = "plan_test_\(name)"
                try await connection.query(
                    PostgresQuery(unsafeSQL: "PREPARE \(statement)(\(types)) AS \(sql)"), logger: TestPostgres.logger)
                let rows = try await connection.query(
                    PostgresQuery(unsafeSQL: "EXPLAIN EXECUTE \(statement)(\(arguments))"), logger: TestPostgres.logger
                ).collect()
                plans[name] = try rows.map { try $0.decode(String.self) }
                try await connection.query(
                    PostgresQuery(unsafeSQL: "DEALLOCATE \(statement)"), logger: TestPostgres.logger)
            }
            return plans
        }
    }

    /// A chain of `count` jobs of `kind`, each depending on the one before.
    static func chain(_ count: Int, kind: String) -> GraphSpec {
        var chain = GraphSpec(name: "chain")
        for index in 0..<count {
            chain.jobs.append(
                JobSpec(
                    name: "c\(index)", kind: kind, input: Data(),
                    dependencies: index > 0 ? [.init(index: index - 1)] : [], retry: .never))
        }
        return chain
    }

    /// The plan the server makes for one call's values (`force_custom_plan`: what it does for the first
    /// executions of a prepared statement on each connection, and whenever it judges the generic plan
    /// costlier), for `sql` with parameters of `types` and the literal `arguments`.
    static func customPlan(
        _ store: PostgresJobStore, sql: String, types: String, arguments: String
    ) async throws -> [String] {
        try await store.client.withConnection { connection in
            try await connection.query("SET plan_cache_mode = force_custom_plan", logger: TestPostgres.logger)
            try await connection.query(
                PostgresQuery(unsafeSQL: "PREPARE plan_test_custom(\(types)) AS \(sql)"), logger: TestPostgres.logger)
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: "EXPLAIN EXECUTE plan_test_custom(\(arguments))"), logger: TestPostgres.logger
            ).collect()
            try await connection.query("DEALLOCATE plan_test_custom", logger: TestPostgres.logger)
            try await connection.query("RESET plan_cache_mode", logger: TestPostgres.logger)
            return try rows.map { try $0.decode(String.self) }
        }
    }

    /// A worker at batch 500 on a store whose statistics were taken when every job was ready (a large
    /// submission refreshes them): the planner then expects one running job, and with the 500 reports'
    /// ids in front of it, a full scan of jobs looked cheaper than 500 lookups by key. On 25 Nov that
    /// plan took 1.4–1.7 s a statement on 20,000 jobs (four workers: 3–4k jobs/s instead of 25k).
    @Test("a batch of 500 reports finds its jobs by key though the statistics say no job runs")
    func largeBatchOnReadyStatistics() async throws {
        try await TestPostgres.withStore("plans_batch") { store, _ in
            // A chain that is not claimed (kind "other") so that edges have rows and statistics, then the
            // jobs the worker claims.
            _ = try await store.submit(Self.chain(3000, kind: "other"), uniqueKey: nil)
            var wide = GraphSpec(name: "wide")
            for index in 0..<5000 {
                wide.jobs.append(JobSpec(name: "w\(index)", kind: "k", input: Data(), retry: .never))
            }
            _ = try await store.submit(wide, uniqueKey: nil)
            let analyzed = try await store.client.query(
                "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'jobs'"
            ).collect().first?.decode(Int.self)
            #expect((analyzed ?? 0) > 0, "the submission did not refresh the statistics: nothing to test")
            var claimed: [ClaimedJob] = []
            for _ in 0..<2 {
                claimed += try await store.claim(worker: "w", kinds: ["k"], limit: 500, lease: .seconds(600))
            }
            #expect(claimed.count == 1000)
            let batch = claimed.prefix(500)
            let ids = batch.map { String($0.lease.job.rawValue) }.joined(separator: ",")
            let tokens = batch.map { String($0.lease.token) }.joined(separator: ",")
            let outputs = Array(repeating: "\"\\\\x00\"", count: batch.count).joined(separator: ",")
            let plan = try await Self.customPlan(
                store, sql: PostgresJobStore.FinishSucceeded.sql, types: "bigint[], bigint[], bytea[], float8, text",
                arguments: "'{\(ids)}', '{\(tokens)}', '{\(outputs)}', 1e9, 'x'")
            #expect(
                Self.fullScans(plan).isEmpty,
                "the finish statement's plan for 500 reports reads a table in full:\n\(plan.joined(separator: "\n"))")
            // And the statement does its work: all 500 accepted.
            let results = try await store.finish(
                batch.map { AttemptReport(lease: $0.lease, outcome: .succeeded(output: Data())) })
            #expect(results.allSatisfy { $0 == .accepted(.succeeded) })
        }
    }

    @Test("completing and claiming read jobs, edges and categories through indexes, whatever the statistics say")
    func stepsUseIndexes() async throws {
        try await TestPostgres.withStore("plans") { store, _ in
            // A 3,000-job chain and 2,000 independent jobs, half of them in categories: large enough that
            // a full scan costs more than an index scan by any estimate.
            _ = try await store.submit(Self.chain(3000, kind: "k"), uniqueKey: nil)
            var wide = GraphSpec(name: "wide")
            for index in 0..<2000 {
                wide.jobs.append(
                    JobSpec(
                        name: "w\(index)", kind: "k", input: Data(), retry: .never,
                        categories: index % 2 == 0 ? [DurableCategory(name: "c\(index % 7)", limit: 2)] : []))
            }
            _ = try await store.submit(wide, uniqueKey: nil)

            let situations: [(String, String?)] = [
                ("as submitted (large submissions refresh the statistics)", nil),
                ("statistics: mostly pending", "ANALYZE jobs; ANALYZE edges"),
                ("statistics: mostly ready", "UPDATE jobs SET state = 'ready'; ANALYZE jobs; ANALYZE edges"),
                (
                    "statistics: mostly finished",
                    "UPDATE jobs SET state = 'succeeded' WHERE name <> 'c2999'; ANALYZE jobs; ANALYZE edges"
                ),
            ]
            for (situation, setup) in situations {
                if let setup {
                    for part in setup.split(separator: ";") {
                        try await store.client.query(PostgresQuery(unsafeSQL: String(part)))
                    }
                }
                for (name, plan) in try await Self.plans(store).sorted(by: { $0.key < $1.key }) {
                    #expect(
                        Self.fullScans(plan).isEmpty,
                        "\(situation): the \(name) statement reads a table in full:\n\(plan.joined(separator: "\n"))")
                }
                // Nor through the index of running jobs: a bitmap scan of it reads every entry, and the
                // entries of jobs that ran and finished stay in it until the table is vacuumed.
                let finish = try await Self.plans(store)["finish"] ?? []
                #expect(
                    !finish.contains { $0.contains("jobs_running") },
                    "\(situation): the finish statement scans the index of running jobs:\n\(finish.joined(separator: "\n"))"
                )
            }
        }
    }
}
