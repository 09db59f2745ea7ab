import Baton
import BatonTesting
import Dispatch
import Testing

/// A second review of the core against its peers (NSOperation, PSOperations, ProcedureKit); each test
/// failed before its fix.
@Suite(.timeLimit(.minutes(2))) struct PeerSemanticsTests2 {
    struct Stop: Error {}

    // MARK: A job finished before its body runs

    @Test("a callback job finished by an observer of its start does not run its body")
    func finishedFromOnStartDoesNotRun() async throws {
        for cancelFirst in [false, true] {
            let ran = Protected(false)
            let job = CallbackJob(name: "finished early") { _, _ in ran.withLock { $0 = true } }
            job.onStart { job in
                if cancelFirst { job.cancel() }
                (job as! CallbackJob).finish(Stop())
            }
            JobQueue().add(job)
            try await withDeadline(.seconds(30), "the job finished by its start observer") {
                #expect(await job.outcome.isFailed)
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
}
