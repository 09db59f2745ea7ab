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
}
