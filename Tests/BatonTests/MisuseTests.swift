import Baton
import Testing

/// Programming errors stop the program with a message that names the job (exit tests run each body in
/// a child process).
@Suite struct MisuseTests {
    @Test func addingAJobTwiceStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "q")
            queue.isSuspended = true
            let job = BlockJob(name: "twice") {}
            queue.add(job)
            queue.add(job)
        }
        expect(result, toSay: "job 'twice' was added to queue 'q' twice")
    }

    @Test func addingAJobToTwoQueuesStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = BlockJob(name: "two") {}
            let q1 = JobQueue(name: "q1")
            q1.isSuspended = true
            q1.add(job)
            JobQueue(name: "q2").add(job)
        }
        expect(result, toSay: "cannot add job 'two' to queue 'q2': it is already ready in queue 'q1'")
    }

    /// A group in a queue runs its children: one added to another queue too ran there, and the group
    /// stopped the program on a worker thread when it started. (A group that never runs leaves its
    /// children free: `GroupTests`.)
    @Test func addingTheChildOfAQueuedGroupToAQueueStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let child = BlockJob(name: "child") {}
            let group = GroupJob(name: "group", children: [child])
            let groups = JobQueue(name: "groups")
            groups.isSuspended = true
            groups.add(group)
            JobQueue(name: "q").add(child)
        }
        expect(result, toSay: "cannot add job 'child' to queue 'q': it is a child of group 'group'")
    }

    @Test func addingAFinishedJobStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = BlockJob(name: "done") {}
            try? job.start()
            JobQueue().add(job)
        }
        expect(result, toSay: "cannot add job 'done'")
    }

    @Test func dependingOnItselfStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = BlockJob(name: "self") {}
            job.addDependency(job)
        }
        expect(result, toSay: "job 'self' cannot depend on itself")
    }

    @Test func finishingTwiceStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = CallbackJob(name: "double") { _, done in
                done()
                done()
            }
            try? job.start()
        }
        expect(result, toSay: "job 'double' finished twice")
    }

    @Test func producingFromAJobInNoQueueStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = CallbackJob(name: "producer") { job, done in
                job.produce(BlockJob {})
                done()
            }
            try? job.start()
        }
        expect(result, toSay: "job 'producer' produced")
    }

    /// Issue 9, item 20: a finished job added again is reported as finished, not as added twice.
    @Test func reAddingAJobRightAfterItFinishedSaysItFinished() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "q")
            let job = BlockJob(name: "done") {}
            queue.add(job)
            _ = await job.outcome  // returns once the job reports finished; the queue may record it later
            queue.add(job)
        }
        expect(result, toSay: "cannot add job 'done' to queue 'q': it has already finished")
    }

    /// Issue 9, item 6: a zero or negative timeout is a bug in the calling code.
    @Test func aZeroTimeoutStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            BlockJob(name: "timed") {}.addTimeout(.zero)
        }
        expect(result, toSay: "the timeout of job 'timed' must be positive, not 0.0 seconds")
    }

    @Test func aNegativeTimeoutStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            BlockJob(name: "timed") {}.addTimeout(.seconds(-5))
        }
        expect(result, toSay: "the timeout of job 'timed' must be positive, not -5.0 seconds")
    }

    @Test func aZeroLimitStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = JobQueue(name: "zero", maxConcurrentJobs: 0)
        }
        expect(result, toSay: "maxConcurrentJobs of queue 'zero' must be at least 1")
    }

    /// Adding a job that is elsewhere as a group's child stops at the `addChild` call (it used to stop
    /// later, on a worker thread, when the group started).
    @Test func addingAJobThatIsElsewhereAsAChildStopsAtOnce() async {
        let queued = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "q")
            queue.isSuspended = true
            let job = BlockJob(name: "queued") {}
            queue.add(job)
            GroupJob(name: "g").addChild(job)
        }
        expect(queued, toSay: "cannot add job 'queued' as a child of group 'g': it is already in queue 'q'")
        let twoGroups = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = BlockJob(name: "shared") {}
            let first = GroupJob(name: "first", children: [job])
            let queue = JobQueue(name: "q")
            queue.isSuspended = true
            queue.add(first)
            _ = GroupJob(name: "second", children: [job])
        }
        expect(
            twoGroups,
            toSay: "cannot add job 'shared' as a child of group 'second': it is already a child of group 'first'")
        let itself = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let group = GroupJob(name: "loop")
            group.addChild(group)
        }
        expect(itself, toSay: "a group cannot be its own child")
        let twice = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = BlockJob(name: "twice") {}
            _ = GroupJob(name: "g", children: [job, job])
        }
        expect(twice, toSay: "cannot add job 'twice' as a child of group 'g': it is given twice")
    }

    @Test func aDispatchQueueWithDedicatedThreadsStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = JobQueue(name: "both", dispatchQueue: .global(), workerThreads: .dedicated)
        }
        expect(result, toSay: "queue 'both' was given both a dispatchQueue and workerThreads: .dedicated")
    }
}

/// Checks that a child process that stopped said `message` on its standard error.
func expect(_ result: ExitTest.Result?, toSay message: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(stderr.contains(message), "stderr was: \(stderr)", sourceLocation: sourceLocation)
}
