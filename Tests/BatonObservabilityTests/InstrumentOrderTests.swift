import Baton
import BatonObservability
import BatonTesting
import InMemoryTracing
import MetricsTestKit
import Testing

/// A review (7 December 2026): instruments were told of a job's addition after it had joined its queue,
/// so a cancel in between (a group cancelled while it adds children reaches them as they join) finished
/// the job first: its span was started after its end and never ended, the ready gauge kept it for
/// good, the cancellation was not counted, and the timeline showed it running for ever.
@Suite(.timeLimit(.minutes(1))) struct InstrumentOrderTests {
    /// Cancels each job as the queue says it was added (before the other instruments hear of it).
    final class Canceller: JobInstrument, Sendable {
        func jobWasAdded(_ job: Job, to queue: JobQueue) { job.cancel() }
        func jobBecameReady(_ job: Job, in queue: JobQueue) {}
        func jobWillStart(_ job: Job, in queue: JobQueue) {}
        func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) {}
        func withStart(of job: Job, in queue: JobQueue, _ body: () -> Void) { body() }
    }

    @Test func aJobCancelledAsItIsAddedIsAddedThenFinishedForEveryInstrument() async throws {
        let metrics = TestMetrics()
        let tracer = InMemoryTracer()
        let timeline = JobTimeline()
        let queue = JobQueue(
            name: "q", instruments: [Canceller(), JobMetrics(factory: metrics), JobTracing(tracer: tracer), timeline])
        let victim = BlockJob(name: "victim") {}
        queue.add(victim)
        await queue.waitUntilAllJobsAreFinished()
        #expect(victim.outcomeIfDecided?.isCancelled == true)

        #expect(tracer.finishedSpans.map(\.operationName) == ["victim"], "the span ended")
        #expect(tracer.activeSpans.isEmpty, "no span left open: \(tracer.activeSpans.map(\.operationName))")
        typealias Name = JobMetrics.Name
        #expect(metrics.counterTotal(label: Name.cancelled, dimensions: [("queue", "q"), ("kind", "BlockJob")]) == 1)
        #expect(((try? metrics.expectMeter(Name.ready, [("queue", "q")]))?.lastValue ?? 0) == 0, "not left ready")
        let entry = try #require(timeline.entries.first { $0.id == victim.id })
        #expect(entry.finished != nil, "the timeline saw it finish")
        #expect(entry.ready == nil, "and never ready")
    }
}
