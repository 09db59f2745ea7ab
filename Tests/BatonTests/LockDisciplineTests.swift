import Baton
import BatonTesting
import Testing

@testable import Baton

/// Baton's two locking rules, and the check that turns breaking them into a failure of every test
/// that takes the wrong path (instead of a hang one run in 256, when two jobs share a lock stripe).
@Suite(.timeLimit(.minutes(1))) struct LockDisciplineTests {
    /// Issue 9, item 7: finishing a job lets go of its dependencies after unlocking. A dependency that
    /// nothing else keeps (it was never queued) is freed then, and its `deinit` locks *its* dependency
    /// to let go of it — here a job on the same lock stripe as the finishing one, which hung when the
    /// list was dropped under the finishing job's lock.
    @Test func finishingAJobFreesANeverQueuedDependencyOutsideTheLock() async throws {
        let queue = JobQueue(name: "stripes")
        queue.isSuspended = true
        let finishing = BlockJob(name: "finishing") {}
        weak var freedDependency: Job?
        weak var freedInnermost: Job?
        do {
            var innermost = BlockJob(name: "innermost") {}
            while innermost.id % UInt64(LockStripes.count) != finishing.id % UInt64(LockStripes.count) {
                innermost = BlockJob(name: "innermost") {}
            }
            let dependency = BlockJob(name: "never queued") {}
            dependency.addDependency(innermost)  // only the dependency keeps it
            finishing.addDependency(dependency)  // only `finishing` keeps the dependency
            freedDependency = dependency
            freedInnermost = innermost
        }
        #expect(freedDependency != nil && freedInnermost != nil)
        queue.add(finishing)
        try await withDeadline(.seconds(10), "cancelling a job whose dependency's dependency shares its lock") {
            finishing.cancel()
            #expect(await finishing.outcome.isCancelled)
        }
        #expect(freedDependency == nil)
        #expect(freedInnermost == nil)
    }

    #if DEBUG
    @Test func releasingAJobUnderALockStopsWithAMessage() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let lock = Lock()
            var job: Job? = BlockJob(name: "released") {}
            lock.withLock { job = nil }
            _ = job
        }
        expect(result, toSay: "was released while a lock was held")
    }

    @Test func takingASecondLockStopsWithAMessage() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let job = BlockJob(name: "inner") {}
            Lock().withLock { _ = job.name }
        }
        expect(result, toSay: "a lock was taken while this thread already held one")
    }
    #endif
}
