import BatonTesting
import Dispatch
import Foundation
import Testing

@testable import Baton

/// Synchronous waits (`Job.waitUntilFinished()`, `JobQueue.waitUntilAllJobsAreFinished()`) block the
/// calling thread until what they wait for is done. Each test shows the waiter blocked — registered
/// with the job or queue while the work could not finish — before it lets the work finish.
@Suite(.timeLimit(.minutes(1))) struct WaitTests {
    @Test func waitUntilFinishedBlocksUntilTheJobFinished() async throws {
        let release = Gate()
        let job = AsyncJob(name: "held") { _ in await release.waitAsync() }
        JobQueue().add(job)
        let returned = Recorder<(finished: Bool, outcome: Bool)>()
        let waiter = Gate()
        DispatchQueue(label: "waiter").async {  // blocks: a thread of its own
            let outcome = job.waitUntilFinished()
            returned.record((job.isFinished, outcome.didSucceed))
            waiter.open()
        }
        // The waiter is blocked inside the job: registered, and not returned, while the job cannot finish.
        #expect(await eventually { job.withCore { $0.waiters.count } == 1 })
        #expect(returned.count == 0)
        release.open()
        try await withDeadline(.seconds(10), "the blocked waiter returning") { await waiter.waitAsync() }
        #expect(returned.values.map(\.finished) == [true])
        #expect(returned.values.map(\.outcome) == [true])
        #expect(waitAgain(job).didSucceed)  // again, after finishing: at once
    }

    /// A wait that waits when the job finishes returns once the job's slot is given back: on a full
    /// bounded queue, `tryAdd` right after it is admitted and the queue counts nothing. (A synchronous
    /// body's finish was recorded by its worker loop after its waiters resumed: `tryAdd` was refused in
    /// 936 rounds of 1,000.) A wait that begins after the finish returns at once, and the queue may count
    /// the job until that loop looks for work again (see `UsingBaton`).
    @Test(arguments: [JobQueue.WorkerThreads.shared, .dedicated])
    func aWaitReturnsOnceTheSlotIsGivenBack(threads: JobQueue.WorkerThreads) async throws {
        let queue = JobQueue(name: "bounded", maxConcurrentJobs: 1, workerThreads: threads, maxUnfinishedJobs: 1)
        for round in 0..<40 {
            let release = Gate()
            let job = BlockJob(name: "a\(round)") { release.wait() }
            queue.add(job)
            let seen = Recorder<(count: Int, admitted: Bool)>()
            let returned = Gate()
            let blocking = round.isMultiple(of: 2)
            if blocking {
                DispatchQueue(label: "waiter").async {  // blocks: a thread of its own
                    _ = job.waitUntilFinished()
                    seen.record((queue.jobCount, queue.tryAdd(BlockJob(name: "b\(round)") {})))
                    returned.open()
                }
            } else {
                Task {
                    _ = await job.outcome
                    seen.record((queue.jobCount, queue.tryAdd(BlockJob(name: "b\(round)") {})))
                    returned.open()
                }
            }
            // The waiter waits inside the job before the job can finish.
            #expect(await eventually { job.withCore { $0.waiters.count } == 1 })
            release.open()
            try await withDeadline(.seconds(10), "round \(round)'s waiter returning") { await returned.waitAsync() }
            let (count, admitted) = try #require(seen.values.first)
            #expect(count == 0, "round \(round) (\(blocking ? "waitUntilFinished" : "await outcome")): jobCount")
            #expect(admitted, "round \(round) (\(blocking ? "waitUntilFinished" : "await outcome")): tryAdd refused")
            if count != 0 || !admitted { break }
            await queue.waitUntilAllJobsAreFinished()
        }
    }

    @Test func waitUntilAllJobsAreFinishedBlocksUntilTheQueueDrains() async throws {
        let queue = JobQueue(name: "drain")
        let release = Gate()
        let job = AsyncJob(name: "held") { _ in await release.waitAsync() }
        queue.add(job)
        let returned = Recorder<Bool>()
        let waiter = Gate()
        DispatchQueue(label: "waiter").async {  // blocks: a thread of its own
            queue.waitUntilAllJobsAreFinished()
            returned.record(job.isFinished)
            waiter.open()
        }
        #expect(await eventually { queue.lock.withLock { queue.idleWaiters.count } == 1 })
        #expect(returned.count == 0)
        release.open()
        try await withDeadline(.seconds(10), "the blocked queue waiter returning") { await waiter.waitAsync() }
        #expect(returned.values == [true])
    }
}

/// `waitUntilFinished()` from a synchronous context, as its callers use it.
func waitAgain(_ job: Job) -> JobOutcome { job.waitUntilFinished() }

/// Sizes for tests that must be big to mean anything (nesting deep enough to overflow a recursive
/// implementation), smaller under ThreadSanitizer (`.ci/run` sets `BATON_SANITIZER=thread`), whose
/// bookkeeping makes them ten to twenty times slower.
enum TestSize {
    static let underSanitizer = ProcessInfo.processInfo.environment["BATON_SANITIZER"] != nil
    /// How deep groups nest in the deep-nesting tests: deep enough to overflow a recursive
    /// implementation on a Dispatch thread's 512 KiB stack either way.
    static let nesting = underSanitizer ? 8_000 : 20_000
    /// How long the never-run chains of the freeing tests are: a recursive release overflows the same
    /// stack far sooner (a release is several frames per job). 200,000 typed jobs made and freed took
    /// 165 s under ThreadSanitizer beside the rest of the suite, beyond the test's time limit.
    static let chain = underSanitizer ? 20_000 : 200_000
}
