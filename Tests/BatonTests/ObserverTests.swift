import BatonTesting
import Testing

@testable import Baton

@Suite(.timeLimit(.minutes(1))) struct ObserverTests {
    final class Log: JobObserver {
        let events = Recorder<String>()
        func jobDidStart(_ job: Job) { events.record("start \(job.name)") }
        func jobDidCancel(_ job: Job, reason: any Error) { events.record("cancel \(job.name)") }
        func job(_ job: Job, didProduce newJob: Job) { events.record("produce \(newJob.name)") }
        func jobDidFinish(_ job: Job, outcome: JobOutcome) { events.record("finish \(job.name) \(outcome)") }
    }

    @Test func eventsArriveInLifecycleOrder() async {
        let log = Log()
        let queue = JobQueue(name: "observed")
        let child = BlockJob(name: "child") {}
        let job = BlockJob(name: "parent") {}
        let box = JobBox()
        job.addExecutionBlock { box.job!.produce(child) }
        box.job = job
        job.addObserver(log)
        queue.add(job)
        _ = await job.outcome
        _ = await child.outcome
        #expect(log.events.values == ["start parent", "produce child", "finish parent succeeded"])
    }

    /// `onFinish` observers hear only the finish, so a job observed by nothing else records no start,
    /// cancel or progress events; an observer of those added beside them still hears every one.
    @Test func finishObserversAloneRecordNoEventsAndOthersStillHearEveryOne() async {
        let job = BlockJob(name: "job") {}
        let finishes = Recorder<String>()
        job.onFinish { finishes.record("1 \($0)") }
        job.onFinish { finishes.record("2 \($0)") }
        #expect(!job.withCore { $0.wantsEvents })
        let log = Log()
        job.addObserver(log)
        #expect(job.withCore { $0.wantsEvents })
        job.onFinish { finishes.record("3 \($0)") }
        JobQueue(name: "observed").add(job)
        _ = await job.outcome
        #expect(log.events.values == ["start job", "finish job succeeded"])
        #expect(finishes.values == ["1 succeeded", "2 succeeded", "3 succeeded"])
        #expect(!job.withCore { $0.wantsEvents }, "observers are let go of at the finish")
    }

    @Test func aJobCancelledBeforeStartingReportsCancelThenFinishAndNoStart() async {
        let log = Log()
        let queue = JobQueue(name: "c")
        queue.isSuspended = true
        let job = BlockJob(name: "j") {}
        job.addObserver(log)
        queue.add(job)
        job.cancel()
        _ = await job.outcome
        #expect(log.events.values.count == 2)
        #expect(log.events.values.first == "cancel j")
        #expect(log.events.values.last?.hasPrefix("finish j cancelled") == true)
    }

    @Test func cancelDuringExecutionComesBetweenStartAndFinish() async {
        let log = Log()
        let inside = Gate()
        let release = Gate()
        let job = AsyncJob(name: "j") { _ in
            inside.open()
            await release.waitAsync()
        }
        job.addObserver(log)
        JobQueue().add(job)
        await inside.waitAsync()
        job.cancel()
        job.cancel()  // at most once
        release.open()
        _ = await job.outcome
        #expect(log.events.values.map { String($0.split(separator: " ").first!) } == ["start", "cancel", "finish"])
    }

    @Test func closuresObserveAndAnOnFinishAddedLateStillFires() async throws {
        let events = Recorder<String>()
        let job = BlockJob(name: "j") {}
        job.onStart { _ in events.record("start") }
        job.onCancel { _, _ in events.record("cancel") }
        job.onFinish { outcome in events.record("finish \(outcome)") }
        try job.start()
        job.onFinish { outcome in events.record("late \(outcome)") }
        #expect(events.values == ["start", "finish succeeded", "late succeeded"])
    }

    @Test func dependentsStartOnlyAfterTheFinishObserversReturned() async {
        let order = Recorder<String>()
        let first = BlockJob(name: "first") {}
        first.onFinish { _ in order.record("observer") }
        let second = BlockJob(name: "second") { order.record("second") }
        second.addDependency(first)
        JobQueue().add([first, second])
        _ = await second.outcome
        #expect(order.values == ["observer", "second"])
    }

    @Test func manyObserversEachHearEveryEventOnce() async {
        let job = BlockJob(name: "j") {}
        let logs = (0..<20).map { _ in Log() }
        for log in logs { job.addObserver(log) }
        JobQueue().add(job)
        _ = await job.outcome
        for log in logs { #expect(log.events.values == ["start j", "finish j succeeded"]) }
    }
}
