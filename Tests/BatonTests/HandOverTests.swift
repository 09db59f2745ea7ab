import BatonTesting
import Dispatch
import Foundation
import Testing

@testable import Baton

/// Frees a gate when it is freed: what a job's closure captured, watched.
final class Probe: Sendable {
    let freed: Gate
    init(_ freed: Gate) { self.freed = freed }
    deinit { freed.open() }
}

/// The one wait rule: every wait returns once what it waits for finished and handed over, on any
/// thread; every closure a job holds is released before its waiters resume; code run by a finish that
/// blocks on what needs the finish to end stops the program naming the job.
@Suite(.timeLimit(.minutes(1))) struct HandOverTests {
    // MARK: Closures are released before waiters resume

    @Test func aCallbackJobFinishedWhileItsClosureRunsResumesItsWaitersOnlyOnceTheClosureIsReleased() async throws {
        let freed = Gate()
        let release = Gate()
        defer { release.open() }
        let job: CallbackJob
        do {
            let probe = Probe(freed)
            job = CallbackJob(name: "callback") { _, done in
                _ = probe
                done()  // finished inside the closure, which goes on running until `release` opens
                release.wait()  // a dedicated worker thread, not one of the task pool's
            }
        }
        JobQueue(name: "callbacks", workerThreads: .dedicated).add(job)
        let waiting = Task {
            _ = await job.outcome
            return freed.isOpen
        }
        // Finished, and the waiter still waits: the closure (and what it captured) is alive.
        #expect(await eventually { job.isFinished && job.withCore { $0.waiters.count } == 1 })
        #expect(!freed.isOpen)
        release.open()
        try await withDeadline(.seconds(30), "the waiter of a job finished inside its closure") {
            #expect(await waiting.value, "the waiter resumed while the closure's captures were alive")
        }
    }

    @Test func aCallbackJobFinishedFromAnotherThreadReleasesItsClosureBeforeItsWaitersResume() async throws {
        let freed = Gate()
        let job: CallbackJob
        do {
            let probe = Probe(freed)
            job = CallbackJob(name: "elsewhere") { _, done in
                _ = probe
                let finished = Gate()
                DispatchQueue(label: "finisher").async {
                    done()
                    finished.open()
                }
                finished.wait()  // `done()` came from another thread while this closure still runs
            }
        }
        JobQueue(name: "callbacks", workerThreads: .dedicated).add(job)
        try await withDeadline(.seconds(30), "a job finished from another thread") { _ = await job.outcome }
        #expect(freed.isOpen, "the closure's captures were alive when the outcome was returned")
    }

    @Test func aRetryJobLetsGoOfItsFactoryAndPredicateBeforeItsWaitersResume() async throws {
        let freedFactory = Gate()
        let freedPredicate = Gate()
        let retry: RetryJob
        do {
            let (factory, predicate) = (Probe(freedFactory), Probe(freedPredicate))
            retry = RetryJob(
                name: "retry", maxAttempts: 2,
                retryIf: { _ in
                    _ = predicate
                    return true
                },
                makeAttempt: { attempt in
                    _ = factory
                    return BlockJob(name: "attempt \(attempt)") { if attempt == 1 { throw CancellationError() } }
                })
        }
        JobQueue(name: "retries").add(retry)
        try await withDeadline(.seconds(30), "the retry job") { _ = await retry.outcome }
        #expect(retry.attempts == 2)
        #expect(freedFactory.isOpen, "the retry job still held makeAttempt")
        #expect(freedPredicate.isOpen, "the retry job still held retryIf")
    }

    @Test func aRepeatJobLetsGoOfItsNextClosureBeforeItsWaitersResume() async throws {
        let freed = Gate()
        let repeating: RepeatJob
        do {
            let probe = Probe(freed)
            repeating = RepeatJob(name: "repeat", first: BlockJob(name: "1") {}) { previous, _ in
                _ = probe
                return previous.name == "1" ? BlockJob(name: "2") {} : nil
            }
        }
        JobQueue(name: "repeats").add(repeating)
        try await withDeadline(.seconds(30), "the repeat job") { _ = await repeating.outcome }
        #expect(repeating.iterations == 2)
        #expect(freed.isOpen, "the repeat job still held its next closure")
    }

    @Test func anOperationJobLetsGoOfItsOperationOnceItFinished() async throws {
        let freed = Gate()
        let job: OperationJob
        do {
            let probe = Probe(freed)
            job = OperationJob(name: "operation", running: BlockOperation { _ = probe })
        }
        #expect(job.operation != nil)
        JobQueue(name: "operations").add(job)
        try await withDeadline(.seconds(30), "the operation job") { #expect(await job.outcome.didSucceed) }
        #expect(job.operation == nil)
        // Foundation's own queue lets go of a finished operation on its own schedule; the job does not
        // keep it.
        #expect(await eventually { freed.isOpen })
    }

    // MARK: Waits from a hand-over that can end

    /// Waits, when freed, for `job` (set before the object is shared).
    final class WaitsForJobWhenFreed: @unchecked Sendable {
        // @unchecked Sendable: `job` is set once, before the object is shared.
        var job: Job?
        let outcome = Protected<JobOutcome?>(nil)
        deinit { if let job { let result = job.waitUntilFinished(); outcome.withLock { $0 = result } } }
    }

    @Test func aHandOverThatWaitsForTheNextJobOfItsSerialQueueGetsItsOutcome() async throws {
        let queue = JobQueue(name: "serial", maxConcurrentJobs: 1, workerThreads: .dedicated)
        let first = BlockJob(name: "first") {}
        let second = BlockJob(name: "second") {}
        do {
            let held = WaitsForJobWhenFreed()
            held.job = second
            first.onFinish { _ in _ = held }  // freed in the first job's hand-over, which waits for the second
        }
        queue.add([first, second])
        try await withDeadline(.seconds(30), "a hand-over waiting for the next job of its serial queue") {
            #expect(await first.outcome.didSucceed)
            #expect(await second.outcome.didSucceed)
            await queue.waitUntilAllJobsAreFinished()
        }
    }

    /// The same when what waits is captured by the job's own block: a `BlockJob` lets go of its blocks in
    /// its hand-over. (It released them as its body returned, the slot and category still held: the
    /// serial queue's wait hung, and the category's stopped the program as a wait from a body.)
    @Test(arguments: [false, true])
    func aBlockJobsCapturedObjectWaitingForTheJobAfterItGetsItsOutcome(sharingACategory: Bool) async throws {
        let scope = ExclusivityScope(name: "block hand-over")
        let queue = JobQueue(
            name: "block", maxConcurrentJobs: sharingACategory ? 4 : 1, exclusivityScope: scope,
            workerThreads: .dedicated)
        let second = BlockJob(name: "second") {}
        let first: BlockJob
        do {
            let held = WaitsForJobWhenFreed()
            held.job = second
            first = BlockJob(name: "first") { _ = held }
        }
        if sharingACategory {
            first.addCondition(MutuallyExclusive(category: "db"))
            second.addCondition(MutuallyExclusive(category: "db"))
        }
        queue.add([first, second])
        try await withDeadline(.seconds(30), "a block's captured object waiting for the job after it") {
            #expect(await first.outcome.didSucceed)
            #expect(await second.outcome.didSucceed)
            await queue.waitUntilAllJobsAreFinished()
        }
    }

    @Test func aHandOverThatWaitsForAJobNeedingItsCategoryGetsItsOutcome() async throws {
        let scope = ExclusivityScope(name: "hand-over")
        let queue = JobQueue(name: "exclusive", exclusivityScope: scope, workerThreads: .dedicated)
        let first = BlockJob(name: "first") {}
        first.addCondition(MutuallyExclusive(category: "db"))
        let second = BlockJob(name: "second") {}
        second.addCondition(MutuallyExclusive(category: "db"))
        do {
            let waits = WaitsForJobWhenFreed()
            waits.job = second
            first.onFinish { _ in _ = waits }
        }
        queue.add([first, second])
        try await withDeadline(.seconds(30), "a hand-over waiting for a job that needs its category") {
            #expect(await first.outcome.didSucceed)
            #expect(await second.outcome.didSucceed)
        }
    }

    /// Blocks its `deinit` on a semaphore (a wait Baton cannot see) until `signalled` is signalled.
    final class BlocksOnSemaphoreWhenFreed: Sendable {
        let signalled = DispatchSemaphore(value: 0)
        let blocked = Protected(false)
        deinit {
            blocked.withLock { $0 = true }
            signalled.wait()
        }
    }

    /// The job granted the finished job's category runs on a worker loop of the same queue: the loop
    /// whose job is handing over is never counted on for it, even for a wait Baton cannot see.
    @Test(arguments: [JobQueue.WorkerThreads.shared, .dedicated])
    func aHandOverBlockedOnASemaphoreForTheJobGrantedItsCategoryEnds(threads: JobQueue.WorkerThreads) async throws {
        let scope = ExclusivityScope(name: "semaphore")
        let queue = JobQueue(name: "exclusive", exclusivityScope: scope, workerThreads: threads)
        let signalled: DispatchSemaphore
        let blocked: Protected<Bool>
        let first: BlockJob
        do {
            let blocks = BlocksOnSemaphoreWhenFreed()
            (signalled, blocked) = (blocks.signalled, blocks.blocked)
            first = BlockJob(name: "first") {}
            first.onFinish { _ in _ = blocks }  // freed in the first job's hand-over
        }
        first.addCondition(MutuallyExclusive(category: "db"))
        let second = BlockJob(name: "second") { signalled.signal() }
        second.addCondition(MutuallyExclusive(category: "db"))
        queue.add([first, second])
        try await withDeadline(.seconds(30), "a hand-over blocked until the job granted its category ran") {
            #expect(await second.outcome.didSucceed)
            #expect(await first.outcome.didSucceed)
        }
        #expect(blocked.current, "the first job's hand-over blocked")
    }

    @Test func aFinishObserverThatWaitsForAJobNeedingItsCategoryGetsItsOutcome() async throws {
        let scope = ExclusivityScope(name: "observer")
        let queue = JobQueue(name: "exclusive", exclusivityScope: scope, workerThreads: .dedicated)
        let first = BlockJob(name: "first") {}
        first.addCondition(MutuallyExclusive(category: "db"))
        let second = BlockJob(name: "second") {}
        second.addCondition(MutuallyExclusive(category: "db"))
        let seen = Recorder<Bool>()
        first.onFinish { _ in seen.record(second.waitUntilFinished().didSucceed) }  // told before the hand-over
        queue.add([first, second])
        try await withDeadline(.seconds(30), "a finish observer waiting for a job that needs its category") {
            #expect(await first.outcome.didSucceed)
        }
        #expect(seen.values == [true])
    }

    @Test func aCallbackJobThatWaitsForItselfAfterFinishingGetsItsOutcome() async throws {
        let job = CallbackJob(name: "self-waiting") { job, done in
            done()
            _ = job.waitUntilFinished()  // finished for its own closure, though it hands over once it returns
        }
        JobQueue(name: "callbacks", workerThreads: .dedicated).add(job)
        try await withDeadline(.seconds(30), "a callback job waiting for itself after done()") {
            #expect(await job.outcome.didSucceed)
        }
    }

    // MARK: Waits from a hand-over that cannot end stop the program

    @Test func aCallbackJobThatWaitsForItselfBeforeFinishingStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = CallbackJob(name: "impatient") { job, done in
                _ = job.waitUntilFinished()  // its finish cannot come before this returns
                done()
            }
            JobQueue(name: "q").add(job)
            blockUntilFinished(job)
        }
        expect(result, toSay: "BUG DETECTED: a blocking wait for job 'impatient' inside the finish of job 'impatient'")
    }

    @Test func anObserverWaitingForItsJobsOwnQueueStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "own")
            let job = BlockJob(name: "observed") {}
            job.onFinish { _ in queue.waitUntilAllJobsAreFinished() }
            queue.add(job)
            blockUntilFinished(job)
        }
        expect(result, toSay: "BUG DETECTED: a blocking wait for queue 'own' inside the finish of job 'observed'")
        expect(result, toSay: "queue 'own' counts job 'observed' until its finish ends")
    }

    @Test func anInstrumentWaitingForItsQueueStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "instrumented", instruments: [QueueWaitingInstrument()])
            let job = BlockJob(name: "told") {}
            queue.add(job)
            blockUntilFinished(job)
        }
        expect(result, toSay: "BUG DETECTED: a blocking wait for queue 'instrumented' inside the finish of job 'told'")
    }

    @Test func aDeinitInTheHandOverWaitingForADependentStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "q")
            let job = BlockJob(name: "first") {}
            let dependent = BlockJob(name: "dependent") {}
            dependent.addDependency(job)
            do {
                let held = WaitsWhenFreedForExit()
                held.job = dependent
                job.onFinish { _ in _ = held }
            }
            queue.add([job, dependent])
            blockUntilFinished(dependent)
        }
        expect(result, toSay: "BUG DETECTED: a blocking wait for job 'dependent' inside the finish of job 'first'")
        expect(result, toSay: "job 'dependent' waits for it and moves on only after its finish ends")
    }
}

/// A runtime probe (7 December 2026): a job whose body waited for its own queue, or for itself, hung
/// silently (`diagnose()` said only that it was running). Such a wait can never return — the queue
/// counts the job until its body returns — so it stops the program naming the job, as the same wait
/// from its finish does. A wait in a body for what does not need the job still works.
@Suite(.timeLimit(.minutes(1))) struct BodyWaitTests {
    @Test func aBodyWaitingForItsOwnQueueStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "own", maxConcurrentJobs: 2)
            let job = BlockJob(name: "waiter") { queue.waitUntilAllJobsAreFinished() }
            queue.add(job)
            blockUntilFinished(job)
        }
        expect(result, toSay: "BUG DETECTED: a blocking wait for queue 'own' inside the body of job 'waiter'")
        expect(result, toSay: "queue 'own' counts job 'waiter' until its body returns")
    }

    @Test func aBodyWaitingForAJobThatNeedsItsJobStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = BlockJob(name: "self-waiter") {}
            let queue = JobQueue(name: "q")
            let waiter = BlockJob(name: "body") { _ = job.waitUntilFinished() }
            job.addDependency(waiter)  // `job` needs `body` to finish: `body` waiting for it never returns
            queue.add([waiter, job])
            blockUntilFinished(job)
        }
        expect(result, toSay: "BUG DETECTED: a blocking wait for job 'self-waiter' inside the body of job 'body'")
        expect(result, toSay: "job 'self-waiter' waits for it and moves on only after its body returns")
    }

    /// A probe (7 December 2026, later): a body holding category "c" that waited for a job needing
    /// "c" hung silently (`diagnose()` showed one job running and one waiting for its category).
    @Test func aBodyWaitingForAJobThatNeedsItsCategoryStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "q", maxConcurrentJobs: 2, workerThreads: .dedicated)
            let needing = BlockJob(name: "needs c") {}
            needing.addCondition(MutuallyExclusive(category: "c"))
            let after = BlockJob(name: "after") {}
            after.addDependency(needing)
            // The holder waits once both are in the queue: the check sees a job's scope through its queue.
            let started = DispatchSemaphore(value: 0)
            let added = DispatchSemaphore(value: 0)
            let holder = BlockJob(name: "holder") {
                started.signal()
                added.wait()
                _ = after.waitUntilFinished()
            }
            holder.addCondition(MutuallyExclusive(category: "c"))
            queue.add(holder)
            started.wait()  // (an exit test's body: it may block)
            queue.add([needing, after])
            added.signal()
            blockUntilFinished(holder)
        }
        expect(result, toSay: "BUG DETECTED: a blocking wait for job 'after' inside the body of job 'holder'")
        expect(
            result,
            toSay:
                "job 'needs c', which 'after' waits for, needs exclusivity category 'c', which job 'holder' holds until its body returns"
        )
    }

    /// A probe (7 December 2026, night): a body of a serial queue waiting for the next job of that queue,
    /// directly or through a job of another queue, hung silently (`diagnose()` named the full slot).
    @Test func aBodyWaitingForTheNextJobOfItsSerialQueueStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "serial", maxConcurrentJobs: 1, workerThreads: .dedicated)
            let next = BlockJob(name: "next") {}
            let added = DispatchSemaphore(value: 0)
            let waiter = BlockJob(name: "waiter") {
                added.wait()
                _ = next.waitUntilFinished()
            }
            queue.add([waiter, next])
            added.signal()
            blockUntilFinished(waiter)
        }
        expect(result, toSay: "BUG DETECTED: a blocking wait for job 'next' inside the body of job 'waiter'")
        expect(
            result,
            toSay:
                "job 'next' needs a slot of queue 'serial', whose every slot job 'waiter' holds until its body returns")
    }

    @Test func aBodyWaitingThroughAnotherQueueForTheNextJobOfItsSerialQueueStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue(name: "serial", maxConcurrentJobs: 1, workerThreads: .dedicated)
            let other = JobQueue(name: "other", workerThreads: .dedicated)
            let next = BlockJob(name: "next") {}
            let report = BlockJob(name: "report") {}
            report.addDependency(next)
            let added = DispatchSemaphore(value: 0)
            let waiter = BlockJob(name: "waiter") {
                added.wait()
                _ = report.waitUntilFinished()
            }
            queue.add([waiter, next])
            other.add(report)
            added.signal()
            blockUntilFinished(waiter)
        }
        expect(result, toSay: "BUG DETECTED: a blocking wait for job 'report' inside the body of job 'waiter'")
        expect(result, toSay: "job 'next', which 'report' waits for, needs a slot of queue 'serial'")
    }

    @Test func aBodyWaitingForTheNextJobOfAQueueWithRoomWaits() async throws {
        let queue = JobQueue(name: "two", maxConcurrentJobs: 2, workerThreads: .dedicated)
        let next = BlockJob(name: "next") {}
        let added = Gate()
        let waiter = BlockJob(name: "waiter") {
            added.wait()
            _ = next.waitUntilFinished()
        }
        queue.add([waiter, next])
        added.open()
        try await withDeadline(.seconds(30), "the body's wait for a job that has a slot left returns") {
            _ = await waiter.outcome
        }
        #expect(next.outcomeIfDecided?.didSucceed == true)
    }

    @Test func aBodyWaitingForAJobNeedingACategoryWithRoomLeftWaits() async throws {
        // Limit 2: the body holds one unit, the job it waits for takes the other. The body waits once
        // the job is in the queue (where the check sees it).
        let queue = JobQueue(name: "q", maxConcurrentJobs: 2, workerThreads: .dedicated)
        let needing = BlockJob(name: "needs c") {}
        needing.addCondition(MutuallyExclusive(category: "c2", limit: 2))
        let added = Gate()
        let holder = BlockJob(name: "holder") {
            added.wait()
            _ = needing.waitUntilFinished()
        }
        holder.addCondition(MutuallyExclusive(category: "c2", limit: 2))
        queue.add(holder)
        queue.add(needing)
        added.open()
        try await withDeadline(.seconds(30), "the body's wait for a job that can get a unit returns") {
            _ = await holder.outcome
        }
        #expect(holder.outcomeIfDecided?.didSucceed == true)
        #expect(needing.outcomeIfDecided?.didSucceed == true)
    }

    /// A review (7 December 2026): the check first counted every job not yet running as one that will
    /// claim its categories, and stopped a wait that returns — the job's condition fails, and it
    /// finishes without claiming.
    @Test func aBodyWaitingForAJobWhoseConditionMayFailWaits() async throws {
        struct Refused: Error {}
        let queue = JobQueue(name: "q", maxConcurrentJobs: 3, workerThreads: .dedicated)
        let gate = Gate()
        let failing = BlockJob(name: "failing") {
            gate.wait()
            throw Refused()
        }
        let needing = BlockJob(name: "needs rc") {}
        needing.addCondition(MutuallyExclusive(category: "rc"))
        needing.addCondition(NoFailedDependencies())
        needing.addDependency(failing)
        let added = Gate()
        let holder = BlockJob(name: "holder") {
            added.wait()
            _ = needing.waitUntilFinished()
        }
        holder.addCondition(MutuallyExclusive(category: "rc"))
        queue.add(holder)
        queue.add([failing, needing])
        added.open()
        gate.open()
        try await withDeadline(.seconds(30), "the body's wait for a job whose condition fails returns") {
            _ = await holder.outcome
        }
        #expect(needing.outcomeIfDecided?.didFail == true)
        #expect(holder.outcomeIfDecided?.didSucceed == true)
    }

    @Test func aBodyWaitingForAnUnrelatedJobWaits() async throws {
        // Both bodies block: on threads of their own, not Swift's pool (on shared threads they held the
        // pool's two threads on a 2-core machine, and every task of the test process waited, this one's
        // `gate.open()` included, until Dispatch added a thread: 30 s under ThreadSanitizer in CI).
        let queue = JobQueue(name: "q", maxConcurrentJobs: 2, workerThreads: .dedicated)
        let other = JobQueue(name: "other", workerThreads: .dedicated)
        let gate = Gate()
        let unrelated = BlockJob(name: "unrelated") { gate.wait() }
        let waiter = BlockJob(name: "waiter") { _ = unrelated.waitUntilFinished() }
        other.add(unrelated)
        queue.add(waiter)
        gate.open()
        try await withDeadline(.seconds(30), "the body's wait for an unrelated job returns") {
            _ = await waiter.outcome
        }
        #expect(waiter.outcomeIfDecided?.didSucceed == true)
    }
}

/// Waits for its queue to empty when told of a finish (for an exit test)./// Waits for its queue to empty when told of a finish (for an exit test).
struct QueueWaitingInstrument: JobInstrument {
    func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) { queue.waitUntilAllJobsAreFinished() }
}

/// Waits, when freed, for `job` (for an exit test).
final class WaitsWhenFreedForExit: @unchecked Sendable {
    // @unchecked Sendable: `job` is set once, before the object is shared.
    var job: Job?
    deinit { job?.waitUntilFinished() }
}

/// Blocks the calling thread until `job` finished (exit tests run their bodies in async contexts).
func blockUntilFinished(_ job: Job) {
    job.waitUntilFinished()
}
