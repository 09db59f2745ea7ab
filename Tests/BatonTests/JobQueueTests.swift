import Baton
import BatonTesting
import Dispatch
import Testing

@Suite(.timeLimit(.minutes(1))) struct JobQueueTests {
    @Test func neverRunsMoreThanMaxConcurrentJobs() async {
        let queue = JobQueue(name: "limited", maxConcurrentJobs: 3)
        let gauge = ConcurrencyGauge()
        let threeInside = Gate()
        let jobs = (0..<200).map { _ in
            AsyncJob { _ in
                if gauge.enter() >= 3 { threeInside.open() }
                await threeInside.waitAsync()  // the first three wait for each other: the limit is reached
                gauge.leave()
            }
        }
        queue.add(jobs)
        await queue.waitUntilAllJobsAreFinished()
        #expect(gauge.highest == 3)  // reached, never exceeded
        #expect(queue.jobCount == 0)
    }

    @Test func aSerialQueueRunsInFIFOOrderAmongEqualPriorities() async {
        let queue = JobQueue(name: "serial", maxConcurrentJobs: 1)
        let order = Recorder<Int>()
        queue.add((0..<500).map { i in BlockJob { order.record(i) } })
        await queue.waitUntilAllJobsAreFinished()
        #expect(order.values == Array(0..<500))
    }

    @Test func higherPrioritiesStartFirst() async {
        let queue = JobQueue(name: "prio", maxConcurrentJobs: 1)
        queue.isSuspended = true
        let order = Recorder<String>()
        let plan: [(String, JobPriority)] = [
            ("low", .low), ("normal1", .normal), ("veryHigh", .veryHigh),
            ("normal2", .normal), ("veryLow", .veryLow), ("high", .high),
        ]
        queue.add(plan.map { name, priority in BlockJob(name: name, priority: priority) { order.record(name) } })
        queue.isSuspended = false
        await queue.waitUntilAllJobsAreFinished()
        #expect(order.values == ["veryHigh", "high", "normal1", "normal2", "low", "veryLow"])
    }

    @Test func suspendHoldsJobsAndResumeStartsThem() async {
        let queue = JobQueue(name: "suspended")
        queue.isSuspended = true
        #expect(queue.isSuspended)
        let ran = Recorder<Int>()
        let jobs = (0..<10).map { i in BlockJob { ran.record(i) } }
        queue.add(jobs)
        #expect(queue.jobCount == 10)
        #expect(jobs.allSatisfy { $0.state == .ready })
        #expect(ran.count == 0)
        queue.isSuspended = false
        await queue.waitUntilAllJobsAreFinished()
        #expect(ran.count == 10)
    }

    @Test func cancelAllFinishesWaitingJobsWithoutRunningThem() async {
        let queue = JobQueue(name: "cancel")
        queue.isSuspended = true
        let ran = Recorder<Int>()
        let jobs = (0..<100).map { i in BlockJob { ran.record(i) } }
        queue.add(jobs)
        queue.cancelAll()
        await queue.waitUntilAllJobsAreFinished()
        #expect(ran.count == 0)
        #expect(jobs.allSatisfy { $0.outcomeIfDecided?.isCancelled == true })
        queue.isSuspended = false
    }

    @Test func jobsListsUnfinishedJobsInCreationOrder() async {
        let queue = JobQueue(name: "list")
        queue.isSuspended = true
        let a = BlockJob(name: "a") {}
        let b = BlockJob(name: "b") {}
        queue.add([b, a])
        #expect(queue.jobs.map(\.name) == ["a", "b"])
        queue.isSuspended = false
        await queue.waitUntilAllJobsAreFinished()
        #expect(queue.jobs.isEmpty)
    }

    @Test func raisingTheLimitStartsWaitingJobs() async {
        let queue = JobQueue(name: "raise", maxConcurrentJobs: 1)
        let bothRunning = Gate()
        let gauge = ConcurrencyGauge()
        let jobs = (0..<2).map { _ in
            AsyncJob { _ in
                if gauge.enter() == 2 { bothRunning.open() }
                await bothRunning.waitAsync()
            }
        }
        queue.add(jobs)
        #expect(queue.maxConcurrentJobs == 1)
        queue.maxConcurrentJobs = 2
        await queue.waitUntilAllJobsAreFinished()
        #expect(gauge.highest == 2)
    }

    @Test func waitingOnAnEmptyQueueReturnsAtOnce() async {
        let queue = JobQueue()
        await queue.waitUntilAllJobsAreFinished()
        DispatchQueue.global().sync { queue.waitUntilAllJobsAreFinished() }
    }

    @Test func theMainQueueRunsJobsOnTheMainDispatchQueue() async {
        // On Linux the test runner calls dispatchMain(), which ends the main thread and lets a worker
        // drain the main queue; a program with an async main or a run loop serves it from the main
        // thread. Either way the jobs run on Dispatch's main queue, one at a time.
        let key = DispatchSpecificKey<String>()
        DispatchQueue.main.setSpecific(key: key, value: "main")
        let onMain = Recorder<Bool>()
        let job = BlockJob { onMain.record(DispatchQueue.getSpecific(key: key) == "main") }
        JobQueue.main.add(job)
        _ = await job.outcome
        #expect(onMain.values == [true])
        #expect(JobQueue.main.maxConcurrentJobs == 1)
    }
}
