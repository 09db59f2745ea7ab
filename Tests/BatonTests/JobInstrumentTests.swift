import Baton
import BatonTesting
import Testing

/// Instruments see every job of their queues (and of the groups running there), in lifecycle order.
@Suite(.timeLimit(.minutes(1))) struct JobInstrumentTests {
    /// Records "event job" lines.
    final class Log: JobInstrument {
        let lines = Recorder<String>()
        func jobWasAdded(_ job: Job, to queue: JobQueue) { lines.record("added \(job.name)") }
        func jobBecameReady(_ job: Job, in queue: JobQueue) { lines.record("ready \(job.name)") }
        func jobWillStart(_ job: Job, in queue: JobQueue) { lines.record("start \(job.name)") }
        func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) {
            lines.record(
                "finish \(job.name) \(outcome.didSucceed ? "ok" : outcome.isCancelled ? "cancelled" : "failed")")
        }
        func events(of name: String) -> [String] {
            lines.values.filter { $0.hasSuffix(" \(name)") || $0.contains(" \(name) ") }.map {
                String($0.split(separator: " ")[0])
            }
        }
    }

    @Test func everyJobIsSeenInLifecycleOrderIncludingGroupChildren() async {
        let log = Log()
        let queue = JobQueue(name: "watched", instruments: [log])
        let first = BlockJob(name: "first") {}
        let second = BlockJob(name: "second") {}
        second.addDependency(first)
        let child = BlockJob(name: "child") {}
        let group = GroupJob(name: "group", children: [child])
        let cancelled = BlockJob(name: "cancelled") {}
        cancelled.cancel()
        // Suspended while adding, so that `second` waits for `first` (were `first` to finish before
        // `second` registered with it, `second` would find it finished and be ready at once, which can
        // come before `first`'s finish is reported: see `JobInstrument.jobDidFinish`).
        queue.isSuspended = true
        queue.add([first, second, group, cancelled])
        queue.isSuspended = false
        await queue.waitUntilAllJobsAreFinished()
        for name in ["first", "second", "group", "child"] {
            #expect(log.events(of: name) == ["added", "ready", "start", "finish"], "\(name)")
        }
        #expect(log.events(of: "cancelled") == ["added", "finish"])
        #expect(log.lines.values.contains("finish cancelled cancelled"))
        let lines = log.lines.values
        #expect(lines.firstIndex(of: "finish first ok")! < lines.firstIndex(of: "ready second")!)
    }

    @TaskLocal static var context: String?

    /// Binds a task-local around the start of every job, as a tracer binds its `ServiceContext`.
    struct Binder: JobInstrument {
        func withStart(of job: Job, in queue: JobQueue, _ body: () -> Void) {
            JobInstrumentTests.$context.withValue("context of \(job.name)") { body() }
        }
    }

    @Test func anInstrumentCanSurroundTheStartSoThatAsyncBodiesInheritATaskLocal() async {
        let seen = Recorder<String?>()
        let queue = JobQueue(name: "bound", instruments: [Binder()])
        let async = AsyncJob(name: "async") { _ in seen.record(JobInstrumentTests.context) }
        let sync = BlockJob(name: "sync") { seen.record(JobInstrumentTests.context) }
        queue.add([async, sync])
        await queue.waitUntilAllJobsAreFinished()
        #expect(Set(seen.values.compactMap { $0 }) == ["context of async", "context of sync"])
    }

    /// Records each added job's parent group, as a tracer does to nest spans.
    final class Parents: JobInstrument {
        let seen = Recorder<String>()
        func jobWasAdded(_ job: Job, to queue: JobQueue) {
            seen.record("\(job.name) in \(job.parentGroup?.name ?? "none")")
        }
    }

    @Test func aJobKnowsItsParentGroupWhetherAddedProducedOrTopLevel() async {
        let parents = Parents()
        let queue = JobQueue(name: "parents", instruments: [parents])
        let producer = AsyncJob(name: "producer") { job in job.produce(BlockJob(name: "produced") {}) }
        let inner = GroupJob(name: "inner", children: [BlockJob(name: "deep") {}])
        let group = GroupJob(name: "group", children: [producer, inner])
        queue.add(group)
        await queue.waitUntilAllJobsAreFinished()
        #expect(
            Set(parents.seen.values) == [
                "group in none", "producer in group", "inner in group", "deep in inner", "produced in group",
            ])
        #expect(BlockJob {}.parentGroup == nil)
    }

    struct Disabled: JobInstrument {
        var isEnabled: Bool { false }
        func jobWasAdded(_ job: Job, to queue: JobQueue) {
            Issue.record("a disabled instrument was told of \(job.name)")
        }
    }

    @Test func aQueueLeavesOutInstrumentsThatAreNotEnabledAndGroupsInheritThatChoice() async {
        let log = Log()
        let queue = JobQueue(name: "some", instruments: [Disabled(), log, Disabled()])
        #expect(queue.instruments.count == 1)
        #expect(queue.instruments.first is Log)
        #expect(JobQueue(name: "none", instruments: [Disabled()]).instruments.isEmpty)
        queue.add(GroupJob(name: "group", children: [BlockJob(name: "child") {}]))
        await queue.waitUntilAllJobsAreFinished()
        #expect(log.events(of: "child") == ["added", "ready", "start", "finish"])
    }

    @Test func queuesWithoutInstrumentsHaveNone() {
        #expect(JobQueue(name: "plain").instruments.isEmpty)
    }
}
