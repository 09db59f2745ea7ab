import Baton
import BatonObservability
import BatonTesting
import Foundation
import InMemoryTracing
import JobStoreConformance
import MetricsTestKit
import Testing
import Tracing

@testable import BatonDurable

/// A durable worker's attempts on the timeline, in the metrics, and traced from the submitter's span.
@Suite(.timeLimit(.minutes(1))) struct DurableObservingTests {
    /// Starts a span of its own in its body, under whatever context the body runs in.
    struct Traced: DurableJob {
        static let kind = "test.traced"
        let tracer: InMemoryTracer
        func run(_ label: String, context: DurableJobContext) async throws -> String {
            tracer.startSpan("inside \(context.name)", context: ServiceContext.current ?? .topLevel).end()
            return label
        }
    }

    struct FirstAttemptFails: Error {}

    /// Fails its first attempt.
    struct FailOnce: DurableJob {
        static let kind = "test.fail-once"
        func run(_ label: String, context: DurableJobContext) async throws -> String {
            if context.attempt == 1 { throw FirstAttemptFails() }
            return label
        }
    }

    /// Its first attempt opens `started` and waits until cancelled; later ones return at once.
    struct StallOnce: DurableJob {
        static let kind = "test.stall-once"
        let started: Gate
        func run(_ label: String, context: DurableJobContext) async throws -> String {
            guard context.attempt == 1 else { return label }
            started.open()
            try await Task.sleep(for: .seconds(3600))  // until cancelled: the test never waits for this
            return label
        }
    }

    /// Opens a gate per (kind, end) as attempts end.
    final class Endings: JobInstrument, DurableWorkerInstrument {
        let flakySucceeded = Gate()
        let leaseLost = Gate()
        func attemptEnded(_ attempt: ClaimedJob, job: Job, end: DurableAttemptEnd, worker: DurableWorker) {
            if attempt.kind == FailOnce.kind, end == .succeeded { flakySucceeded.open() }
            // Lost at the renewal, or (should the worker's lease watch see the moved clock first) stopped
            // as running out of lease and its report rejected: the thief holds the lease either way.
            if end == .leaseLost || end == .rejected { leaseLost.open() }
        }
    }

    @Test func theSubmittersSpanIsTheParentOfEveryAttemptAndTheBodyRunsInTheAttemptsSpan() async throws {
        let tracer = InMemoryTracer()
        let store = try SQLiteJobStore.inMemory()
        try await checkTracedRun(store: store, tracer: tracer)
    }

    @Test func withJobTracingOnTheWorkersQueueTheJobsSpanIsAChildOfTheAttemptsAndTheBodyRunsInIt() async throws {
        let tracer = InMemoryTracer()
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "nested")
        graph.add(Traced.self, input: "only", name: "only")
        let run = try await tracer.withSpan("submit") { _ in try await store.submit(graph, instrument: tracer) }
        let worker = try DurableWorker(
            store: store, jobs: [Traced(tracer: tracer)],
            configuration: .init(
                id: "w", pollInterval: .milliseconds(50), instruments: [JobTracing(tracer: tracer)], tracer: tracer))
        try await withDeadline(.seconds(30), "the run") { _ = try await worker.run(until: run) }
        await worker.queue.waitUntilAllJobsAreFinished()
        let spans = tracer.finishedSpans
        let submit = try #require(spans.first { $0.operationName == "submit" })
        let attempt = try #require(spans.first { $0.operationName == "only" && $0.kind == .consumer })
        let job = try #require(spans.first { $0.operationName == "only" && $0.kind == .internal })
        let inside = try #require(spans.first { $0.operationName == "inside only" })
        #expect(attempt.parentSpanID == submit.spanID)
        #expect(job.parentSpanID == attempt.spanID)
        #expect(job.attributes.get("baton.queue") == .string("durable w"))
        #expect(inside.parentSpanID == job.spanID)
        #expect(Set([submit, attempt, job, inside].map(\.traceID)).count == 1)
    }

    @Test func aGraphEncodedWithoutATraceCarrierDecodes() throws {
        let old = Data(#"{"name":"g","jobs":[]}"#.utf8)
        let graph = try JSONDecoder().decode(GraphSpec.self, from: old)
        #expect(graph.name == "g" && graph.traceCarrier.isEmpty)
    }

    @Test func aStoreOfSchemaVersion1IsMigratedAndItsRunsStillRun() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-obs-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("jobs.sqlite").path
        var graph = JobGraph(name: "old")
        graph.add(FailOnce.self, input: "old", name: "old", retry: .immediate(maxAttempts: 2))
        let old: DurableRun
        do {
            let store = try SQLiteJobStore(path: path)
            old = try await store.submit(graph)
            // Back to version 1: the table as it was before trace contexts.
            try await store.writer.write { db in
                try db.execute(sql: "ALTER TABLE baton_runs DROP COLUMN trace_context")
                // And without version 3's counts, indexes and attempts.
                for index in ["open", "failed", "cancelled", "name", "created"] {
                    try db.execute(sql: "DROP INDEX baton_runs_\(index)")
                }
                for column in ["jobs", "failed", "cancelled"] {
                    try db.execute(sql: "ALTER TABLE baton_runs DROP COLUMN \(column)")
                }
                try db.execute(sql: "DROP TABLE baton_attempts")
                try db.execute(sql: "DROP TABLE baton_schedules")
                try db.execute(sql: "ALTER TABLE baton_jobs DROP COLUMN added_by")
                try db.execute(sql: "ALTER TABLE baton_edges DROP COLUMN includes_added")
                try db.execute(sql: "UPDATE baton_durable_meta SET value = '1' WHERE key = 'schema'")
            }
        }
        let store = try SQLiteJobStore(path: path)
        let version = try await store.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT value FROM baton_durable_meta WHERE key = 'schema'")
        }
        #expect(version == SQLiteJobStore.schemaVersion)
        #expect(try await store.traceCarrier(of: old.id) == [:])
        let tracer = InMemoryTracer()
        let worker = try DurableWorker(
            store: store, jobs: [FailOnce()],
            configuration: .init(id: "w", pollInterval: .milliseconds(50), instruments: [], tracer: tracer))
        try await withDeadline(.seconds(30), "the old run") {
            let counts = try await worker.run(until: old).counts
            #expect(counts == [.succeeded: 1])
        }
        // Submitted before tracing was stored: its attempts' spans are roots.
        let outcomes = tracer.finishedSpans.map { span -> String in
            guard case .string(let outcome) = span.attributes.get("baton.outcome") else {
                return "\(span.operationName) -"
            }
            return "\(span.operationName) \(outcome)"
        }
        #expect(outcomes == ["old retrying", "old succeeded"])
        #expect(tracer.finishedSpans.allSatisfy { $0.parentSpanID == nil })
    }

    @Test func claimsLostLeasesAndRetriesAreMarkedAndCountedExactly() async throws {
        let clock = ManualDurableClock()
        let store = try SQLiteJobStore.inMemory(clock: clock.clock)
        var graph = JobGraph(name: "observed")
        graph.add(FailOnce.self, input: "flaky", name: "flaky", retry: .immediate(maxAttempts: 3))
        graph.add(StallOnce.self, input: "stall", name: "stall", retry: .immediate(maxAttempts: 3))
        let run = try await store.submit(graph)
        let metrics = TestMetrics()
        let timeline = JobTimeline()
        let endings = Endings()
        let started = Gate()
        let worker = try DurableWorker(
            store: store, jobs: [FailOnce(), StallOnce(started: started)],
            configuration: .init(
                id: "w", maxConcurrentJobs: 4, leaseDuration: .seconds(5), renewInterval: .seconds(3600),
                pollInterval: .milliseconds(50), instruments: [JobMetrics(factory: metrics), timeline, endings]))
        let running = Task { try await worker.run(until: run) }
        try await withDeadline(.seconds(30), "flaky succeeds and stall's first attempt starts") {
            await endings.flakySucceeded.waitAsync()
            await started.waitAsync()
        }
        // Stall's lease runs out and another worker takes the job; this worker learns it at its renewal.
        clock.advance(by: .seconds(6))
        let thief = try await store.claim(worker: "thief", kinds: [StallOnce.kind], limit: 1, lease: .seconds(30))
        #expect(thief.map(\.attempt) == [2])
        await worker.renewLeases()
        try await withDeadline(.seconds(30), "the lost attempt ends") { await endings.leaseLost.waitAsync() }
        // The thief gives the job back unattempted: this worker runs attempt 2.
        try await store.release(thief.map(\.lease))
        try await withDeadline(.seconds(30), "the run") {
            let counts = try await running.value.counts
            #expect(counts == [.succeeded: 2])
        }
        await worker.queue.waitUntilAllJobsAreFinished()

        let entries = timeline.entries
        let rows = entries.map { "\($0.name) \($0.outcome?.rawValue ?? "-"): \($0.marks.map(\.kind.rawValue))" }
        #expect(
            rows.sorted() == [
                "flaky failed: [\"claimed\", \"retried\"]", "flaky succeeded: [\"claimed\"]",
                "stall cancelled: [\"claimed\", \"lease lost\"]", "stall succeeded: [\"claimed\"]",
            ])
        let json = timeline.chromeTraceJSON()
        #expect(json.contains("lease lost") && json.contains("retried") && json.contains("claimed"))

        typealias Name = JobMetrics.Name
        func total(_ label: String, _ kind: String) -> Int64 {
            metrics.counterTotal(label: label, dimensions: [("queue", "durable w"), ("kind", kind)])
        }
        #expect(total(Name.retried, FailOnce.kind) == 1)
        #expect(total(Name.retried, StallOnce.kind) == 1)
        #expect(total(Name.leasesLost, StallOnce.kind) == 1)
        #expect(total(Name.leasesLost, FailOnce.kind) == 0)
        #expect(total(Name.started, "AsyncJob") == 4)
        #expect(total(Name.succeeded, "AsyncJob") == 2)
        #expect(total(Name.failed, "AsyncJob") == 1)
        #expect(total(Name.cancelled, "AsyncJob") == 1)
    }
}

/// Submits a two-job chain inside a span and runs it: each attempt's span is a child of that span, and
/// a span started in a job's body is a child of its attempt's. Shared with the PostgreSQL tests' copy.
func checkTracedRun(store: any JobStore, tracer: InMemoryTracer) async throws {
    var graph = JobGraph(name: "traced")
    let first = graph.add(DurableObservingTests.Traced.self, input: "first", name: "first")
    graph.add(DurableObservingTests.Traced.self, inputFrom: first, name: "second")
    let (run, submitter) = try await tracer.withSpan("submit") { span in
        (try await store.submit(graph, instrument: tracer), span.context)
    }
    #expect(try await store.traceCarrier(of: run.id).isEmpty == false)
    let worker = try DurableWorker(
        store: store, jobs: [DurableObservingTests.Traced(tracer: tracer)],
        configuration: .init(id: "traced-worker", pollInterval: .milliseconds(50), instruments: [], tracer: tracer))
    try await withDeadline(.seconds(30), "the traced run") {
        let counts = try await worker.run(until: run).counts
        #expect(counts == [.succeeded: 2])
    }
    let spans = Dictionary(tracer.finishedSpans.map { ($0.operationName, $0) }, uniquingKeysWith: { a, _ in a })
    let submitSpan = try #require(spans["submit"])
    #expect(submitSpan.spanID == submitter.inMemorySpanContext?.spanID)
    for name in ["first", "second"] {
        let attempt = try #require(spans[name], "no span of the attempt of '\(name)'")
        #expect(attempt.traceID == submitSpan.traceID)
        #expect(attempt.parentSpanID == submitSpan.spanID)
        #expect(attempt.kind == .consumer)
        #expect(attempt.attributes.get("baton.outcome") == .string("succeeded"))
        #expect(attempt.attributes.get("baton.attempt") == .int64(1))
        #expect(attempt.attributes.get("baton.job.kind") == .string(DurableObservingTests.Traced.kind))
        #expect(attempt.attributes.get("baton.durable.worker") == .string("traced-worker"))
        let inside = try #require(spans["inside \(name)"])
        #expect(inside.parentSpanID == attempt.spanID)
    }
}
