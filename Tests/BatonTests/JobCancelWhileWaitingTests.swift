import Baton
import BatonTesting
import Testing

/// Regression: cancelling a job that waits in a queue (for a dependency) must finish it at once, with
/// and without observers. Before the fix the finish was queued behind the cancel event but never
/// delivered, so the job stayed `finishing` and everyone awaiting it waited forever.
@Suite(.timeLimit(.minutes(1))) struct JobCancelWhileWaitingTests {
    @Test(arguments: [false, true])
    func aWaitingJobFinishesCancelledAtOnce(withObserver: Bool) async {
        let release = Gate()
        let blocker = AsyncJob { _ in await release.waitAsync() }
        let waiting = BlockJob {}
        waiting.addDependency(blocker)
        let events = Recorder<String>()
        if withObserver {
            waiting.addObserver(
                BlockObserver(
                    onCancel: { _, _ in events.record("cancel") },
                    onFinish: { _, outcome in events.record("finish \(outcome)") }))
        }
        let queue = JobQueue()
        queue.add([blocker, waiting])
        waiting.cancel()
        #expect(await waiting.outcome.isCancelled)
        #expect(waiting.isFinished)
        release.open()
        #expect(await blocker.outcome.didSucceed)
        #expect(events.values == (withObserver ? ["cancel", "finish cancelled(CancellationError())"] : []))
    }
}
