import Baton
import BatonDurable
import BatonTesting
import Foundation
import InMemoryTracing
import PostgresNIO
import Testing
import Tracing

@testable import BatonPostgres

/// The submitter's trace context through a PostgreSQL store into the worker, and the migration that
/// added it.
@Suite("PostgreSQL trace context", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresTracingTests {
    struct Traced: DurableJob {
        static let kind = "test.pg-traced"
        let tracer: InMemoryTracer
        func run(_ label: String, context: DurableJobContext) async throws -> String {
            tracer.startSpan("inside \(context.name)", context: ServiceContext.current ?? .topLevel).end()
            return label
        }
    }

    @Test("each attempt's span is a child of the submitter's span; the body runs in the attempt's")
    func submitterIsParent() async throws {
        try await TestPostgres.withStore("tracing") { store, _ in
            let tracer = InMemoryTracer()
            var graph = JobGraph(name: "traced")
            let first = graph.add(Traced.self, input: "first", name: "first")
            graph.add(Traced.self, inputFrom: first, name: "second")
            let run = try await tracer.withSpan("submit") { _ in try await store.submit(graph, instrument: tracer) }
            let worker = try DurableWorker(
                store: store, jobs: [Traced(tracer: tracer)],
                configuration: .init(id: "pg-traced", pollInterval: .milliseconds(50), instruments: [], tracer: tracer))
            try await withDeadline(.seconds(30), "the traced run") {
                let counts = try await worker.run(until: run).counts
                #expect(counts == [.succeeded: 2])
            }
            let spans = Dictionary(tracer.finishedSpans.map { ($0.operationName, $0) }, uniquingKeysWith: { a, _ in a })
            let submit = try #require(spans["submit"])
            for name in ["first", "second"] {
                let attempt = try #require(spans[name], "no span of the attempt of '\(name)'")
                #expect(attempt.traceID == submit.traceID)
                #expect(attempt.parentSpanID == submit.spanID)
                #expect(attempt.attributes.get("baton.outcome") == .string("succeeded"))
                #expect(try #require(spans["inside \(name)"]).parentSpanID == attempt.spanID)
            }
        }
    }

    @Test("a schema at version 1 gets the trace context column, and its runs keep working")
    func migratesFromVersion1() async throws {
        try await TestPostgres.withStore("migrate2") { store, configuration in
            var graph = JobGraph(name: "old")
            graph.add(Traced.self, input: "old", name: "old")
            let old = try await store.submit(graph)
            // A job that waits for its time, as version 9 stored it.
            var later = JobGraph(name: "later")
            later.add(Traced.self, input: "later", name: "later", notBefore: Date().addingTimeInterval(3600))
            let waiting = try await store.submit(later)
            try await store.client.query("ALTER TABLE jobs DROP COLUMN waiting")  // version 10's, with its indexes
            try await store.client.query("ALTER TABLE runs DROP COLUMN trace_context")
            // Version 3's columns too, so that the schema is as version 1 left it.
            try await store.client.query("ALTER TABLE runs DROP COLUMN submission")
            try await store.client.query(
                "ALTER TABLE jobs DROP COLUMN finished_by, DROP COLUMN finished_report, DROP COLUMN finished_result")
            try await store.client.query("DROP TABLE attempts")  // version 5's
            // Version 6's (its indexes go with the columns; `runs_created` and `runs_name` are dropped).
            try await store.client.query(
                "ALTER TABLE runs DROP COLUMN jobs, DROP COLUMN failed, DROP COLUMN cancelled")
            try await store.client.query("DROP INDEX runs_open, runs_name, runs_created")
            try await store.client.query("ALTER TABLE jobs DROP COLUMN added_by")
            try await store.client.query("ALTER TABLE edges DROP COLUMN includes_added")
            try await store.client.query("DROP TABLE schedules")
            try await store.client.query("ALTER TABLE jobs DROP COLUMN started")  // version 7's
            // Version 9's (version 8's index of ready jobs by start went with version 10's column): the
            // ready jobs' index as version 1 made it.
            try await store.client.query("DROP INDEX jobs_run_name, jobs_run_wide_name")
            try await store.client.query("CREATE INDEX jobs_ready ON jobs (priority DESC, id) WHERE state = 'ready'")
            try await store.client.query("UPDATE baton_schema_version SET version = 1")
            let reopened = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            defer { reopened.close() }
            let version = try await store.client.query("SELECT version FROM baton_schema_version")
                .collect().first?.decode(Int.self)
            #expect(version == PostgresJobStore.schemaVersion)
            #expect(PostgresJobStore.schemaVersion == 10)
            // Versions 8 to 10 replaced the index of all ready jobs with the claimable jobs by kind and the
            // jobs waiting for their time by kind and time.
            let indexes = try await store.client.query(
                """
                SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()
                    AND (indexname LIKE 'jobs_ready%' OR indexname IN ('jobs_claim', 'jobs_waiting'))
                """
            ).collect().map { try $0.decode(String.self) }
            #expect(Set(indexes) == ["jobs_claim", "jobs_waiting"])
            // Version 10 marked the job waiting for its time.
            let marked = try await store.client.query(
                "SELECT waiting FROM jobs WHERE run = \(waiting.id.rawValue)"
            ).collect().map { try $0.decode(Bool.self) }
            #expect(marked == [true])
            #expect(try await reopened.traceCarrier(of: old.id) == [:])
            let claimed = try await reopened.claim(worker: "w", kinds: [Traced.kind], limit: 5, lease: .seconds(5))
            #expect(claimed.map(\.name) == ["old"])
            let output = Data("\"done\"".utf8)
            let report = AttemptReport(lease: claimed[0].lease, outcome: .succeeded(output: output))
            #expect(try await reopened.finish([report]) == [.accepted(.succeeded)])
            // Version 6 counted the run's jobs when it migrated.
            let summary = try #require(try await reopened.runs(RunFilter()).runs.first { $0.id == old.id })
            #expect(summary.jobs == 1 && summary.unfinished == 0)
            #expect(summary.state == .succeeded)
        }
    }
}
