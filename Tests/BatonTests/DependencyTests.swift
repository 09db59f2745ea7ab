import Baton
import BatonTesting
import Testing

@Suite(.timeLimit(.minutes(2))) struct DependencyTests {
    @Test func aJobStartsOnlyAfterAllItsDependenciesFinished() async {
        let queue = JobQueue(name: "deps", maxConcurrentJobs: 8)
        let finished = Recorder<String>()
        let started = Recorder<(String, [String])>()
        let a = BlockJob(name: "a") { finished.record("a") }
        let b = AsyncJob(name: "b") { _ in
            await Task.yield()
            finished.record("b")
        }
        let c = BlockJob(name: "c") { started.record(("c", finished.values)) }
        c.addDependencies([a, b])
        #expect(c.dependencies.map(\.name) == ["a", "b"])
        queue.add([c, b, a])
        _ = await c.outcome
        #expect(started.values.first?.1.sorted() == ["a", "b"])
        #expect(c.dependencies.isEmpty)  // dropped after finishing
    }

    @Test func dependenciesMayCrossQueuesAndRunWhateverTheirOutcome() async {
        let q1 = JobQueue(name: "one")
        let q2 = JobQueue(name: "two", maxConcurrentJobs: 1)
        let failing = BlockJob(name: "failing") { throw Boom() }
        let cancelled = BlockJob(name: "cancelled") {}
        cancelled.cancel()
        let after = BlockJob(name: "after") {}
        after.addDependencies([failing, cancelled])
        q2.add(after)
        q1.add([failing, cancelled])
        #expect(await after.outcome.didSucceed)
        #expect(await failing.outcome.didFail)
        #expect(await cancelled.outcome.isCancelled)
    }

    @Test func aDependencyAddedToAWaitingJobIsHonoured() async {
        let queue = JobQueue(name: "late", workerThreads: .dedicated)  // `first` waits on a thread of its own
        let blocker = Gate()
        let order = Recorder<String>()
        let first = BlockJob(name: "first") { blocker.wait() }
        let waiting = BlockJob(name: "waiting") { order.record("waiting") }
        waiting.addDependency(first)
        queue.add([first, waiting])
        let extra = BlockJob(name: "extra") { order.record("extra") }
        waiting.addDependency(extra)  // still pending: allowed
        queue.isSuspended = false
        blocker.open()
        queue.add(extra)
        await queue.waitUntilAllJobsAreFinished()
        #expect(order.values == ["extra", "waiting"])
    }

    @Test func aDependencyThatAlreadyFinishedDoesNotHoldTheJob() async throws {
        let done = BlockJob(name: "done") {}
        try done.start()
        let job = BlockJob(name: "job") {}
        job.addDependency(done)
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
    }

    @Test func aMillionJobChainCompletesWithoutOverflowingTheStack() async {
        // Debug builds are slow: the release benchmark runs the million; this proves the mechanics at
        // a size that would overflow the stack if release or deallocation recursed (a Dispatch worker
        // has a 512 KiB stack on Linux: a few thousand recursive frames at most).
        let count = 50_000
        let queue = JobQueue(name: "chain")
        let counter = ConcurrencyGauge()
        // Made off Swift concurrency's pool (one thread per core), which the other tests need meanwhile.
        var jobs = await offThePool { () -> [Job] in
            var jobs: [Job] = []
            jobs.reserveCapacity(count)
            for i in 0..<count {
                let job = BlockJob { counter.enter() }
                if i > 0 { job.addDependency(jobs[i - 1]) }
                jobs.append(job)
            }
            return jobs
        }
        queue.add(jobs)
        let last = jobs[count - 1]
        jobs = []
        #expect(await last.outcome.didSucceed)
        #expect(counter.value == count)
    }

    @Test func aNeverRunChainIsReleasedWithoutOverflowingTheStack() async {
        // Off Swift concurrency's pool (one thread per core), which the other tests need meanwhile.
        let (alive, freed) = await offThePool { () -> (Bool, Bool) in
            weak var first: Job?
            var previous: Job?
            for index in 0..<100_000 {
                let job = BlockJob {}
                if index == 0 { first = job }
                if let previous { job.addDependency(previous) }
                previous = job
            }
            let alive = first != nil  // the last job keeps the whole chain alive…
            previous = nil  // …until it goes: deinit must release the chain iteratively, and all of it
            return (alive, first == nil)
        }
        #expect(alive)
        #expect(freed)
    }
}

@Suite(.timeLimit(.minutes(1))) struct CycleTests {
    @Test func aCycleAddedAtOnceFailsEveryMemberWithItsNames() async throws {
        let a = BlockJob(name: "a") {}
        let b = BlockJob(name: "b") {}
        let c = BlockJob(name: "c") {}
        let outside = BlockJob(name: "outside") {}
        a.addDependency(b)
        b.addDependency(c)
        c.addDependency(a)
        outside.addDependency(a)
        let queue = JobQueue(name: "cycle")
        queue.add([a, b, c, outside])
        for job in [a, b, c] {
            let error = try #require(await job.outcome.error as? JobError)
            #expect(error.code == .dependencyCycle)
            #expect(Set(error.jobs) == ["a", "b", "c"])
            #expect(error.message.contains("dependency cycle"))
        }
        // Jobs that merely depend on the cycle still run once it is broken up.
        #expect(await outside.outcome.didSucceed)
        let error = try #require(a.outcomeIfDecided?.error as? JobError)
        // Each job in the message waits for the next.
        let names = error.jobs
        let i = try #require(names.firstIndex(of: "a"))
        #expect(names[(i + 1) % 3] == "b")
    }

    @Test func aCycleClosedByAddingJobsOneByOneIsDetected() async throws {
        let a = BlockJob(name: "a") {}
        let b = BlockJob(name: "b") {}
        a.addDependency(b)
        b.addDependency(a)
        let q1 = JobQueue(name: "q1")
        let q2 = JobQueue(name: "q2")
        q1.add(a)
        #expect(a.state == .pending)
        q2.add(b)
        #expect(await a.outcome.didFail)
        #expect(await b.outcome.didFail)
    }

    @Test func aCycleClosedByADependencyOnAWaitingJobIsDetected() async throws {
        let a = BlockJob(name: "a") {}
        let b = BlockJob(name: "b") {}
        let c = BlockJob(name: "c") {}
        b.addDependency(a)
        c.addDependency(b)
        let queue = JobQueue(name: "late-cycle")
        queue.isSuspended = true
        let gate = BlockJob(name: "gate") {}
        a.addDependency(gate)
        queue.add([a, b, c])
        a.addDependency(c)  // closes a → c → b → a while all are pending
        let error = try #require(await a.outcome.error as? JobError)
        #expect(Set(error.jobs) == ["a", "b", "c"])
        queue.isSuspended = false
        queue.add(gate)
        await queue.waitUntilAllJobsAreFinished()
    }

    @Test func aLargeCycleIsReportedQuickly() async throws {
        let count = 10_000
        let jobs = await offThePool { () -> [BlockJob] in
            let jobs = (0..<count).map { BlockJob(name: "j\($0)") {} }
            for i in 0..<count { jobs[i].addDependency(jobs[(i + 1) % count]) }
            return jobs
        }
        JobQueue(name: "big-cycle").add(jobs)
        let error = try #require(await jobs[0].outcome.error as? JobError)
        #expect(error.jobs.count == count)
    }
}

/// Issue 9, item 19: a dependency can be added to a queued job until its body starts.
@Suite(.timeLimit(.minutes(1))) struct LateDependencyTests {
    @Test func aDependencyAddedToAReadyJobIsHonoured() async throws {
        let queue = JobQueue(name: "serial", maxConcurrentJobs: 1)
        let order = Recorder<String>()
        let release = Gate()
        let blocker = AsyncJob(name: "blocker") { _ in
            await release.waitAsync()
            order.record("blocker")
        }
        let ready = BlockJob(name: "ready") { order.record("ready") }
        queue.add([blocker, ready])
        #expect(ready.state == .ready)  // waiting only for the slot
        let late = BlockJob(name: "late") { order.record("late") }
        ready.addDependency(late)  // no trap: it has not started
        #expect(ready.state == .pending)
        release.open()
        _ = await blocker.outcome
        #expect(ready.state == .pending)  // the slot is free, but it waits for `late` now
        queue.add(late)
        #expect(await ready.outcome.didSucceed)
        #expect(order.values == ["blocker", "late", "ready"])
    }

    @Test func aDependencyAddedWhileAJobWaitsForItsCategoryGivesTheClaimUp() async throws {
        let scope = ExclusivityScope(name: "late")
        let queue = JobQueue(name: "q", exclusivityScope: scope)
        let release = Gate()
        let holder = AsyncJob(name: "holder") { _ in await release.waitAsync() }
        holder.addCondition(MutuallyExclusive(category: "db"))
        let waiter = BlockJob(name: "waiter") {}
        waiter.addCondition(MutuallyExclusive(category: "db"))
        let other = BlockJob(name: "other") {}
        other.addCondition(MutuallyExclusive(category: "db"))
        queue.add([holder, waiter, other])
        let late = BlockJob(name: "late") {}
        waiter.addDependency(late)  // it leaves the line for 'db'
        release.open()
        #expect(await other.outcome.didSucceed)  // not stuck behind the waiter
        #expect(waiter.state == .pending)
        queue.add(late)
        #expect(await waiter.outcome.didSucceed)
        #expect(scope.holders(of: "db").isEmpty)
    }
}
