import Baton
import BatonDurable
import BatonObservability
import CoreMetrics
import Foundation
import Tracing

// BatonObservability's catalog.

func bootstrapEverything(backend: any MetricsFactory, tracer: any Tracer) {
    // snippet: observability-bootstrap
    MetricsSystem.bootstrap(backend)
    InstrumentationSystem.bootstrap(tracer)
    let timeline = JobTimeline()
    JobQueue.defaultInstruments = [JobMetrics(), JobTracing(), timeline]
    // end snippet
}

func metrics(backend: any MetricsFactory) -> JobQueue {
    // snippet: metrics
    MetricsSystem.bootstrap(backend)
    let queue = JobQueue(name: "import", instruments: [JobMetrics()])
    // end snippet
    return queue
}

func traces(tracer: any Tracer, importJob: Job) {
    // snippet: traces
    InstrumentationSystem.bootstrap(tracer)
    let queue = JobQueue(name: "import", instruments: [JobTracing()])
    tracer.withSpan("request") { _ in
        queue.add(importJob)  // importJob's span is a child of "request"
    }
    // end snippet
}

func timeline(jobs: [Job]) async throws {
    // snippet: timeline
    let timeline = JobTimeline()
    let queue = JobQueue(name: "import", maxConcurrentJobs: 4, instruments: [timeline])
    queue.add(jobs)
    await queue.waitUntilAllJobsAreFinished()
    try timeline.html(title: "import").write(toFile: "run.html", atomically: true, encoding: .utf8)
    try timeline.chromeTraceJSON().write(toFile: "run.json", atomically: true, encoding: .utf8)
    // end snippet
}

func durableTimeline(store: any JobStore, run: DurableRun) async throws {
    // snippet: durable-timeline
    let timeline = JobTimeline()
    let worker = try DurableWorker(
        store: store, jobs: [Fetch(), CountLines()],
        configuration: .init(instruments: [JobMetrics(), timeline]))
    try await worker.run(until: run)
    try timeline.html(title: "refresh").write(toFile: "run.html", atomically: true, encoding: .utf8)
    // end snippet
}

func durableTraces(tracer: any Tracer, store: any JobStore, graph: JobGraph) async throws {
    // snippet: durable-traces
    InstrumentationSystem.bootstrap(tracer)
    let run = try await withSpan("nightly refresh") { _ in try await store.submit(graph) }
    // in a worker process, with the same tracer bootstrapped:
    try await DurableWorker(store: store, jobs: [Fetch(), CountLines()]).run()
    // end snippet
    _ = run
}
