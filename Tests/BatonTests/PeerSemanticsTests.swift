import Baton
import BatonTesting
import Dispatch
import Testing

/// Behaviour that tests written for NSOperation and its peers (PSOperations, ProcedureKit) rely on;
/// each was found by a review of the core and failed before it was fixed.
@Suite(.timeLimit(.minutes(2))) struct PeerSemanticsTests {
    /// Runs `jobs` on a fresh serial queue and returns the names in the order their bodies ran.
    func order(of jobs: [BlockJob], recordedIn order: Protected<[String]>) async throws -> [String] {
        let queue = JobQueue(name: "serial", maxConcurrentJobs: 1)
        queue.add(jobs)
        try await withDeadline(.seconds(30), "the serial queue") { await queue.waitUntilAllJobsAreFinished() }
        return order.current
    }

    @Test("a serial queue runs one add([...]) in its order, though some jobs first see finished dependencies")
    func batchKeepsItsOrder() async throws {
        let finished = BlockJob(name: "finished") {}
        JobQueue().add(finished)
        _ = await finished.outcome
        for dependentFirst in [true, false] {
            let order = Protected<[String]>([])
            let a = BlockJob(name: "a") { order.withLock { $0.append("a") } }
            let b = BlockJob(name: "b") { order.withLock { $0.append("b") } }
            let c = BlockJob(name: "c") { order.withLock { $0.append("c") } }
            let waits = dependentFirst ? a : b
            waits.addDependency(finished)
            #expect(try await self.order(of: [a, b, c], recordedIn: order) == ["a", "b", "c"], "\(waits.name) waits")
        }
    }

    @Test("in such a batch, a higher priority still starts first")
    func batchOrderKeepsPriorities() async throws {
        let finished = BlockJob(name: "finished") {}
        JobQueue().add(finished)
        _ = await finished.outcome
        let order = Protected<[String]>([])
        let low = BlockJob(name: "low", priority: .low) { order.withLock { $0.append("low") } }
        let high = BlockJob(name: "high", priority: .high) { order.withLock { $0.append("high") } }
        let normal = BlockJob(name: "normal") { order.withLock { $0.append("normal") } }
        low.addDependency(finished)
        let queue = JobQueue(name: "serial", maxConcurrentJobs: 1)
        queue.isSuspended = true
        queue.add([low, normal, high])
        queue.isSuspended = false
        try await withDeadline(.seconds(30), "the serial queue") { await queue.waitUntilAllJobsAreFinished() }
        #expect(order.current == ["high", "normal", "low"])
    }

    /// An asynchronous job whose `didCancel` finishes it while its work, racing, finishes it too.
    final class RacingFinish: CallbackJob, @unchecked Sendable {
        let workMayFinish = Gate()
        override func execute() {
            // A thread of its own: the wait must not hold one of Swift concurrency's (on Linux,
            // Dispatch's global queue is that pool).
            DispatchQueue(label: "racing work").async {
                self.workMayFinish.wait()
                self.finish()
            }
        }
        override func didCancel(reason: any Error) {
            finish(CancellationError())
            workMayFinish.open()
        }
    }

    @Test(
        "a cancelled callback job finished by its didCancel and by its work: the first finish counts, the second is ignored"
    )
    func finishAfterCancelIsIgnored() async throws {
        for _ in 0..<50 {
            let job = RacingFinish(name: "racing")
            let started = Gate()
            job.onStart { _ in started.open() }
            JobQueue().add(job)
            await started.waitAsync()
            job.cancel()
            try await withDeadline(.seconds(30), "the cancelled job") { #expect(await job.outcome.isCancelled) }
            // The work's own finish comes after; it must not stop the program.
            job.workMayFinish.open()
        }
    }

    @Test("waiting for a job from its own finish observer returns its outcome instead of waiting for itself")
    func waitingInOwnFinishObserver() async throws {
        let job = BlockJob(name: "waited") {}
        let seen = Protected<JobOutcome?>(nil)
        job.onFinish { _ in seen.withLock { $0 = job.waitUntilFinished() } }
        JobQueue().add(job)
        try await withDeadline(.seconds(30), "the job whose observer waits for it") { _ = await job.outcome }
        #expect(seen.current?.didSucceed == true)
    }

    /// Adds a child whenever one ends unsucceeded, counting the calls.
    final class Retrying: GroupJob, @unchecked Sendable {
        let calls = Protected(0)
        override func childDidFinish(_ child: Job, outcome: JobOutcome) {
            if calls.withLock({
                $0 += 1; return $0
            }) < 10_000, !outcome.didSucceed {
                addChild(BlockJob {})
            }
        }
    }

    @Test("a group that finished hears no more of its children: a hook that adds children there does not loop")
    func noHookAfterTheGroupFinished() async throws {
        let child = BlockJob(name: "child") {}
        let group = Retrying(name: "group", children: [child])
        group.cancel()
        JobQueue().add(group)
        try await withDeadline(.seconds(30), "the child left behind") { _ = await child.outcome }
        #expect(group.calls.current == 0)
    }

    /// Holds a job weakly.
    final class WeakJob: @unchecked Sendable {
        weak var job: Job?
        init(_ job: Job) { self.job = job }
    }

    @Test("a repeating job lets go of its finished iterations")
    func repeatJobReleasesFinishedIterations() async throws {
        let hold = Gate()
        let made = Protected(0)
        let (repeating, first): (RepeatJob, WeakJob) = {
            let job = ValueJob<[UInt8]>(name: "first") { _ in [UInt8](repeating: 1, count: 1 << 20) }
            let repeating = RepeatJob(name: "poll", first: job) { _, _ in
                let count = made.withLock { made -> Int in
                    made += 1
                    return made
                }
                return count == 1 ? AsyncJob(name: "second") { _ in await hold.waitAsync() } : nil
            }
            return (repeating, WeakJob(job))
        }()
        JobQueue().add(repeating)
        defer { hold.open() }
        let second = await eventually(within: .seconds(30)) { repeating.iterations == 2 && first.job == nil }
        #expect(second, "the finished first iteration is still alive")
        #expect(repeating.childJobs.map(\.name) == ["second"])
        hold.open()
        try await withDeadline(.seconds(30), "the repeating job") { _ = await repeating.outcome }
    }

    @Test("observers hear of a produced job before it can start")
    func producedJobIsAnnouncedBeforeItStarts() async throws {
        for _ in 0..<50 {
            let stateWhenTold = Protected<JobState?>(nil)
            let produced = BlockJob(name: "produced") {}
            let producer = CallbackJob(name: "producer") { job, done in
                job.produce(produced)
                done()
            }
            producer.onProduce { _, job in stateWhenTold.withLock { $0 = job.state } }
            JobQueue(name: "wide", maxConcurrentJobs: 4).add(producer)
            try await withDeadline(.seconds(30), "the produced job") {
                _ = await producer.outcome
                _ = await produced.outcome
            }
            let state = stateWhenTold.current
            #expect(
                state != .executing && state != .finished, "told when the produced job was \(String(describing: state))"
            )
        }
    }
}
