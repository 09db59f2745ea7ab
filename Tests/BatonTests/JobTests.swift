import Baton
import BatonTesting
import Testing

struct Boom: Error, Equatable {
    var tag = 0
}

/// A synchronous subclass: overrides one method.
final class CountingJob: Job, @unchecked Sendable {
    let runs: Recorder<String>
    init(name: String, runs: Recorder<String>) {
        self.runs = runs
        super.init(name: name)
    }
    override func execute() throws { runs.record(name) }
}

final class FailingJob: Job, @unchecked Sendable {
    override func execute() throws { throw Boom(tag: 7) }
}

@Suite(.timeLimit(.minutes(1))) struct JobTests {
    @Test func aSubclassRunsOnceAndSucceeds() async {
        let runs = Recorder<String>()
        let job = CountingJob(name: "count", runs: runs)
        #expect(job.state == .initialized)
        let queue = JobQueue(name: "q")
        queue.add(job)
        let outcome = await job.outcome
        #expect(outcome.didSucceed)
        #expect(runs.values == ["count"])
        #expect(job.state == .finished)
        #expect(job.isFinished)
        #expect(job.outcomeIfDecided?.didSucceed == true)
    }

    @Test func aThrowingBodyFailsWithItsError() async throws {
        let job = FailingJob(name: "fail")
        JobQueue().add(job)
        let outcome = await job.outcome
        let error = try #require(outcome.error as? Boom)
        #expect(error == Boom(tag: 7))
        #expect(outcome.didFail)
        #expect(throws: Boom.self) { try outcome.get() }
    }

    @Test func startByHandRunsOnTheCallersThread() throws {
        let thread = Recorder<UInt>()
        let job = BlockJob { thread.record(currentThreadID()) }
        try job.start()
        #expect(job.isFinished)
        #expect(thread.values == [currentThreadID()])
    }

    @Test func startByHandRefusesUnfinishedDependencies() throws {
        let first = BlockJob(name: "first") {}
        let second = BlockJob(name: "second") {}
        second.addDependency(first)
        let error = #expect(throws: JobError.self) { try second.start() }
        #expect(error?.code == .unfinishedDependencies)
        #expect(error?.jobs == ["first"])
        #expect(error?.message.contains("'first'") == true)
        try first.start()
        try second.start()
        #expect(second.outcomeIfDecided?.didSucceed == true)
    }

    @Test func startByHandRefusesQueuedStartedOrFinishedJobs() async throws {
        let done = BlockJob {}
        try done.start()
        #expect(throws: JobError.self) { try done.start() }
        let queue = JobQueue()
        queue.isSuspended = true
        let queued = BlockJob(name: "queued") {}
        queue.add(queued)
        let error = #expect(throws: JobError.self) { try queued.start() }
        #expect(error?.code == .notStartable)
        #expect(error?.message.contains("queue") == true)
        queue.isSuspended = false
        await queue.waitUntilAllJobsAreFinished()
    }

    @Test func startByHandOfACancelledJobFinishesCancelledWithoutRunning() throws {
        let ran = Recorder<Bool>()
        let job = BlockJob { ran.record(true) }
        job.cancel()
        try job.start()
        #expect(job.outcomeIfDecided?.isCancelled == true)
        #expect(ran.count == 0)
    }

    @Test func defaultNamesSayTypeAndID() {
        let job = BlockJob {}
        #expect(job.name == "BlockJob#\(job.id)")
        job.name = "renamed"
        #expect(job.name == "renamed")
        let other = BlockJob {}
        #expect(other.id > job.id)
    }

}

func currentThreadID() -> UInt {
    #if canImport(Glibc)
    return UInt(pthread_self())
    #else
    return UInt(bitPattern: pthread_self())
    #endif
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
