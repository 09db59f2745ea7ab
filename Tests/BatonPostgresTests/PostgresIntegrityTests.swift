import BatonDurable
import Foundation
import PostgresNIO
import Testing

@testable import BatonPostgres

/// Schema version 4 dropped the foreign key from a job to its run (checking it took a tenth of a
/// millisecond of every submission). The store keeps the relation itself; these tests are the net
/// that the key used to be.
@Suite("PostgreSQL integrity without foreign keys", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresIntegrityTests {
    static func count(
        _ store: PostgresJobStore, _ sql: String, _ value: some PostgresEncodable & Sendable
    ) async throws -> Int {
        var bindings = PostgresBindings()
        try bindings.append(value)
        let rows = try await store.client.query(PostgresQuery(unsafeSQL: sql, binds: bindings)).collect()
        return try rows.first?.decode(Int.self) ?? -1
    }

    static let foreignKeys = """
        SELECT count(*)::int FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
        WHERE n.nspname = $1 AND c.contype = 'f'
        """

    @Test(
        "a job whose stored retry policy is damaged fails with its error and the damage named when it fails, and its run can still be explained"
    )
    func damagedRetryPolicy() async throws {
        try await TestPostgres.withStore("retrydamage") { store, _ in
            let run = try await store.submit(
                GraphSpec(
                    name: "g",
                    jobs: [
                        JobSpec(name: "a", kind: "k", input: Data("1".utf8), retry: .immediate(maxAttempts: 3)),
                        JobSpec(name: "b", kind: "k", input: Data("2".utf8), dependencies: [.init(index: 0)]),
                    ]),
                uniqueKey: nil)
            try await store.client.query("UPDATE jobs SET retry = 'not json'")
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
            let results = try await store.finish([
                AttemptReport(lease: claimed[0].lease, outcome: .failed(message: "boom", retryable: true))
            ])
            #expect(results == [.accepted(.failed)])
            let explanation = try await store.explain(run: run.run)
            #expect(
                explanation.jobs[0].lastError?.hasPrefix("boom (not retried: the job's stored retry policy") == true)
            #expect(explanation.jobs.map(\.state) == [.failed, .cancelled])
            #expect(explanation.run.finished != nil)
        }
    }

    @Test("version 4 drops the foreign key from jobs to runs, on a schema migrated from version 3")
    func version4DropsTheForeignKey() async throws {
        let configuration = try TestPostgres.configuration("v3")
        try await TestPostgres.withStore("v3setup") { setup, _ in
            _ = try await setup.client.withConnection { connection in
                try await PostgresSchema.migrate(
                    on: connection, schema: configuration.schema, logger: TestPostgres.logger, target: 3)
            }
            #expect(try await Self.count(setup, Self.foreignKeys, configuration.schema) == 1, "version 3 has it")
            let store = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            #expect(try await Self.count(store, Self.foreignKeys, configuration.schema) == 0)
            let version = try await store.client.query("SELECT version FROM baton_schema_version")
                .collect().first?.decode(Int.self)
            #expect(version == PostgresJobStore.schemaVersion)
            try await TestPostgres.drop(configuration.schema, using: store)
            store.close()
        }
    }

    @Test(
        "pruning a run leaves none of its jobs, edges, categories, holders or attempts, and keeps the other runs whole"
    )
    func pruneLeavesNothingBehind() async throws {
        try await TestPostgres.withStore("prune") { store, _ in
            func graph(_ name: String) -> GraphSpec {
                GraphSpec(
                    name: name,
                    jobs: [
                        JobSpec(name: "a", kind: "k", input: Data("1".utf8), retry: .immediate(maxAttempts: 2)),
                        JobSpec(
                            name: "b", kind: "k", input: Data("2".utf8), dependencies: [.init(index: 0)],
                            retry: .never, categories: [DurableCategory(name: "disk", limit: 1)]),
                    ])
            }
            let done = try await store.submit(graph("done"), uniqueKey: nil)
            // A first attempt that fails (its row in `attempts`), then the two jobs succeed.
            let failing = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
            try #require(failing.count == 1)
            let failed = try await store.finish([
                AttemptReport(lease: failing[0].lease, outcome: .failed(message: "once", retryable: true))
            ])
            #expect(failed == [.accepted(.ready)])
            for _ in 0..<2 {
                let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
                try #require(claimed.count == 1)
                let results = try await store.finish([
                    AttemptReport(lease: claimed[0].lease, outcome: .succeeded(output: Data("0".utf8)))
                ])
                #expect(results == [.accepted(.succeeded)])
            }
            #expect(try await store.record(of: done.run).finished != nil)
            let kept = try await store.submit(graph("kept"), uniqueKey: nil)

            #expect(try await store.prune(finishedBefore: Date().addingTimeInterval(3600)) == 1)
            let byRun: [(table: String, sql: String, kept: Int)] = [
                ("runs", "SELECT count(*)::int FROM runs WHERE id = $1", 1),
                ("jobs", "SELECT count(*)::int FROM jobs WHERE run = $1", 2),
                ("edges", "SELECT count(*)::int FROM edges WHERE job IN (SELECT id FROM jobs WHERE run = $1)", 1),
                (
                    "job_categories",
                    "SELECT count(*)::int FROM job_categories WHERE job IN (SELECT id FROM jobs WHERE run = $1)", 1
                ),
            ]
            for (table, sql, keptRows) in byRun {
                #expect(try await Self.count(store, sql, kept.run.rawValue) == keptRows, "\(table) of the kept run")
            }
            // The pruned run's rows, looked up by the ids it had (its jobs are gone, so not through them).
            let ids = done.jobs.map(\.rawValue)
            #expect(try await Self.count(store, "SELECT count(*)::int FROM runs WHERE id = $1", done.run.rawValue) == 0)
            for table in [
                "jobs WHERE id", "edges WHERE job", "edges WHERE dependency", "job_categories WHERE job",
                "holders WHERE job", "attempts WHERE job",
            ] {
                let left = try await Self.count(store, "SELECT count(*)::int FROM \(table) = ANY($1)", ids)
                #expect(left == 0, "\(table) of a pruned job")
            }
        }
    }
}
