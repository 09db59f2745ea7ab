import Baton
import BatonTesting
import Dispatch
import Testing

/// A second review of the core against its peers (NSOperation, PSOperations, ProcedureKit); each test
/// failed before its fix.
@Suite(.timeLimit(.minutes(2))) struct PeerSemanticsTests2 {
    struct Stop: Error {}

    // MARK: A job finished before its body runs

    /// A callback job whose body records that it ran (a subclass that finished here too would have
    /// finished twice).
    final class RecordsItsBody: CallbackJob, @unchecked Sendable {
        let ran = Protected(false)
        override func execute() { ran.withLock { $0 = true } }
    }

    @Test("a callback job finished by an observer of its start does not run its body")
    func finishedFromOnStartDoesNotRun() async throws {
        for cancelFirst in [false, true] {
            let job = RecordsItsBody(name: "finished early")
            let ran = job.ran
            job.onStart { job in
                if cancelFirst { job.cancel() }
                (job as! CallbackJob).finish(Stop())
            }
            JobQueue().add(job)
            try await withDeadline(.seconds(30), "the job finished by its start observer") {
                #expect(await job.outcome.didFail)
            }
            #expect(!ran.current, "cancel first: \(cancelFirst)")
        }
    }

    @Test("a job cancelled before it is added ignores a finish meanwhile and finishes cancelled")
    func finishAfterCancelBeforeAdding() async {
        await #expect(processExitsWith: .success) {
            let job = CallbackJob(name: "cancelled early") { _, done in done() }
            job.cancel()
            job.finish(Stop())
            JobQueue().add(job)
            precondition(job.waitUntilFinished().isCancelled, "the job did not finish cancelled")
        }
    }

    // MARK: A group that finishes without running

    @Test("a group that finishes without running is heard of after its children finished")
    func groupFinishedWithoutRunningReportsFinishedChildren() async throws {
        for way in ["cancelled", "failed condition", "nested"] {
            let children = (0..<3).map { i in BlockJob(name: "child \(i)") {} }
            let inner = GroupJob(name: "inner", children: [children[2]])
            let group = GroupJob(name: "group", children: way == "nested" ? [children[0], inner] : children)
            let members = way == "nested" ? [children[0], children[2]] : children
            let unfinishedWhenTold = Protected<[String]?>(nil)
            group.onFinish { _ in
                unfinishedWhenTold.withLock { $0 = members.filter { !$0.isFinished }.map(\.name) }
            }
            switch way {
            case "failed condition": group.addCondition(ClosureCondition(name: "never") { _ in false })
            default: group.cancel()
            }
            JobQueue().add(group)
            try await withDeadline(.seconds(30), "the group that finished without running (\(way))") {
                _ = await group.outcome
                for child in members { _ = await child.outcome }
            }
            #expect(unfinishedWhenTold.current == [], "\(way)")
        }
    }

    // MARK: Conditions on dependencies that were asked to cancel

    @Test(
        "a dependency cancelled while running that completed anyway fails NoCancelledDependencies and NoFailedDependencies"
    )
    func dependencyCancelledWhileRunningCountsAsCancelled() async throws {
        let started = Gate()
        let mayReturn = Gate()
        let dependency = AsyncJob(name: "dependency") { _ in
            started.open()
            await mayReturn.waitAsync()  // returns normally though cancelled: the job succeeds
        }
        let noCancelled = BlockJob(name: "no cancelled") {}
        noCancelled.addCondition(NoCancelledDependencies())
        let noFailed = BlockJob(name: "no failed") {}
        noFailed.addCondition(NoFailedDependencies())
        let ignoring = BlockJob(name: "ignoring cancellations") {}
        ignoring.addCondition(NoFailedDependencies(ignoringCancellations: true))
        let guarded = [noCancelled, noFailed, ignoring]
        for job in guarded { job.addDependency(dependency) }
        JobQueue().add([dependency] + guarded)
        await started.waitAsync()
        dependency.cancel()
        mayReturn.open()
        try await withDeadline(.seconds(30), "the dependency and the guarded jobs") {
            #expect(await dependency.outcome.didSucceed)
            #expect(dependency.isCancelled)
            for job in [noCancelled, noFailed] {
                let error = try #require(await job.outcome.error as? JobError, "\(job.name)")
                #expect(error.code == .conditionFailed)
                #expect(error.message.contains("dependency 'dependency' was cancelled"), "\(error.message)")
            }
            #expect(await ignoring.outcome.didSucceed)
        }
    }

    @Test("NoFailedDependencies fails on a dependency cancelled before it ran, unless told to ignore cancellations")
    func noFailedDependenciesAndCancelledDependencies() async throws {
        let dependency = BlockJob(name: "dependency") {}
        dependency.cancel()
        let strict = BlockJob(name: "strict") {}
        strict.addCondition(NoFailedDependencies())
        let lenient = BlockJob(name: "lenient") {}
        lenient.addCondition(NoFailedDependencies(ignoringCancellations: true))
        for job in [strict, lenient] { job.addDependency(dependency) }
        JobQueue().add([dependency, strict, lenient])
        try await withDeadline(.seconds(30), "the guarded jobs") {
            #expect(await strict.outcome.didFail)
            #expect(await lenient.outcome.didSucceed)
        }
    }

    // MARK: Dependencies that conditions generate

    /// Generates `job` as a dependency of the guarded job; satisfied when `satisfied` says so.
    struct Generates: JobCondition {
        let job: Job
        var satisfied: @Sendable () -> Bool = { true }
        var name: String { "generates '\(job.name)'" }
        func dependencies(for guarded: Job) -> [Job] { [job] }
        func evaluateImmediately(for guarded: Job) -> ConditionResult? { satisfied() ? .satisfied : .failed(Stop()) }
    }

    @Test("a job cancelled before it is added does not run the dependency its condition made")
    func cancelledBeforeAddingCancelsMadeDependency() async throws {
        let ran = Protected(false)
        let made = BlockJob(name: "made") { ran.withLock { $0 = true } }
        let guarded = BlockJob(name: "guarded") {}
        guarded.addCondition(Generates(job: made))
        guarded.cancel()
        JobQueue().add(guarded)
        try await withDeadline(.seconds(30), "the guarded job and the job its condition made") {
            #expect(await guarded.outcome.isCancelled)
            #expect(await made.outcome.isCancelled)
        }
        #expect(!ran.current)
    }

    @Test("cancelling a waiting job cancels the dependency its condition made")
    func cancellingWaitingJobCancelsMadeDependency() async throws {
        let ran = Protected(false)
        let mayFinish = Gate()
        let own = AsyncJob(name: "own dependency") { _ in await mayFinish.waitAsync() }
        let made = BlockJob(name: "made") { ran.withLock { $0 = true } }
        let guarded = BlockJob(name: "guarded") {}
        guarded.addDependency(own)
        guarded.addCondition(Generates(job: made))
        let queue = JobQueue()
        queue.add([own, guarded])
        #expect(made.state == .pending)  // it waits for the guarded job's own dependency
        guarded.cancel()
        mayFinish.open()
        try await withDeadline(.seconds(30), "the jobs", report: { queue.diagnose().description }) {
            #expect(await guarded.outcome.isCancelled)
            #expect(await made.outcome.isCancelled)
            _ = await own.outcome
        }
        #expect(!ran.current)
    }

    @Test("a generated dependency that is also a dependency of the guarded job's own dependencies makes no cycle")
    func generatedDependencyUpstreamMakesNoCycle() async throws {
        let order = Recorder<String>()
        let signIn = BlockJob(name: "sign in") { order.record("sign in") }
        let profile = BlockJob(name: "profile") { order.record("profile") }
        let save = BlockJob(name: "save") { order.record("save") }
        profile.addDependency(signIn)
        save.addDependency(profile)
        save.addCondition(Generates(job: signIn))
        let queue = JobQueue()
        queue.add([save, profile])
        try await withDeadline(.seconds(30), "sign in, profile and save", report: { queue.diagnose().description }) {
            for job in [signIn, profile, save] { #expect(await job.outcome.didSucceed, "\(job.name)") }
        }
        #expect(order.values == ["sign in", "profile", "save"])
    }

    @Test("a job does not run when a dependency its condition generated failed or was cancelled")
    func failedGeneratedDependencyFailsTheCondition() async throws {
        for cancel in [false, true] {
            let ran = Protected(false)
            let signIn = BlockJob(name: "sign in") { throw Stop() }
            if cancel { signIn.cancel() }
            let save = BlockJob(name: "save") { ran.withLock { $0 = true } }
            save.addCondition(Generates(job: signIn))
            JobQueue().add(save)
            try await withDeadline(.seconds(30), "save") {
                let error = try #require(await save.outcome.error as? JobError)
                #expect(error.code == .conditionFailed)
                #expect(error.message.contains("sign in"), "\(error.message)")
            }
            #expect(!ran.current, "cancelled: \(cancel)")
        }
    }

    // MARK: Producing from observers

    @Test("a job produces from an observer of its finish: the produced job runs")
    func produceFromFinishObserver() async {
        await #expect(processExitsWith: .success) {
            let produced = BlockJob(name: "produced") {}
            let producer = BlockJob(name: "producer") {}
            producer.onFinish { _ in producer.produce(produced) }
            JobQueue().add(producer)
            precondition(producer.waitUntilFinished().didSucceed, "the producer did not succeed")
            precondition(produced.waitUntilFinished().didSucceed, "the produced job did not run")
        }
    }

    @Test("observers hear of a job produced from an observer of the start before it joins the queue")
    func produceFromStartObserverIsAnnouncedFirst() async throws {
        let produced = BlockJob(name: "produced") {}
        let stateWhenTold = Protected<JobState?>(nil)
        let producer = BlockJob(name: "producer") {}
        producer.onStart { job in job.produce(produced) }
        producer.onProduce { _, job in stateWhenTold.withLock { $0 = job.state } }
        JobQueue(name: "wide", maxConcurrentJobs: 4).add(producer)
        try await withDeadline(.seconds(30), "the producer and the produced job") {
            #expect(await producer.outcome.didSucceed)
            #expect(await produced.outcome.didSucceed)
        }
        #expect(stateWhenTold.current == .initialized)
    }

    // MARK: Exclusivity is claimed when the queue starts the job

    @Test(
        "a job waiting for a slot holds no category: a group's child and another job on a serial queue do not deadlock")
    func waitingForASlotHoldsNoCategory() async throws {
        for groupFirst in [true, false] {
            let scope = ExclusivityScope(name: "slot \(groupFirst)")
            let queue = JobQueue(name: "serial", maxConcurrentJobs: 1, exclusivityScope: scope)
            let child = BlockJob(name: "child") {}
            child.addCondition(MutuallyExclusive(category: "db"))
            let group = GroupJob(name: "group", children: [child])
            let other = BlockJob(name: "other") {}
            other.addCondition(MutuallyExclusive(category: "db"))
            queue.add(groupFirst ? [group, other] : [other, group])
            try await withDeadline(
                .seconds(30), "a group whose child wants 'db' and another job wanting 'db' on one serial queue",
                report: { queue.diagnose().description }
            ) {
                for job in [group, child, other] { #expect(await job.outcome.didSucceed, "\(job.name)") }
            }
            #expect(scope.holders(of: "db").isEmpty)
        }
    }

    @Test("a job in a suspended queue claims nothing: other queues' jobs of its category run")
    func suspendedQueueClaimsNothing() async throws {
        let scope = ExclusivityScope(name: "suspended")
        let suspended = JobQueue(name: "suspended", exclusivityScope: scope)
        suspended.isSuspended = true
        let parked = BlockJob(name: "parked") {}
        parked.addCondition(MutuallyExclusive(category: "db"))
        suspended.add(parked)
        let running = JobQueue(name: "running", exclusivityScope: scope)
        let other = BlockJob(name: "other") {}
        other.addCondition(MutuallyExclusive(category: "db"))
        running.add(other)
        try await withDeadline(
            .seconds(30), "a job whose category a job of a suspended queue wants",
            report: { running.diagnose().description }
        ) {
            #expect(await other.outcome.didSucceed)
        }
        #expect(parked.state == .ready)
        suspended.isSuspended = false
        try await withDeadline(.seconds(30), "the parked job once its queue resumed") {
            #expect(await parked.outcome.didSucceed)
        }
    }
}
