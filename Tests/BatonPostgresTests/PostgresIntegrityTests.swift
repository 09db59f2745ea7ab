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

    static func texts(
        _ store: PostgresJobStore, _ sql: String, _ value: some PostgresEncodable & Sendable
    ) async throws -> [String] {
        var bindings = PostgresBindings()
        try bindings.append(value)
        return try await store.client.query(PostgresQuery(unsafeSQL: sql, binds: bindings)).collect()
            .map { try $0.decode(String.self) }
    }

    /// Independent jobs are stored by a statement of their own (``PostgresJobStore/SubmitIndependent``);
    /// it must write what the statement for any graph writes.
    @Test("a graph of independent jobs is stored exactly as the statement for any graph stores it")
    func independentJobsAreStoredAsAnyGraphIs() async throws {
        try await TestPostgres.withStore("independent") { store, _ in
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            func graph(_ count: Int) -> GraphSpec {
                GraphSpec(
                    name: "independent \(count)",
                    jobs: (0..<count).map { index in
                        JobSpec(
                            name: "job \(index)", kind: index % 3 == 0 ? "a" : "b",
                            input: Data(index % 4 == 0 ? "null".utf8 : "\(index)".utf8), priority: index % 5,
                            retry: index % 2 == 0
                                ? .never : .constant(maxAttempts: 2 + index % 3, delay: .milliseconds(index)),
                            timeout: index % 3 == 1 ? .seconds(index) : nil,
                            notBefore: index % 7 == 0 ? start.addingTimeInterval(Double(index)) : nil)
                    },
                    traceCarrier: ["traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"])
            }
            // Every column but the identities; retry policies as JSON values (their text's key order may vary).
            let jobColumns = """
                SELECT (to_jsonb(j) - 'id' - 'run' || jsonb_build_object('retry', j.retry::jsonb))::text
                FROM jobs j WHERE run = $1 ORDER BY idx
                """
            let runColumns = "SELECT (to_jsonb(r) - 'id' - 'submission' - 'created')::text FROM runs r WHERE id = $1"
            let idsInOrder = "SELECT id::text FROM jobs WHERE run = $1 ORDER BY idx"
            for count in [1, 7, 1500] {
                let light = try await store.submit(graph(count), uniqueKey: nil, submission: UUID().uuidString)
                let general = try await store.submit(
                    graph(count), uniqueKey: nil, submission: UUID().uuidString, general: true)
                let lightJobs = try await Self.texts(store, jobColumns, light.run.rawValue)
                #expect(lightJobs.count == count)
                let generalJobs = try await Self.texts(store, jobColumns, general.run.rawValue)
                #expect(generalJobs.count == count)
                let differing = zip(lightJobs, generalJobs).first { $0 != $1 }
                #expect(differing == nil, "jobs of \(count): \(differing.map { "\($0.0) against \($0.1)" } ?? "")")
                #expect(
                    try await Self.texts(store, runColumns, light.run.rawValue)
                        == (try await Self.texts(store, runColumns, general.run.rawValue)), "run of \(count)")
                // Identities in job order (older means submitted first), and returned in that order.
                for run in [light, general] {
                    let ids = try await Self.texts(store, idsInOrder, run.run.rawValue).compactMap { Int64($0) }
                    #expect(ids == ids.sorted(), "identities drawn in job order (\(count) jobs)")
                    #expect(ids == run.jobs.map(\.rawValue), "identities returned in job order (\(count) jobs)")
                }
            }
        }
    }
}
