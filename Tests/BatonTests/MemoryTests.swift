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

    @Test func aQueueKeepsNoFinishedJobAlive() async {
        weak var finished: Job?
        weak var cancelled: Job?
        let queue = JobQueue(name: "holds-nothing")
        do {
            let job = BlockJob {}
            let other = BlockJob {}
            finished = job
            cancelled = other
            queue.isSuspended = true
            queue.add([job, other])
            other.cancel()
            queue.isSuspended = false
            await queue.waitUntilAllJobsAreFinished()
        }
        #expect(finished == nil)
        #expect(cancelled == nil)
        #expect(queue.jobCount == 0)
    }

    @Test func aJobThatCapturesItselfInAnObserverIsFreedAfterFinishing() async {
        weak var weakJob: Job?
        do {
            let job = BlockJob {}
            job.onFinish { _ in _ = job }  // a cycle until the job finishes
            weakJob = job
            JobQueue().add(job)
            _ = await job.outcome
        }
        #expect(weakJob == nil)
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
