import Baton
import BatonTesting
import Testing

@Suite(.timeLimit(.minutes(1))) struct MemoryTests {
    final class Captured: Sendable {}

    @Test func aFinishedJobReleasesWhatItsClosuresAndObserversCaptured() async {
        weak var inBody: Captured?
        weak var inObserver: Captured?
        weak var inAsyncBody: Captured?
        let queue = JobQueue(name: "memory")
        var jobs: [Job] = []
        do {
            let a = Captured()
            let b = Captured()
            let c = Captured()
            inBody = a
            inObserver = b
            inAsyncBody = c
            let block = BlockJob { _ = a }
            block.onFinish { _ in _ = b }
            let async = AsyncJob { _ in _ = c }
            async.addDependency(block)
            jobs = [block, async]
        }
        queue.add(jobs)
        for job in jobs { _ = await job.outcome }
        // The jobs are still referenced here, but they let go of everything they captured.
        #expect(inBody == nil)
        #expect(inObserver == nil)
        #expect(inAsyncBody == nil)
        #expect(jobs.allSatisfy { $0.dependencies.isEmpty })
    }

    // The job objects themselves: the thread that finished a job still holds it for a moment after its
    // waiters resume (it is returning from the job's own code), so these wait for the job's `deinit`,
    // with a deadline that names what was never freed, instead of reading a weak reference at once.

    @Test func aQueueKeepsNoFinishedJobAlive() async throws {
        let queue = JobQueue(name: "holds-nothing")
        let finishedFreed: Gate
        let cancelledFreed: Gate
        do {
            let job = FreedJob(name: "finished")
            let other = FreedJob(name: "cancelled")
            finishedFreed = job.freed
            cancelledFreed = other.freed
            queue.isSuspended = true
            queue.add([job, other])
            other.cancel()
            queue.isSuspended = false
            await queue.waitUntilAllJobsAreFinished()
        }
        try await withDeadline(.seconds(10), "the finished job being freed (something still holds it)") {
            await finishedFreed.waitAsync()
        }
        try await withDeadline(.seconds(10), "the cancelled job being freed (something still holds it)") {
            await cancelledFreed.waitAsync()
        }
        #expect(queue.jobCount == 0)
    }

    @Test func aJobThatCapturesItselfInAnObserverIsFreedAfterFinishing() async throws {
        let freed: Gate
        do {
            let job = FreedJob(name: "self-observing")
            job.onFinish { _ in _ = job }  // a cycle until the job finishes
            freed = job.freed
            JobQueue().add(job)
            _ = await job.outcome
        }
        try await withDeadline(.seconds(10), "the self-observing job being freed (its observer cycle stayed)") {
            await freed.waitAsync()
        }
    }

    @Test func aSelfObservingJobIsKeptAliveByItsCycleUntilItFinishes() async throws {
        // The other side of the test above: the cycle is real while the job is unfinished, so the gate
        // staying shut here is what makes its opening above mean something.
        let weak = WeakJob()
        let freed: Gate
        do {
            let job = FreedJob(name: "self-observing")
            job.onFinish { _ in _ = job }
            freed = job.freed
            weak.job = job
        }
        #expect(!freed.isOpen, "nothing but its own observer holds the job, and that must keep it")
        try weak.job?.start()
        try await withDeadline(.seconds(10), "the self-observing job being freed once it finished") {
            await freed.waitAsync()
        }
    }

    @Test func jobsThatAreNeverAddedToAQueueDoNotLeak() {
        weak var a: Job?
        weak var b: Job?
        do {
            let first = BlockJob {}
            let second = BlockJob {}
            second.addDependency(first)
            a = first
            b = second
        }
        #expect(a == nil)
        #expect(b == nil)
    }
}

/// A job that opens ``freed`` when it is deallocated.
final class FreedJob: Job, @unchecked Sendable {
    // @unchecked Sendable: `freed` is an immutable reference to a thread-safe gate.
    let freed = Gate()
    deinit { freed.open() }
}
