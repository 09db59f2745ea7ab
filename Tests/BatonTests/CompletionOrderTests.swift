import BatonTesting
import Dispatch
import Testing

@testable import Baton

/// A finished job hands over outside its lock (categories, what it captured, instruments, its queue's
/// slot). Whoever waits for it, from before or from during that hand-over, resumes only once it is done,
/// and code that the hand-over runs may wait for the job without waiting for itself.
@Suite(.timeLimit(.minutes(1))) struct CompletionOrderTests {
    /// Holds the finish of the job named "held" inside the hand-over until `release` opens.
    final class HoldingFinish: JobInstrument, @unchecked Sendable {
        // @unchecked Sendable: gates are thread-safe; `left` is a thread-safe box.
        let entered = Gate()
        let release = Gate()
        let left = Protected(false)
        func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) {
            guard job.name == "held" else { return }
            entered.open()
            release.wait()  // the finishing thread is a queue worker, not one of the task pool's
            left.withLock { $0 = true }
        }
    }

    @Test func aWaitThatBeginsDuringTheHandOverReturnsOnceItIsDone() async throws {
        let holding = HoldingFinish()
        defer { holding.release.open() }
        // Dedicated threads: the held finish blocks its thread, which must not be one of the task pool's.
        let queue = JobQueue(name: "handing over", instruments: [holding], workerThreads: .dedicated)
        let job = BlockJob(name: "held") {}
        queue.add(job)
        try await withDeadline(.seconds(30), "the job's finish reaching the instrument") {
            await holding.entered.waitAsync()
        }
        // Finished (its observers were told), and its hand-over under way.
        #expect(job.isFinished)
        #expect(job.withCore { $0.lifecycle.isHandingOver })
        let returned = Protected(false)
        let waiting = Task {
            let outcome = await job.outcome
            returned.withLock { $0 = true }
            return outcome
        }
        // The late waiter is registered and has not returned while the hand-over cannot end.
        #expect(await eventually { job.withCore { $0.waiters.count } == 1 })
        #expect(!returned.withLock { $0 })
        holding.release.open()
        try await withDeadline(.seconds(30), "the late waiter returning") { #expect(await waiting.value.didSucceed) }
        #expect(holding.left.withLock { $0 }, "the wait returned before the hand-over ended")
        #expect(!job.withCore { $0.lifecycle.isHandingOver })
    }

    @Test func aQueueDrainsOnlyOnceItsLastJobHandedOver() async throws {
        let holding = HoldingFinish()
        defer { holding.release.open() }
        let queue = JobQueue(name: "draining", instruments: [holding])
        queue.isSuspended = true
        let job = BlockJob(name: "held") {}
        queue.add(job)
        // Cancelled on a thread of its own (not a worker loop, nor one of the task pool's, as the held
        // finish blocks it): the job finishes there, and the queue is told in the hand-over.
        DispatchQueue(label: "cancelling").async { job.cancel() }
        try await withDeadline(.seconds(30), "the job's finish reaching the instrument") {
            await holding.entered.waitAsync()
        }
        let drained = Task {
            await queue.waitUntilAllJobsAreFinished()
            return job.withCore { !$0.lifecycle.isHandingOver }
        }
        holding.release.open()
        try await withDeadline(.seconds(30), "the queue draining") {
            #expect(await drained.value, "the queue drained while its last job was still handing over")
        }
    }

    /// Blocks, when freed, until `release` opens: holds a finish inside the release of what the job
    /// let go of.
    final class HoldsReleaseWhenFreed: @unchecked Sendable {
        // @unchecked Sendable: immutable references to thread-safe gates.
        let entered: Gate
        let release: Gate
        init(entered: Gate, release: Gate) {
            self.entered = entered
            self.release = release
        }
        deinit {
            entered.open()
            release.wait()  // a dedicated worker thread, not one of the task pool's
        }
    }

    @Test func theFinishedJobsCategoryIsHandedBackBeforeWhatItLetGoOfIsReleased() async throws {
        let entered = Gate()
        let release = Gate()
        defer { release.open() }
        let scope = ExclusivityScope(name: "late")
        let queue = JobQueue(name: "exclusive", exclusivityScope: scope, workerThreads: .dedicated)
        let job = BlockJob(name: "held") {}
        job.addCondition(MutuallyExclusive(category: "db"))
        do {
            let held = HoldsReleaseWhenFreed(entered: entered, release: release)
            job.onFinish { _ in _ = held }  // freed in the hand-over
        }
        queue.add(job)
        try await withDeadline(.seconds(30), "the job's hand-over starting") { await entered.waitAsync() }
        // The hand-over is under way (its waiters wait), and the category is free already: a job that
        // needs it runs now.
        #expect(job.withCore { $0.lifecycle.isHandingOver })
        #expect(scope.holders(of: "db").isEmpty)
        let next = BlockJob(name: "next") {}
        next.addCondition(MutuallyExclusive(category: "db"))
        JobQueue(name: "other", exclusivityScope: scope).add(next)
        try await withDeadline(.seconds(30), "a job needing the category while the hand-over is held") {
            #expect(await next.outcome.didSucceed)
        }
        let waiting = Task { await job.outcome }
        #expect(await eventually { job.withCore { $0.waiters.count } == 1 })
        release.open()
        try await withDeadline(.seconds(30), "the late waiter returning") { _ = await waiting.value }
    }

    @Test func aDependentAddedDuringTheHandOverStartsOnceItIsDone() async throws {
        let holding = HoldingFinish()
        defer { holding.release.open() }
        let queue = JobQueue(name: "dependency", instruments: [holding], workerThreads: .dedicated)
        let job = BlockJob(name: "held") {}
        queue.add(job)
        try await withDeadline(.seconds(30), "the job's finish reaching the instrument") {
            await holding.entered.waitAsync()
        }
        let sawFinished = Protected<Bool?>(nil)
        let dependent = BlockJob(name: "dependent") {
            sawFinished.withLock { $0 = job.withCore { !$0.lifecycle.isHandingOver } }
        }
        dependent.addDependency(job)
        JobQueue(name: "dependents").add(dependent)
        #expect(dependent.state == .pending)  // registered with the job, which is still handing over
        holding.release.open()
        try await withDeadline(.seconds(30), "the dependent running") { _ = await dependent.outcome }
        #expect(sawFinished.withLock { $0 } == true)
    }

    /// Waits synchronously, in its `jobDidFinish`, for the job it is told of.
    struct WaitingInstrument: JobInstrument {
        let outcomes: Recorder<Bool>
        func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) {
            outcomes.record(job.waitUntilFinished().didSucceed)
        }
    }

    @Test func anInstrumentThatWaitsForTheJobItIsToldOfGetsItsOutcomeAtOnce() async throws {
        let outcomes = Recorder<Bool>()
        let queue = JobQueue(name: "waiting instrument", instruments: [WaitingInstrument(outcomes: outcomes)])
        let job = BlockJob(name: "told") {}
        queue.add(job)
        try await withDeadline(.seconds(30), "a job whose instrument waits for it (waiting for itself?)") {
            #expect(await job.outcome.didSucceed)
        }
        #expect(outcomes.values == [true])
    }

    /// Waits synchronously, when it is freed, for the job whose observer held it.
    final class WaitsWhenFreed: @unchecked Sendable {
        // @unchecked Sendable: `job` is set once, before the object is shared.
        var job: Job?
        let outcomes: Recorder<Bool>
        init(outcomes: Recorder<Bool>) { self.outcomes = outcomes }
        deinit { outcomes.record(job?.waitUntilFinished().didSucceed ?? false) }
    }

    @Test func aDeinitThatWaitsForTheJobThatReleasedItGetsItsOutcomeAtOnce() async throws {
        let outcomes = Recorder<Bool>()
        let job = BlockJob(name: "releasing") {}
        do {
            let held = WaitsWhenFreed(outcomes: outcomes)
            held.job = job
            job.onFinish { _ in _ = held }  // freed when the job lets go of its observers
        }
        JobQueue().add(job)
        try await withDeadline(.seconds(30), "a job whose released observer waits for it (waiting for itself?)") {
            #expect(await job.outcome.didSucceed)
        }
        // Released before the waiters resumed, so it has already run.
        #expect(outcomes.values == [true])
    }
}
