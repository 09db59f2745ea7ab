import BatonTesting
import Foundation
import Testing

@testable import Baton

/// A job that a finish on another queue made ready may start on the finishing loop's thread once that
/// loop has nothing left (no thread woken a hop). What must still hold: order, prompt starts, turns
/// on a shared Dispatch queue, and no wait on that thread for the job left to it.
@Suite("Cross-queue hand-off")
struct CrossQueueHandOffTests {
    /// Adds a chain of `count` jobs running `body` with their index, each depending on the one before,
    /// the even ones to `queues[0]` and the odd ones to `queues[1]`: every hop crosses.
    static func addAlternatingChain(
        _ count: Int, to queues: [JobQueue], _ body: @escaping @Sendable (Int) -> Void
    ) {
        var jobs: [Job] = []
        for index in 0..<count {
            let job = BlockJob(name: "j\(index)") { body(index) }
            if let previous = jobs.last { job.addDependency(previous) }
            jobs.append(job)
        }
        queues[0].add(stride(from: 0, to: count, by: 2).map { jobs[$0] })
        queues[1].add(stride(from: 1, to: count, by: 2).map { jobs[$0] })
    }

    @Test func aChainAlternatingBetweenTwoQueuesRunsEachJobAfterItsDependency() async throws {
        let count = 20_000
        let order = Recorder<Int>()
        let queues = [JobQueue(name: "even"), JobQueue(name: "odd")]
        Self.addAlternatingChain(count, to: queues) { order.record($0) }
        try await withDeadline(.seconds(120), "a chain of 20,000 jobs alternating between two queues") {
            for queue in queues { await queue.waitUntilAllJobsAreFinished() }
        }
        #expect(order.values == Array(0..<count))
    }

    @Test func aLoopWithMoreWorkStartsTheOtherQueuesLoopElsewhereAtOnce() async throws {
        // A serial queue: a1 makes b ready on the other queue, then a2 waits for b. The loop that ran
        // a1 takes a2, so b's loop must start on another thread now, not when this loop is idle.
        let opened = Gate()
        let result = Recorder<Bool>()
        let first = JobQueue(name: "first", maxConcurrentJobs: 1, workerThreads: .dedicated)
        let second = JobQueue(name: "second", workerThreads: .dedicated)
        let a1 = BlockJob(name: "a1") {}
        let a2 = BlockJob(name: "a2") { result.record(opened.wait(timeoutSeconds: 30)) }
        let b = BlockJob(name: "b") { opened.open() }
        b.addDependency(a1)
        second.add(b)
        first.add([a1, a2])
        try await withDeadline(.seconds(60), "a2 waiting for b on the other queue") {
            await first.waitUntilAllJobsAreFinished()
        }
        #expect(result.values == [true], "b did not run while the loop that made it ready ran a2")
    }

    @Test func aChainHoppingBetweenTwoQueuesOnOneSerialQueueLetsOtherBlocksIn() async throws {
        let serial = DispatchQueue(label: "one serial queue")
        let queues = [JobQueue(name: "even", dispatchQueue: serial), JobQueue(name: "odd", dispatchQueue: serial)]
        let count = 2_000
        let finished = Protected(0)
        let seenByTheBlock = Recorder<Int>()
        Self.addAlternatingChain(count, to: queues) { index in
            finished.withLock { $0 += 1 }
            // Mid-chain, another block is queued on the same serial queue: it must get its turn before
            // the chain ends (a worker loop gives the queue back every 256 jobs or so).
            if index == 10 { serial.async { seenByTheBlock.record(finished.withLock { $0 }) } }
        }
        try await withDeadline(.seconds(120), "a chain of 2,000 jobs on one serial queue") {
            for queue in queues { await queue.waitUntilAllJobsAreFinished() }
        }
        let seen = try #require(seenByTheBlock.values.first)
        #expect(seen < count, "the other block ran only after the whole chain (\(seen) of \(count) jobs)")
    }

    /// Waits, when freed, for another job.
    final class WaitsWhenFreed: Job, @unchecked Sendable {
        // @unchecked Sendable: immutable references to thread-safe objects.
        let waitFor: Job
        let outcomes: Recorder<Bool>
        init(waitFor: Job, outcomes: Recorder<Bool>) {
            self.waitFor = waitFor
            self.outcomes = outcomes
            super.init(name: "freed")
        }
        deinit { outcomes.record(waitFor.waitUntilFinished().didSucceed) }
    }

    /// Blocks its `deinit` on a semaphore (a wait Baton cannot see).
    final class BlocksWhenFreed: Job, @unchecked Sendable {
        // @unchecked Sendable: immutable references to thread-safe objects.
        let signalled: DispatchSemaphore
        init(signalled: DispatchSemaphore) {
            self.signalled = signalled
            super.init(name: "blocks when freed")
        }
        deinit { signalled.wait() }
    }

    /// The last job of a worker loop's turn is freed by that loop after the turn ended, and its deinit
    /// waits for the next job of the same serial queue: the loop that goes on with the queue is started
    /// before the deinit runs, not after.
    @Test func aJobFreedAtTheEndOfALoopsTurnDoesNotHoldUpTheQueue() async throws {
        let queue = JobQueue(name: "serial", maxConcurrentJobs: 1, workerThreads: .dedicated)
        let signalled = DispatchSemaphore(value: 0)
        let next = BlockJob(name: "next") { signalled.signal() }
        do {
            var jobs: [Job] = (1..<JobQueue.jobsPerWorkerTurn).map { BlockJob(name: "\($0)") {} }
            jobs.append(BlocksWhenFreed(signalled: signalled))  // the turn's last job
            jobs.append(next)
            queue.add(jobs)
        }
        try await withDeadline(.seconds(30), "a deinit at the end of a loop's turn waiting for the next job") {
            #expect(await next.outcome.didSucceed)
            await queue.waitUntilAllJobsAreFinished()
        }
    }

    @Test func aJobFreedByTheLoopThatWasLeftAnotherQueuesLoopDoesNotHoldItUp() async throws {
        // The group's only child finishes on the group's queue's loop; the group finishes with it and
        // makes `next` ready on another queue. The child's last reference is that loop's: freeing it
        // runs its deinit, which waits for `next`.
        let outcomes = Recorder<Bool>()
        let next = BlockJob(name: "next") {}
        let group: GroupJob
        do {
            let child = WaitsWhenFreed(waitFor: next, outcomes: outcomes)
            group = GroupJob(name: "group", children: [child])
        }
        next.addDependency(group)
        // Threads of their own: the deinit blocks one (a blocked thread of the shared pool would stall
        // every other test's tasks).
        let first = JobQueue(name: "first", instruments: [], workerThreads: .dedicated)
        let second = JobQueue(name: "second", instruments: [], workerThreads: .dedicated)
        second.add(next)
        first.add(group)
        try await withDeadline(.seconds(30), "a deinit on the loop's thread waiting for the other queue's job") {
            await second.waitUntilAllJobsAreFinished()
            await first.waitUntilAllJobsAreFinished()
        }
        // The child is freed by the loop once the group's finish is recorded, after the waits above.
        #expect(await eventually { outcomes.values == [true] })
    }

    /// After the body of the job named "first" returned (its finish made `next` ready on another
    /// queue), waits on the same thread for `next`: a queue with instruments leaves no loop to its
    /// thread, since their `withStart` ends there after the body.
    /// With `queue`, waits for the whole queue (``JobQueue/waitUntilAllJobsAreFinished()``) instead.
    struct WaitsAfterTheBody: JobInstrument {
        let next: Job
        let queue: Protected<JobQueue?>
        let outcomes: Recorder<Bool>
        func withStart(of job: Job, in queue: JobQueue, _ body: () -> Void) {
            body()
            guard job.name == "first" else { return }
            if let whole = self.queue.withLock({ $0 }) {
                whole.waitUntilAllJobsAreFinished()
                outcomes.record(next.isFinished)
            } else {
                outcomes.record(next.waitUntilFinished().didSucceed)
            }
        }
    }

    /// On threads of their own: the instrument blocks one (a blocked thread of the shared pool would
    /// stall every other test's tasks).
    @Test(arguments: [false, true])
    func anInstrumentThatWaitsAfterTheBodyForTheOtherQueuesJobGetsIt(wholeQueue: Bool) async throws {
        let threads = JobQueue.WorkerThreads.dedicated
        let outcomes = Recorder<Bool>()
        let job = BlockJob(name: "first") {}
        let next = BlockJob(name: "next") {}
        next.addDependency(job)
        let waitsFor = Protected<JobQueue?>(nil)
        let first = JobQueue(
            name: "first", instruments: [WaitsAfterTheBody(next: next, queue: waitsFor, outcomes: outcomes)],
            workerThreads: threads)
        let second = JobQueue(name: "second", instruments: [], workerThreads: threads)
        if wholeQueue { waitsFor.withLock { $0 = second } }
        second.add(next)
        first.add(job)
        try await withDeadline(.seconds(30), "a loop's thread waiting for the job whose loop was left to it") {
            await first.waitUntilAllJobsAreFinished()
            await second.waitUntilAllJobsAreFinished()
        }
        #expect(outcomes.values == [true])
    }
}
