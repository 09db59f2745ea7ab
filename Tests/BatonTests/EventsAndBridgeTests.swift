import Baton
import BatonTesting
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1))) struct EventStreamTests {
    @Test func aJobsEventsArriveInOrderAndEnd() async {
        let job = AsyncJob(name: "j") { job in job.reportProgress(0.5) }
        let events = job.events()
        JobQueue().add(job)
        var seen: [String] = []
        for await event in events { seen.append(event.description) }
        #expect(seen == ["started", "progressed(0.5)", "finished(succeeded)"])
        #expect(job.progress == 1)
    }

    @Test func aQueuesEventsCoverEveryJob() async {
        let queue = JobQueue(name: "q")
        let events = queue.events()
        queue.add([BlockJob(name: "a") {}, BlockJob(name: "b") {}])
        var finished: Set<String> = []
        for await (job, event) in events {
            if case .finished = event { finished.insert(job.name) }
            if finished.count == 2 { break }
        }
        #expect(finished == ["a", "b"])
    }
}

/// Off Swift concurrency's pool (`.offThePool`): some of these wait synchronously for a Foundation
/// queue whose operation waits synchronously for a Baton job, and each wait holds a thread; on the
/// pool (one thread per core) the job itself then had none to run on until Dispatch added one.
@Suite(.timeLimit(.minutes(1)), .offThePool) struct FoundationBridgeTests {
    @Test func aBlockOperationCanBeADependencyOfAJob() async {
        let order = Recorder<String>()
        let operation = BlockOperation { order.record("operation") }
        let job = BlockJob(name: "job") { order.record("job") }
        job.addDependency(operation)
        JobQueue().add(job)
        let foundation = OperationQueue()
        foundation.addOperation(operation)
        #expect(await job.outcome.didSucceed)
        #expect(order.values == ["operation", "job"])
    }

    @Test func aJobCanRunOnAFoundationOperationQueue() {
        let ran = Recorder<String>()
        let job = AsyncJob(name: "async job") { _ in ran.record("job") }
        let operation = job.asOperation()
        let after = BlockOperation { ran.record("after") }
        after.addDependency(operation)
        let foundation = OperationQueue()
        foundation.addOperations([operation, after], waitUntilFinished: true)
        #expect(ran.values == ["job", "after"])
        #expect(job.outcomeIfDecided?.didSucceed == true)
        #expect(operation.startError == nil)
    }

    @Test func aWrappedOperationRunsAsAJobAndCancelsWithIt() async {
        let ran = Recorder<Bool>()
        let job = OperationJob(name: "wrapped", running: BlockOperation { ran.record(true) })
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
        #expect(ran.values == [true])

        let cancelled = OperationJob(name: "cancelled", running: BlockOperation {})
        let queue = JobQueue()
        queue.isSuspended = true
        queue.add(cancelled)
        cancelled.cancel()
        #expect(await cancelled.outcome.isCancelled)
    }

    @Test func aJobThatCannotStartReportsWhyThroughItsOperation() {
        let job = BlockJob(name: "blocked") {}
        job.addDependency(BlockJob(name: "never") {})
        let operation = job.asOperation()
        OperationQueue().addOperations([operation], waitUntilFinished: true)
        #expect(operation.startError?.code == .unfinishedDependencies)
    }
}
