import BatonTesting
import Dispatch
import Testing

@testable import Baton

/// The queue's worker loops (`JobQueue+Workers.swift`), including the shortcut that lets a loop record
/// the finish of the job whose body it runs: the finish must reach the queue whichever thread
/// delivers it.
@Suite(.timeLimit(.minutes(1))) struct WorkerTests {
    func workers(of queue: JobQueue) -> Int { queue.lock.withLock { queue.scheduler.workers } }

    /// Issue 9, item 10: a serial queue's job whose finish is delivered by another thread (an observer
    /// of its cancel was still running when the body returned) frees the slot and starts the next job.
    @Test func aFinishDeliveredByAnotherThreadStartsTheNextJob() async throws {
        // Threads of their own for the body and the cancel: both block until the test goes on.
        let queue = JobQueue(name: "serial", maxConcurrentJobs: 1, workerThreads: .dedicated)
        let bodyInside = Gate()
        let observerInside = Gate()
        let releaseObserver = Gate()
        let first = BlockJob(name: "first") {
            bodyInside.open()
            observerInside.wait()  // returns while the cancel observer still runs on another thread
        }
        first.onCancel { _, _ in
            observerInside.open()
            releaseObserver.wait()
        }
        let second = BlockJob(name: "second") {}
        queue.add([first, second])
        await bodyInside.waitAsync()
        DispatchQueue(label: "canceller").async { first.cancel() }  // delivers the cancel, then the finish
        await observerInside.waitAsync()
        // The body has returned and its worker has nothing to run (the slot still looks taken): it ends.
        let workerEnded = await eventually { first.state == .finishing && workers(of: queue) == 0 }
        #expect(workerEnded)
        releaseObserver.open()
        try await withDeadline(.seconds(10), "the serial queue's next job", report: { queue.diagnose().description }) {
            #expect(await second.outcome.didSucceed)
        }
    }

    /// The same under load: jobs on a serial queue whose timeouts fire (on a manual clock) while their
    /// bodies wait; each finish comes from the timeout's task, not from the queue's worker.
    @Test func aSerialQueueOfJobsWhoseTimeoutsFireNeverStalls() async throws {
        let clock = ManualClock()
        let queue = JobQueue(name: "serial", maxConcurrentJobs: 1)
        let jobs = (0..<200).map { index in
            let job = AsyncJob(name: "job \(index)") { _ in
                await Gate().waitAsyncUnlessCancelled()
                try Task.checkCancellation()
            }
            job.addTimeout(.seconds(5), clock: clock)
            job.onCancel { _, _ in }
            return job
        }
        queue.add(jobs)
        for (index, job) in jobs.enumerated() {
            try await withDeadline(
                .seconds(10), "job \(index) of the serial queue starting", report: { queue.diagnose().description }
            ) {
                await clock.waitForSleepers(1)
            }
            clock.advance(by: .seconds(5))
            try await withDeadline(.seconds(10), "job \(index) timing out", report: { queue.diagnose().description }) {
                _ = await job.outcome
            }
        }
        await queue.waitUntilAllJobsAreFinished()
        #expect(jobs.allSatisfy { ($0.outcomeIfDecided?.error as? JobError)?.code == .timedOut })
    }

    /// `workerThreads: .dedicated`: synchronous bodies that block do not hold up each other's start: 32
    /// bodies, each waiting until all 32 are inside, run at once, on the queue and as a group's children
    /// (the group's child queue has dedicated threads too). On the shared threads (Dispatch's global
    /// queue) this took 30 s on Linux with 2 cores: one thread per core, then about one more per second.
    @Test(arguments: [false, true]) func blockingBodiesOnDedicatedThreadsDoNotHoldUpEachOther(
        inAGroup: Bool
    )
        async throws
    {
        let count = 32
        let queue = JobQueue(name: "blocking", maxConcurrentJobs: count, workerThreads: .dedicated)
        let inside = ConcurrencyGauge()
        let allInside = Gate()
        let jobs = (0..<count).map { index in
            BlockJob(name: "blocking \(index)") {
                if inside.enter() == count { allInside.open() }
                // Bounded, so that a failure ends instead of hanging; the test's deadline fires first.
                _ = allInside.wait(timeoutSeconds: 60)
                inside.leave()
            }
        }
        if inAGroup {
            queue.add(GroupJob(name: "group", children: jobs, maxConcurrentChildren: count))
        } else {
            queue.add(jobs)
        }
        // The deadline is kept by a thread of its own: on Linux, Swift's concurrency pool is Dispatch's
        // global queue too, so a `Task.sleep` deadline would starve with the bodies it is to catch.
        let allStarted = await offThePool { allInside.wait(timeoutSeconds: 10) }
        #expect(allStarted, "within 10 s only \(inside.highest) of \(count) blocking bodies were inside at once")
        await queue.waitUntilAllJobsAreFinished()
        #expect(jobs.allSatisfy { $0.outcomeIfDecided?.didSucceed == true })
    }

    /// A finished job is let go of by the queue after it unlocks (the job's `deinit` locks it).
    @Test func theQueueHoldsNoFinishedJob() async {
        let queue = JobQueue(name: "release")
        let weakJob = WeakJob()
        do {
            let job = BlockJob(name: "short-lived") {}
            weakJob.job = job
            queue.add(job)
            _ = await job.outcome
        }
        await queue.waitUntilAllJobsAreFinished()
        #expect(await eventually { weakJob.job == nil })
    }
}

/// A weak reference that a `@Sendable` closure may read.
final class WeakJob: @unchecked Sendable {
    // @unchecked Sendable: written before the closure that reads it is created; weak loads are atomic.
    weak var job: Job?
}
