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

    /// A wait returns once the job's slot is given back: on a full bounded queue, `tryAdd` right after
    /// the wait is admitted and the queue counts nothing. (A synchronous body's finish was recorded by
    /// its worker loop after its waiters resumed: `tryAdd` was refused in 936 rounds of 1,000.)
    @Test(arguments: [JobQueue.WorkerThreads.shared, .dedicated])
    func aWaitReturnsOnceTheSlotIsGivenBack(threads: JobQueue.WorkerThreads) async throws {
        let queue = JobQueue(name: "bounded", maxConcurrentJobs: 1, workerThreads: threads, maxUnfinishedJobs: 1)
        let refused = Recorder<String>()
        let done = Gate()
        DispatchQueue(label: "waiter").async {  // blocks: a thread of its own
            for round in 0..<300 {
                let job = BlockJob(name: "a\(round)") {}
                queue.add(job)
                _ = job.waitUntilFinished()
                if queue.jobCount != 0 { refused.record("round \(round): jobCount \(queue.jobCount)") }
                let next = BlockJob(name: "b\(round)") {}
                if !queue.tryAdd(next) {
                    refused.record("round \(round): tryAdd refused")
                    queue.add(next)
                }
                _ = next.waitUntilFinished()
            }
            done.open()
        }
        try await withDeadline(.seconds(30), "300 rounds of wait and tryAdd") { await done.waitAsync() }
        #expect(refused.count == 0, "\(refused.count) problems, the first: \(refused.values.prefix(4))")
        // The same with `await outcome`.
        for round in 0..<300 {
            let job = BlockJob(name: "c\(round)") {}
            queue.add(job)
            _ = await job.outcome
            #expect(queue.jobCount == 0, "round \(round)")
            if queue.jobCount != 0 { break }
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
