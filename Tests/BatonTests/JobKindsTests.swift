import Baton
import BatonTesting
import Dispatch
import Testing

@Suite(.timeLimit(.minutes(1))) struct BlockJobTests {
    @Test func severalBlocksRunConcurrently() async {
        // Each block waits until both are inside: only possible if they run at the same time. (Two,
        // because blocks run at most as many at once as the machine has cores.) The timeout is a
        // watchdog that turns a hang into a failure, not a wait for something to happen. The job runs
        // on a dedicated thread: a block waiting there never holds one of Swift concurrency's threads
        // (on Linux, Dispatch's global queue), which the other block and every other test need.
        let arrived = ConcurrencyGauge()
        let bothInside = Gate()
        let met = Recorder<Bool>()
        let job = BlockJob()
        for _ in 0..<2 {
            job.addExecutionBlock {
                if arrived.enter() == 2 { bothInside.open() }
                met.record(bothInside.wait(timeoutSeconds: 30))
            }
        }
        #expect(job.executionBlockCount == 2)
        JobQueue(workerThreads: .dedicated).add(job)
        #expect(await job.outcome.didSucceed)
        #expect(met.values == [true, true])
        #expect(job.executionBlockCount == 0)  // dropped after finishing
    }

    @Test func theFirstFailingBlockInAddOrderWins() async {
        let job = BlockJob { throw Boom(tag: 1) }
        job.addExecutionBlock {}
        job.addExecutionBlock { throw Boom(tag: 3) }
        JobQueue().add(job)
        #expect((await job.outcome.error as? Boom)?.tag == 1)
    }

    @Test func aJobWithoutBlocksSucceeds() async {
        let barrier = BlockJob(name: "barrier")
        JobQueue().add(barrier)
        #expect(await barrier.outcome.didSucceed)
    }

    @Test func queueAddClosureMakesABlockJob() async {
        let ran = Recorder<Int>()
        let queue = JobQueue()
        let job = queue.add(name: "closure") { ran.record(1) }
        #expect(job.name == "closure")
        await queue.waitUntilAllJobsAreFinished()
        #expect(ran.values == [1])
    }
}

@Suite(.timeLimit(.minutes(1))) struct AsyncJobTests {
    @Test func anAsyncBodyRunsAndItsErrorIsTheOutcome() async {
        let ok = AsyncJob { _ in await Task.yield() }
        let bad = AsyncJob { _ in throw Boom(tag: 2) }
        let queue = JobQueue()
        queue.add([ok, bad])
        #expect(await ok.outcome.didSucceed)
        #expect((await bad.outcome.error as? Boom)?.tag == 2)
    }

    @Test func cancellingTheJobCancelsTheBodysTask() async {
        let started = Gate()
        let job = AsyncJob { job in
            started.open()
            // Suspends until the task is cancelled; no sleeping.
            await withTaskCancellationHandler {
                await Gate().waitAsyncUnlessCancelled()
            } onCancel: {
            }
            #expect(Task.isCancelled)
            #expect(job.isCancelled)
            try Task.checkCancellation()
        }
        JobQueue().add(job)
        await started.waitAsync()
        job.cancel(reason: Boom(tag: 9))
        let outcome = await job.outcome
        guard case .cancelled(let reason) = outcome else {
            Issue.record("expected cancelled, got \(outcome)")
            return
        }
        #expect((reason as? Boom)?.tag == 9)
    }

    @Test func anAsyncJobHoldsItsSlotUntilTheBodyReturns() async {
        let queue = JobQueue(maxConcurrentJobs: 1)
        let release = Gate()
        let order = Recorder<String>()
        let first = AsyncJob { _ in
            order.record("first started")
            await release.waitAsync()
            order.record("first done")
        }
        let second = BlockJob { order.record("second") }
        first.onStart { _ in release.open() }
        queue.add([first, second])
        await queue.waitUntilAllJobsAreFinished()
        #expect(order.values == ["first started", "first done", "second"])
    }

    final class Subclass: AsyncJob, @unchecked Sendable {
        override func perform() async throws { throw Boom(tag: 5) }
    }

    @Test func subclassesOverridePerform() async {
        let job = Subclass(name: "sub")
        JobQueue().add(job)
        #expect((await job.outcome.error as? Boom)?.tag == 5)
    }
}

@Suite(.timeLimit(.minutes(1))) struct CallbackJobTests {
    /// A classic asynchronous subclass: finishes from a callback on another thread.
    final class Later: CallbackJob, @unchecked Sendable {
        override func execute() {
            DispatchQueue.global().async { self.finish() }
        }
    }

    @Test func finishesFromACallback() async {
        let job = Later(name: "later")
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
    }

    @Test func callbackJobWrapsACompletionHandlerAPI() async {
        @Sendable func legacy(fail: Bool, completion: @escaping @Sendable ((any Error)?) -> Void) {
            DispatchQueue.global().async { completion(fail ? Boom(tag: 4) : nil) }
        }
        let ok = CallbackJob { _, done in legacy(fail: false) { done($0) } }
        let bad = CallbackJob { _, done in legacy(fail: true) { done($0) } }
        let viaResult = CallbackJob { _, done in done(Result<Int, any Error>.success(1)) }
        JobQueue().add([ok, bad, viaResult])
        #expect(await ok.outcome.didSucceed)
        #expect((await bad.outcome.error as? Boom)?.tag == 4)
        #expect(await viaResult.outcome.didSucceed)
    }

    @Test func startedByHandItFinishesLater() async throws {
        let job = Later(name: "manual")
        try job.start()
        #expect(await job.outcome.didSucceed)
    }
}

extension Gate {
    /// Waits until opened or the task is cancelled (for bodies that must be interrupted).
    func waitAsyncUnlessCancelled() async {
        await withTaskCancellationHandler {
            await waitAsync()
        } onCancel: {
            open()
        }
    }
}
