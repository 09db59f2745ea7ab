import Baton
import BatonTesting
import Dispatch
import Testing

@Suite(.timeLimit(.minutes(2))) struct CancellationTests {
    @Test func cancelledBeforeExecutionTheBodyNeverRuns() async {
        let queue = JobQueue(name: "cancel-before")
        let ran = Recorder<Bool>()
        let blocker = BlockJob(name: "blocker") {}
        let job = BlockJob(name: "job") { ran.record(true) }
        job.addDependency(blocker)
        queue.add(job)  // waits for `blocker`, which is in no queue
        job.cancel()
        let outcome = await job.outcome
        #expect(outcome.isCancelled)
        #expect(outcome.error is CancellationError)
        #expect(ran.count == 0)
    }

    @Test func cancelledDuringExecutionTheBodyIsToldAndFinishes() async {
        let inside = Gate()
        let sawCancel = Recorder<Bool>()
        final class Loop: Job, @unchecked Sendable {
            let inside: Gate
            let saw: Recorder<Bool>
            let cancelled = Gate()
            init(inside: Gate, saw: Recorder<Bool>) {
                self.inside = inside
                self.saw = saw
                super.init(name: "loop")
            }
            override func execute() throws {
                inside.open()
                cancelled.wait()
                saw.record(isCancelled)
                if isCancelled { throw CancellationError() }  // stopped early: reports cancelled
            }
            override func didCancel(reason: any Error) { cancelled.open() }
        }
        let job = Loop(inside: inside, saw: sawCancel)
        JobQueue(workerThreads: .dedicated).add(job)  // its body waits on a thread of its own
        await inside.waitAsync()
        job.cancel()
        #expect(await job.outcome.isCancelled)
        #expect(sawCancel.values == [true])
    }

    @Test func cancellingAFinishedJobHasNoEffect() async throws {
        let job = BlockJob {}
        try job.start()
        job.cancel()
        #expect(job.outcomeIfDecided?.didSucceed == true)
        #expect(job.isCancelled == false)
    }

    @Test func cancellingTheAwaitingTaskCancelsTheJobOnlyWhenAskedTo() async {
        let queue = JobQueue(name: "awaiting")
        let started = Gate()
        let job = AsyncJob { _ in
            started.open()
            await Gate().waitAsyncUnlessCancelled()
            try Task.checkCancellation()
        }
        queue.add(job)
        await started.waitAsync()
        let plainWaiter = Task { await job.outcome }
        plainWaiter.cancel()  // `outcome` ignores task cancellation: the job goes on
        let waiter = Task { await job.outcomeCancellingWithTask() }
        waiter.cancel()
        #expect(await waiter.value.isCancelled)
        #expect(await plainWaiter.value.isCancelled)  // same outcome, once the job finished
    }

    /// Cancels at random moments relative to the job's progress; every job must finish exactly once,
    /// with an outcome consistent with whether its body ran.
    @Test(arguments: 0..<4) func cancelRacesAlwaysFinishExactlyOnce(seed: Int) async {
        var rng = SeededRandom(seed: UInt64(seed))
        let queue = JobQueue(name: "race", maxConcurrentJobs: 4)
        let runs = 1_500
        let finishes = Recorder<UInt64>()
        let bodies = Recorder<UInt64>()
        var jobs: [Job] = []
        for i in 0..<runs {
            let spin = Int(rng.next() % 200)
            let job: Job
            if i % 3 == 0 {
                job = AsyncJob { job in
                    bodies.record(job.id)
                    for _ in 0..<spin { await Task.yield() }
                }
            } else {
                let box = JobBox()
                let block = BlockJob {
                    bodies.record(box.job!.id)
                    var x = 0
                    for k in 0..<spin * 10 { x &+= k }
                    _ = x
                }
                box.job = block
                job = block
            }
            job.onFinish { [id = job.id] _ in finishes.record(id) }
            jobs.append(job)
        }
        let cancelAt = jobs.map { _ in Int(rng.next() % 3) }
        // 0: cancel before adding; 1: right after adding (racing the start); 2: from another thread later.
        for (job, when) in zip(jobs, cancelAt) where when == 0 { job.cancel() }
        queue.add(jobs)
        let all = jobs
        DispatchQueue.concurrentPerform(iterations: 2) { half in
            for (index, job) in all.enumerated() where index % 2 == half && cancelAt[index] > 0 {
                job.cancel()
            }
        }
        await queue.waitUntilAllJobsAreFinished()
        let finished = finishes.values
        #expect(finished.count == runs)
        #expect(Set(finished).count == runs)  // exactly once each
        let ranBody = Set(bodies.values)
        #expect(bodies.values.count == ranBody.count)  // no body ran twice
        var succeeded = 0
        for (job, when) in zip(jobs, cancelAt) {
            guard let outcome = job.outcomeIfDecided else {
                Issue.record("\(job.name) has no outcome")
                continue
            }
            if when == 0 {
                // Cancelled before it was added: never runs.
                #expect(outcome.isCancelled)
                #expect(!ranBody.contains(job.id))
            }
            if outcome.didSucceed {
                // The cancel lost the race against the finish, or came while the body ran and the body
                // completed anyway (its work is done): either way the body ran.
                succeeded += 1
                #expect(ranBody.contains(job.id))
            } else {
                #expect(outcome.isCancelled)
                #expect(job.isCancelled)
            }
        }
        #expect(succeeded < runs)
    }
}

/// Lets a block find its own job.
final class JobBox: @unchecked Sendable {
    // @unchecked Sendable: written once before the job is added, read only by its body afterwards.
    var job: Job?
}

/// Issue 9: cancellation as the peers (Foundation, ProcedureKit) expect it.
@Suite(.timeLimit(.minutes(1))) struct CancellationSemanticsTests {
    /// Item 1: a job cancelled before it was added reports the cancel (then the finish) once added.
    @Test(arguments: [false, true])
    func aJobCancelledBeforeItWasAddedTellsItsObserversOnceAdded(startedByHand: Bool) async throws {
        let events = Recorder<String>()
        let job = BlockJob(name: "early") { events.record("body") }
        job.addObserver(
            BlockObserver(
                onStart: { _ in events.record("start") },
                onCancel: { _, _ in events.record("cancel") },
                onFinish: { _, outcome in events.record("finish \(outcome.isCancelled ? "cancelled" : "?")") }))
        job.cancel()
        #expect(events.values.isEmpty)  // nothing to tell yet: it is in no queue
        if startedByHand { try job.start() } else { JobQueue().add(job) }
        #expect(await job.outcome.isCancelled)
        #expect(events.values == ["cancel", "finish cancelled"])
    }

    /// Item 21: a body that completed reports its result, even if a cancel request came while it ran;
    /// so `queue.run { commit() }` never throws after the commit happened.
    @Test func aBodyThatCompletedAfterACancelRequestReportsItsResult() async throws {
        let inside = Gate()
        let proceed = Gate()
        let job = ValueJob<Int>(name: "commit") { _ in
            inside.open()
            await proceed.waitAsync()  // ignores the cancel: the work is committed anyway
            return 42
        }
        JobQueue().add(job)
        await inside.waitAsync()
        job.cancel()
        proceed.open()
        #expect(await job.outcome.didSucceed)
        #expect(job.isCancelled)  // it was asked
        #expect(try await job.value == 42)
    }

    @Test func queueRunReturnsTheValueOfABodyThatCompletedDespiteTheCancel() async throws {
        let queue = JobQueue(name: "run")
        let inside = Gate()
        let proceed = Gate()
        let committed = Recorder<Int>()
        let caller = Task {
            try await queue.run(name: "commit") { () async -> Int in
                inside.open()
                await proceed.waitAsync()
                committed.record(7)
                return 7
            }
        }
        await inside.waitAsync()
        caller.cancel()  // cancels the job; its body does not stop
        proceed.open()
        #expect(try await caller.value == 7)
        #expect(committed.values == [7])
    }
}

/// The single-job fast way in (`add(_ job:)`: the job joins straight to ready under its own lock, then
/// becomes a member under the queue's) raced by cancels from another thread: a job finished between
/// the two steps must not become a member, or the queue would wait for it for ever.
@Suite(.timeLimit(.minutes(1))) struct FastPathRaceTests {
    @Test(arguments: 0..<3) func singleAddsRacingCancelsAllFinishAndTheQueueDrains(seed: Int) async throws {
        let queue = JobQueue(name: "fast", maxConcurrentJobs: 2)
        let finishes = Recorder<UInt64>()
        let jobs = (0..<2_000).map { index in
            let job = BlockJob(name: "job \(index)") {}
            job.onFinish { [id = job.id] _ in finishes.record(id) }
            return job
        }
        let all = jobs
        let canceller = Task.detached {
            for (index, job) in all.enumerated() where (index + seed) % 3 == 0 { job.cancel() }
        }
        for job in jobs { queue.add(job) }
        await canceller.value
        try await withDeadline(.seconds(30), "the queue draining", report: { queue.diagnose().description }) {
            await queue.waitUntilAllJobsAreFinished()
        }
        #expect(Set(finishes.values).count == jobs.count)
        #expect(queue.jobCount == 0)
    }
}
