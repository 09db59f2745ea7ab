import Baton
import BatonTesting
import Foundation
import Testing

/// A job that a finish on another queue made ready may start on the finishing loop's thread once that
/// loop has nothing left (no thread woken a hop). What must still hold.
@Suite("Cross-queue hand-off")
struct CrossQueueHandOffTests {
    @Test func aChainAlternatingBetweenTwoQueuesRunsEachJobAfterItsDependency() async throws {
        let count = 20_000
        let order = Recorder<Int>()
        let queues = [JobQueue(name: "even"), JobQueue(name: "odd")]
        var jobs: [Job] = []
        for index in 0..<count {
            let job = BlockJob(name: "j\(index)") { order.record(index) }
            if let previous = jobs.last { job.addDependency(previous) }
            jobs.append(job)
        }
        queues[0].add(stride(from: 0, to: count, by: 2).map { jobs[$0] })
        queues[1].add(stride(from: 1, to: count, by: 2).map { jobs[$0] })
        try await withDeadline(.seconds(120), "a chain of 20,000 jobs alternating between two queues") {
            for queue in queues { await queue.waitUntilAllJobsAreFinished() }
        }
        #expect(order.values == Array(0..<count))
    }

    /// After the body of the job named "first" returned (its finish made `next` ready on another
    /// queue), waits on the same thread for `next`: the loop left to this thread must start elsewhere.
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
                outcomes.record(next.waitUntilFinished().isSucceeded)
            }
        }
    }

    @Test(arguments: [JobQueue.WorkerThreads.shared, .dedicated], [false, true])
    func aThreadThatBlocksStartsTheLoopLeftToItElsewhere(
        threads: JobQueue.WorkerThreads, wholeQueue: Bool
    )
        async throws
    {
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
