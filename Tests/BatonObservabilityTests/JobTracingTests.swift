import Baton
import BatonObservability
import BatonTesting
import InMemoryTracing
import Testing
import Tracing

/// Spans of jobs: one per job, nested under groups and producers, linked to dependencies, with the
/// submitter's context reaching the body.
@Suite(.timeLimit(.minutes(1))) struct JobTracingTests {
    struct Boom: Error {}

    enum RequestKey: ServiceContextKey {
        typealias Value = String
    }

    func spans(_ tracer: InMemoryTracer) -> [String: FinishedInMemorySpan] {
        Dictionary(tracer.finishedSpans.map { ($0.operationName, $0) }, uniquingKeysWith: { first, _ in first })
    }

    @Test func everyJobHasOneSpanWithItsQueueOutcomeAndAttempt() async {
        let tracer = InMemoryTracer()
        let queue = JobQueue(name: "traced", instruments: [JobTracing(tracer: tracer)])
        let ok = BlockJob(name: "ok") {}
        let failing = BlockJob(name: "failing") { throw Boom() }
        let cancelled = BlockJob(name: "cancelled") {}
        cancelled.cancel()
        let retry = RetryJob(name: "retry", maxAttempts: 2) { attempt in
            BlockJob(name: "attempt \(attempt)") { if attempt == 1 { throw Boom() } }
        }
        queue.add([ok, failing, cancelled, retry])
        await queue.waitUntilAllJobsAreFinished()
        let spans = spans(tracer)
        #expect(tracer.finishedSpans.count == 6)
        #expect(Set(spans.keys) == ["ok", "failing", "cancelled", "retry", "attempt 1", "attempt 2"])
        #expect(tracer.activeSpans.isEmpty)
        #expect(spans["ok"]?.attributes.get("baton.queue") == .string("traced"))
        #expect(spans["ok"]?.attributes.get("baton.job.kind") == .string("BlockJob"))
        #expect(spans["ok"]?.attributes.get("baton.outcome") == .string("succeeded"))
        #expect(spans["ok"]?.events.map(\.name) == ["ready", "started"])
        #expect(spans["failing"]?.attributes.get("baton.outcome") == .string("failed"))
        #expect(spans["failing"]?.errors.count == 1)
        #expect(spans["failing"]?.status?.code == .error)
        #expect(spans["cancelled"]?.attributes.get("baton.outcome") == .string("cancelled"))
        #expect(spans["cancelled"]?.events.isEmpty == true)
        #expect(spans["attempt 1"]?.attributes.get("baton.attempt") == .int64(1))
        #expect(spans["attempt 2"]?.attributes.get("baton.attempt") == .int64(2))
        #expect(spans["attempt 2"]?.attributes.get("baton.queue") == .string("retry.children"))
    }

    @Test func groupChildrenAndProducedJobsAreChildSpansAndDependenciesAreLinks() async throws {
        let tracer = InMemoryTracer()
        let queue = JobQueue(name: "traced", instruments: [JobTracing(tracer: tracer)])
        let first = BlockJob(name: "first") {}
        let second = BlockJob(name: "second") {}
        second.addDependency(first)
        let lateAdded = Gate()
        let producer = AsyncJob(name: "producer") { job in
            job.produce(BlockJob(name: "produced") {})
            await lateAdded.waitAsync()  // the group is still running when the late child comes
        }
        let late = BlockJob(name: "late") {}
        let group = GroupJob(name: "group", children: [first, second, producer])
        // Added before its dependency: linked once the dependency is added.
        let after = BlockJob(name: "after") {}
        after.addDependency(group)
        queue.add([after, group])
        group.addChild(late)
        lateAdded.open()
        await queue.waitUntilAllJobsAreFinished()
        let spans = spans(tracer)
        let groupSpan = try #require(spans["group"])
        #expect(groupSpan.parentSpanID == nil)
        for child in ["first", "second", "producer", "late"] {
            #expect(spans[child]?.parentSpanID == groupSpan.spanID, "\(child)")
            #expect(spans[child]?.traceID == groupSpan.traceID, "\(child)")
        }
        #expect(spans["produced"]?.parentSpanID == spans["producer"]?.spanID)
        let secondLinks = try #require(spans["second"]).links.compactMap { $0.context.inMemorySpanContext?.spanID }
        #expect(secondLinks == [spans["first"]?.spanID])
        let afterLinks = try #require(spans["after"]).links.compactMap { $0.context.inMemorySpanContext?.spanID }
        #expect(afterLinks == [groupSpan.spanID])
        #expect(spans["first"]?.links.isEmpty == true)
    }

    @Test func retryAttemptsAndRepeatIterationsAreSiblingsUnderTheirJobsSpan() async throws {
        let tracer = InMemoryTracer()
        let queue = JobQueue(name: "traced", instruments: [JobTracing(tracer: tracer)])
        let retry = RetryJob(name: "retry", maxAttempts: 3) { attempt in
            AsyncJob(name: "attempt \(attempt)") { _ in if attempt < 3 { throw Boom() } }
        }
        let repeating = RepeatJob(name: "repeat", first: BlockJob(name: "iteration 1") {}) { previous, _ in
            let number = Int(previous.name.split(separator: " ").last!)! + 1
            return number > 3 ? nil : BlockJob(name: "iteration \(number)") {}
        }
        queue.add([retry, repeating])
        try await withDeadline(.seconds(30), "the retry and repeat jobs finish") {
            await queue.waitUntilAllJobsAreFinished()
        }
        let spans = spans(tracer)
        let retrySpan = try #require(spans["retry"])
        let repeatSpan = try #require(spans["repeat"])
        for attempt in 1...3 {
            let span = try #require(spans["attempt \(attempt)"])
            #expect(
                span.parentSpanID == retrySpan.spanID,
                "attempt \(attempt) is a child of \(span.parentSpanID.map { "\($0)" } ?? "nothing"), not of the retry job"
            )
            let iteration = try #require(spans["iteration \(attempt)"])
            #expect(
                iteration.parentSpanID == repeatSpan.spanID, "iteration \(attempt) is not a child of the repeat job")
        }
    }

    @Test func theSubmittersContextReachesTheBodyInsideTheJobsSpan() async throws {
        let tracer = InMemoryTracer()
        let queue = JobQueue(name: "traced", instruments: [JobTracing(tracer: tracer)])
        let seen = Recorder<String>()
        let request = tracer.startSpan("request")
        var submitter = request.context
        submitter[RequestKey.self] = "request 42"
        let async = AsyncJob(name: "async") { _ in
            let context = ServiceContext.current
            seen.record("async \(context?[RequestKey.self] ?? "-") \(context?.inMemorySpanContext?.spanID ?? "-")")
        }
        let sync = BlockJob(name: "sync") {
            let context = ServiceContext.current
            seen.record("sync \(context?[RequestKey.self] ?? "-") \(context?.inMemorySpanContext?.spanID ?? "-")")
        }
        ServiceContext.withValue(submitter) { queue.add([async, sync]) }
        await queue.waitUntilAllJobsAreFinished()
        request.end()
        let spans = spans(tracer)
        let asyncSpan = try #require(spans["async"])
        let syncSpan = try #require(spans["sync"])
        #expect(asyncSpan.parentSpanID == spans["request"]?.spanID)
        #expect(syncSpan.parentSpanID == spans["request"]?.spanID)
        #expect(Set(seen.values) == ["async request 42 \(asyncSpan.spanID)", "sync request 42 \(syncSpan.spanID)"])
    }

    @Test func withoutATracerTheInstrumentIsLeftOutOfQueues() {
        #expect(!JobTracing().isEnabled)
        #expect(JobQueue(name: "plain", instruments: [JobTracing()]).instruments.isEmpty)
        #expect(JobTracing(tracer: InMemoryTracer()).isEnabled)
    }
}
