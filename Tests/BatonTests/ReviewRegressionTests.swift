import Baton
import BatonTesting
import Dispatch
import Testing

/// Found by an adversarial review of the reworked core, each reproduced before it was fixed.
@Suite(.timeLimit(.minutes(2))) struct ReviewRegressionTests {
    /// Two threads adding (finished) dependencies to one ready job with a category: each call withdraws
    /// the claim and claims again. A claim of an earlier round must never be stored and granted, or the
    /// category stays held by a finished job for good.
    @Test func concurrentReclaimsNeverLeaveACategoryHeld() async throws {
        for round in 0..<40 {
            let scope = ExclusivityScope(name: "reclaim \(round)")
            let queue = JobQueue(name: "reclaim", exclusivityScope: scope)
            let done = BlockJob(name: "done") {}
            queue.add(done)
            _ = await done.outcome
            queue.isSuspended = true
            let job = BlockJob(name: "job") {}
            job.addCondition(MutuallyExclusive(category: "x"))
            queue.add(job)
            // Two Dispatch threads race; the test's own (cooperative) thread only waits for them.
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    DispatchQueue.concurrentPerform(iterations: 2) { _ in
                        for _ in 0..<200 { job.addDependency(done) }
                    }
                    continuation.resume()
                }
            }
            job.cancel()
            _ = await job.outcome
            #expect(scope.holders(of: "x").isEmpty, "round \(round)")
            queue.isSuspended = false
            let next = BlockJob(name: "next") {}
            next.addCondition(MutuallyExclusive(category: "x"))
            queue.add(next)
            try await withDeadline(.seconds(10), "a job wanting the category after round \(round)") {
                #expect(await next.outcome.didSucceed)
            }
        }
    }

    /// The same race where claims happen now: a job started by its queue and waiting for a category
    /// another job holds (it holds a slot, and its request is queued), sent back to waiting by
    /// `addDependency` from two threads at once, then cancelled. Nothing may stay held or queued.
    @Test func concurrentWithdrawalsOfAStartedClaimNeverLeaveACategoryHeld() async throws {
        for round in 0..<40 {
            let scope = ExclusivityScope(name: "withdraw \(round)")
            let queue = JobQueue(name: "withdraw", exclusivityScope: scope)
            let done = BlockJob(name: "done") {}
            queue.add(done)
            _ = await done.outcome
            let inside = Gate()
            let release = Gate()
            let holder = AsyncJob(name: "holder") { _ in
                inside.open()
                await release.waitAsync()
            }
            holder.addCondition(MutuallyExclusive(category: "x"))
            queue.add(holder)
            await inside.waitAsync()
            let job = BlockJob(name: "job") {}
            job.addCondition(MutuallyExclusive(category: "x"))
            queue.add(job)
            let waiting = await eventually {
                queue.diagnose().jobs.first { $0.jobName == "job" }?.blockers.isEmpty == false
            }
            #expect(waiting, "round \(round): the job never waited for the category: \(queue.diagnose())")
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    DispatchQueue.concurrentPerform(iterations: 2) { _ in
                        for _ in 0..<200 { job.addDependency(done) }
                    }
                    continuation.resume()
                }
            }
            job.cancel()
            release.open()
            try await withDeadline(.seconds(10), "the cancelled job and the holder, round \(round)") {
                _ = await job.outcome
                _ = await holder.outcome
            }
            #expect(scope.holders(of: "x").isEmpty, "round \(round)")
            let next = BlockJob(name: "next") {}
            next.addCondition(MutuallyExclusive(category: "x"))
            queue.add(next)
            try await withDeadline(.seconds(10), "a job wanting the category after round \(round)") {
                #expect(await next.outcome.didSucceed)
            }
        }
    }

    /// A group holding "db" whose child depends on an outsider that needs "db": a cycle through
    /// exclusivity, failed as a cycle instead of hanging.
    @Test func aCycleThroughAGroupsCategoryIsFailedNotHung() async throws {
        let scope = ExclusivityScope(name: "through claims")
        let queue = JobQueue(name: "q", exclusivityScope: scope)
        let started = Gate()
        let child = BlockJob(name: "child") {}
        let group = GroupJob(name: "group", children: [child])
        group.addCondition(MutuallyExclusive(category: "db"))
        group.onStart { _ in started.open() }
        let outsider = BlockJob(name: "outsider") {}
        outsider.addCondition(MutuallyExclusive(category: "db"))
        child.addDependency(outsider)
        queue.add(group)
        await started.waitAsync()
        queue.add(outsider)
        try await withDeadline(
            .seconds(10), "the group whose child needs the group's category", report: { queue.diagnose().description }
        ) {
            let error = try #require(await child.outcome.error as? JobError)
            #expect(error.code == .dependencyCycle)
            #expect(Set(error.jobs) == ["child", "group", "outsider"])
            #expect(await group.outcome.didFail)
            #expect(await outsider.outcome.didSucceed)  // it runs once the group let go of "db"
        }
    }

    /// The same cycle closed the other way round: the dependency comes after the outsider's claim waits.
    @Test func aCycleThroughACategoryClosedByALateDependencyIsFailed() async throws {
        let scope = ExclusivityScope(name: "late edge")
        let queue = JobQueue(name: "q", exclusivityScope: scope)
        let release = Gate()
        let child = AsyncJob(name: "child") { _ in await release.waitAsync() }
        let group = GroupJob(name: "group", children: [child])
        group.addCondition(MutuallyExclusive(category: "db"))
        let outsider = BlockJob(name: "outsider") {}
        outsider.addCondition(MutuallyExclusive(category: "db"))
        queue.add(group)
        #expect(await eventually { group.state == .executing })
        queue.add(outsider)
        #expect(await eventually { outsider.state == .ready })  // its claim waits behind the group
        let late = BlockJob(name: "late child") {}  // a new child that depends on the outsider
        late.addDependency(outsider)
        group.addChild(late)
        release.open()
        try await withDeadline(.seconds(10), "the late cycle", report: { queue.diagnose().description }) {
            let error = try #require(await late.outcome.error as? JobError)
            #expect(error.code == .dependencyCycle)
            #expect(await outsider.outcome.didSucceed)
        }
    }

    /// A never-run chain of typed jobs (each consumer's body reads its input) is freed iteratively.
    @Test func aNeverRunValueJobChainIsFreedIteratively() async {
        // Off the pool: 200,000 jobs made and freed hold a thread for seconds on a loaded machine, and
        // Swift concurrency's pool has one per core (every other test's tasks would wait).
        let freed = await offThePool { () -> Bool in
            weak var first: Job?
            do {
                var last = ValueJob<Int>(name: "v0") { _ in 0 }
                first = last
                for index in 1..<TestSize.chain {
                    last = ValueJob<Int>(name: "v\(index)", input: last) { x, _ in x + 1 }
                }
            }
            return first == nil
        }
        #expect(freed)
    }

    /// `diagnose()` and `cancel()` on groups nested twenty thousand deep do not recurse.
    @Test func diagnosingAndCancellingDeeplyNestedGroupsDoesNotRecurse() async throws {
        let depth = TestSize.nesting
        let queue = JobQueue(name: "deep")
        let innermostStarted = Gate()
        let innermost = AsyncJob(name: "innermost") { _ in
            innermostStarted.open()
            await Gate().waitAsyncUnlessCancelled()
            try Task.checkCancellation()
        }
        // Made off the pool (see aNeverRunValueJobChainIsFreedIteratively).
        let current = await offThePool { () -> Job in
            var current: Job = innermost
            for level in 0..<depth { current = GroupJob(name: "g\(level)", children: [current]) }
            return current
        }
        queue.add(current)
        try await withDeadline(.seconds(120), "the nesting starting") { await innermostStarted.waitAsync() }
        let report = await offThePool { queue.diagnose().description }
        #expect(report.contains("nested too deep to list"))
        current.cancel()
        let root = current
        try await withDeadline(.seconds(120), "the cancelled nesting finishing") {
            #expect(await root.outcome.isCancelled)
            #expect(await innermost.outcome.isCancelled)
        }
    }

    /// A child added while its group is being cancelled does not run. The child's condition cancels the
    /// group while the queue adds the child, before the child is a member of the group's queue; the
    /// child is ready at once, so a worker may start it before `addChild` returns. 100 rounds: a cancel
    /// that reached the child only after `queue.add` returned let it run now and then (seen under
    /// ThreadSanitizer in CI).
    @Test func aChildAddedWhileItsGroupIsCancelledDoesNotRun() async throws {
        /// Cancels the group in the window between `addChild`'s check and the child joining.
        struct CancelGroup: JobCondition {
            let group: Job
            func dependencies(for job: Job) -> [Job] {
                group.cancel()
                return []
            }
            var requiresEvaluation: Bool { false }
        }
        for round in 0..<100 {
            let queue = JobQueue(name: "q")
            let hold = Gate()
            let first = AsyncJob(name: "first") { _ in await hold.waitAsync() }
            let group = GroupJob(name: "group", children: [first])
            let started = Gate()
            group.onStart { _ in started.open() }
            queue.add(group)
            await started.waitAsync()
            let ran = Protected(false)
            let late = BlockJob(name: "late") { ran.withLock { $0 = true } }
            late.addCondition(CancelGroup(group: group))
            group.addChild(late)
            hold.open()
            _ = await group.outcome
            #expect(await late.outcome.isCancelled, "round \(round)")
            #expect(!ran.current, "round \(round): the late child ran in a cancelled group")
            if ran.current { break }
        }
    }

    /// The same for a child given before the group runs: its condition cancels the group while the
    /// group's `execute` adds its children to the group's queue. (This one passed before the children
    /// being added were kept in the group's state too: it guards the rule, not a seen failure.)
    @Test func aFirstChildWhoseConditionCancelsItsGroupDoesNotRun() async throws {
        struct CancelGroup: JobCondition {
            let group: Protected<Job?>
            func dependencies(for job: Job) -> [Job] {
                group.current?.cancel()
                return []
            }
            var requiresEvaluation: Bool { false }
        }
        for round in 0..<100 {
            let queue = JobQueue(name: "q")
            let ran = Protected(false)
            let holder = Protected<Job?>(nil)
            let late = BlockJob(name: "late") { ran.withLock { $0 = true } }
            late.addCondition(CancelGroup(group: holder))
            let group = GroupJob(name: "group", children: [late])
            holder.withLock { $0 = group }
            queue.add(group)
            _ = await group.outcome
            holder.withLock { $0 = nil }
            #expect(await late.outcome.isCancelled, "round \(round)")
            #expect(!ran.current, "round \(round): the child ran in a cancelled group")
            if ran.current { break }
        }
    }

    /// A group started by hand and dropped, whose child then produces a job: no crash.
    @Test func aGroupStartedByHandAndDroppedStillFinishesItsChildren() async throws {
        let go = Gate()
        let produced = Gate()
        let child = AsyncJob(name: "child") { job in
            await go.waitAsync()
            job.produce(BlockJob(name: "produced") { produced.open() })
        }
        do {
            let group = GroupJob(name: "by hand", children: [child])
            try group.start()
        }
        go.open()
        try await withDeadline(.seconds(10), "the produced job") { await produced.waitAsync() }
        #expect(await child.outcome.didSucceed)
    }

    /// `start()` by hand refuses a job with conditions (only a queue evaluates them and claims their
    /// categories) instead of running it regardless.
    @Test func startingAJobWithConditionsByHandIsRefused() {
        let ran = Protected(false)
        let job = BlockJob(name: "guarded") { ran.withLock { $0 = true } }
        job.addCondition(ClosureCondition(name: "never") { _ in false })
        let error = #expect(throws: JobError.self) { try job.start() }
        #expect(error?.code == .notStartable)
        #expect(error?.message.contains("it has conditions") == true)
        #expect(!ran.current)
    }

    /// `didCancel` is not called on a job that finished meanwhile because a slow cancel observer held
    /// up the interrupt: the body is interrupted first, then the observers hear of the cancel.
    final class Recording: CallbackJob, @unchecked Sendable {
        let finishedAtDidCancel = Protected<Bool?>(nil)
        let didCancelCalled = Gate()
        let bodyInside = Gate()
        override func execute() throws { bodyInside.open() }
        override func didCancel(reason: any Error) {
            finishedAtDidCancel.withLock { $0 = isFinished }
            didCancelCalled.open()
        }
    }

    @Test func didCancelReachesTheBodyBeforeSlowCancelObservers() async throws {
        let job = Recording(name: "recording")
        let observerInside = Gate()
        let releaseObserver = Gate()
        job.onCancel { _, _ in
            observerInside.open()
            releaseObserver.wait()
        }
        JobQueue(name: "q").add(job)
        await job.bodyInside.waitAsync()
        // A thread of its own: the observer blocks it until the test, on Swift concurrency's pool, goes on.
        DispatchQueue(label: "canceller").async { job.cancel() }
        await observerInside.waitAsync()
        #expect(job.finishedAtDidCancel.current == false)  // already told, before the observer
        job.finish()
        releaseObserver.open()
        _ = await job.outcome
    }

    /// A cancel reason that holds the last reference to an object (a job) is not released under the
    /// job's lock when the body completes anyway (the debug lock check would stop the process).
    @Test func aCancelReasonIsNotReleasedUnderTheJobsLock() async {
        await #expect(processExitsWith: .success) {
            final class Reason: Error, @unchecked Sendable {
                let job: Job? = BlockJob(name: "kept by the reason") {}
            }
            let go = Gate()
            let running = Gate()
            let job = AsyncJob(name: "running") { _ in
                running.open()
                await go.waitAsync()
            }
            JobQueue(name: "q").add(job)
            await running.waitAsync()
            job.cancel(reason: Reason())
            go.open()
            _ = await job.outcome
        }
    }

    /// Adding a dependency right after adding a job is a race with its start: reported as a value.
    @Test func aDependencyAddedTooLateIsReportedNotTrapped() async {
        let queue = JobQueue(name: "q")
        var accepted = 0
        var tooLate = 0
        for _ in 0..<2_000 {
            let job = BlockJob {}
            queue.add(job)
            if job.addDependency(BlockJob {}) {
                accepted += 1
                job.cancel()  // it waits for a dependency in no queue
            } else {
                tooLate += 1
                #expect(job.state >= .executing)
            }
        }
        await queue.waitUntilAllJobsAreFinished()
        #expect(accepted + tooLate == 2_000)
    }

    /// Composite conditions of conditions that need no evaluation need none either.
    @Test func compositeConditionsForwardWhetherTheyNeedEvaluation() {
        let exclusive = MutuallyExclusive(category: "c")
        #expect(!AllOfConditions([exclusive]).requiresEvaluation)
        #expect(!SilentCondition(exclusive).requiresEvaluation)
        #expect(!NegatedCondition(exclusive).requiresEvaluation)
        #expect(AllOfConditions([exclusive, ClosureCondition(name: "c") { _ in true }]).requiresEvaluation)
    }
}
