import Baton
import BatonTesting
import Logging
import Testing

@Suite(.timeLimit(.minutes(1))) struct DiagnosticsTests {
    @Test func namesADependencyThatIsInNoQueue() throws {
        let queue = JobQueue(name: "import")
        let signIn = BlockJob(name: "sign in") {}
        let save = BlockJob(name: "save") {}
        save.addDependency(signIn)
        queue.add(save)
        let report = queue.diagnose()
        let job = try #require(report.jobs.first)
        #expect(job.blockers == [.dependencies([.init(name: "sign in", state: .initialized, queue: nil)])])
        #expect(
            report.description.contains("'save' (pending) waits for dependencies 'sign in' (initialized, in no queue"))
        save.cancel()
    }

    @Test func namesConditionsStillEvaluating() async throws {
        let clock = ManualClock()
        let queue = JobQueue(name: "q")
        let job = BlockJob(name: "later") {}
        job.addCondition(NotBefore(clock.now.advanced(by: .seconds(5)), clock: clock))
        queue.add(job)
        await clock.waitForSleepers(1)
        #expect(queue.diagnose().jobs.first?.blockers == [.conditions(["NotBefore"])])
        clock.advance(by: .seconds(5))
        _ = await job.outcome
    }

    @Test func namesTheHolderOfAFullCategory() async throws {
        let queue = JobQueue(name: "q", exclusivityScope: ExclusivityScope(name: "s"))
        let inside = Gate()
        let release = Gate()
        let holder = AsyncJob(name: "holder") { _ in
            inside.open()
            await release.waitAsync()
        }
        let waiter = BlockJob(name: "waiter") {}
        for job in [holder, waiter] { job.addCondition(MutuallyExclusive(category: "db")) }
        queue.add(holder)
        await inside.waitAsync()
        queue.add(waiter)
        // The queue starts the waiter, which then claims "db" (on a worker of the queue) and waits for it.
        let blocked = await eventually {
            queue.diagnose().jobs.first { $0.jobName == "waiter" }?.blockers
                == [.exclusivity(category: "db", limit: 1, heldBy: ["holder"])]
        }
        #expect(blocked, "\(queue.diagnose())")
        let report = queue.diagnose()
        #expect(report.jobs.first { $0.jobName == "waiter" }?.state == .ready)
        #expect(report.jobs.first { $0.jobName == "holder" }?.description == "'holder' (executing) is running")
        release.open()
        await queue.waitUntilAllJobsAreFinished()
    }

    @Test func namesASuspendedQueueAndAFullConcurrencyLimit() async {
        let suspended = JobQueue(name: "paused")
        suspended.isSuspended = true
        suspended.add(BlockJob(name: "j") {})
        #expect(suspended.diagnose().jobs.first?.blockers == [.suspendedQueue("paused")])
        suspended.cancelAll()

        let full = JobQueue(name: "full", maxConcurrentJobs: 1)
        let inside = Gate()
        let release = Gate()
        full.add(
            AsyncJob(name: "running") { _ in
                inside.open()
                await release.waitAsync()
            })
        await inside.waitAsync()
        full.add(BlockJob(name: "next") {})
        let next = full.diagnose().jobs.first { $0.jobName == "next" }
        #expect(next?.blockers == [.concurrencyLimit(running: 1, limit: 1)])
        release.open()
        await full.waitUntilAllJobsAreFinished()
    }

    @Test func theWatchdogReportsOnlyWhenNothingMoved() async {
        let queue = JobQueue(name: "stuck")
        let logged = Recorder<String>()
        let watchdog = queue.startWatchdog(every: .seconds(3600)) { logged.record($0.description) }
        defer { watchdog.stop() }
        #expect(watchdog.check() == nil)  // empty queue: nothing to say
        let orphan = BlockJob(name: "orphan") {}
        let stuck = BlockJob(name: "stuck job") {}
        stuck.addDependency(orphan)
        queue.add(stuck)
        #expect(watchdog.check() == nil)  // first look sets the mark
        let report = watchdog.check()  // no progress since: report
        #expect(report?.jobs.first?.jobName == "stuck job")
        #expect(logged.values.first?.contains("'orphan' (initialized, in no queue") == true)
        queue.add(orphan)
        _ = await stuck.outcome
        #expect(watchdog.check() == nil)
    }
}
