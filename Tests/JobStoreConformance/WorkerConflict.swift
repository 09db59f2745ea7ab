import Baton
public import BatonDurable
import BatonTesting
import Foundation

extension JobStoreConformance {
    /// Through a ``DurableWorker`` on `store`: a job (the adder) adds a job that waits for another job of
    /// its run while that one runs. The store refuses the addition as a conflict of the moment
    /// (``DurableError/Code/conflict``): that attempt fails and is retried by the adder's policy, and
    /// the next attempt, once the other job's success is recorded, adds the job. Given `complete`, the
    /// adder completes through it, with the store's form of `complete(returning:writes:)` (the store
    /// refuses the addition in that transaction); otherwise by returning (the worker's report).
    ///
    /// Throws ``ConformanceFailure`` naming what differs; the caller bounds it with a deadline.
    public static func additionWaitingForARunningJob(
        on store: any JobStore,
        completingWith complete: (@Sendable (DurableJobContext, Int) async throws -> Int)? = nil
    ) async throws {
        var graph = JobGraph(name: "conflict")
        let holder = graph.add(ConflictHolder.self, input: 0, name: "holder")
        let adder = graph.add(
            ConflictingAdder.self, input: 0, name: "adder",
            retry: .constant(maxAttempts: 2, delay: .zero))
        let run = try await store.submit(graph)
        let gates = ConflictGates(holder: run[holder], complete: complete)
        let worker = try DurableWorker(
            store: store, jobs: [ConflictHolder(gates: gates), ConflictingAdder(gates: gates), ConflictMark()],
            configuration: .init(
                id: "conflict", pollInterval: .milliseconds(50), instruments: [ConflictRecorder(gates: gates)]))
        let counts = try await worker.run(until: run).counts
        let history = try await store.attempts(of: run[adder])
        try expectEqual(
            counts, [.succeeded: 3],
            "the holder, the adder on its second attempt, and what it added (the adder's attempts: \(history))")
        try expectEqual(history.map(\.result), [.ready, .succeeded], "a retried first attempt, then the success")
        try expect(history.first?.error?.contains("running now") == true, "why the first was retried: \(history)")
        let jobs = try await store.snapshot(of: run.id).jobs
        try expectEqual(jobs.map(\.name), ["holder", "adder", "after holder"], "added once")
        try expectEqual(jobs.last?.dependencies.map(\.job), [run[holder]], "it waited for the holder")
        try expectEqual(jobs.last?.addedBy, run[adder], "added by the adder")
    }
}

/// The gates of one run of ``JobStoreConformance/additionWaitingForARunningJob(on:completingWith:)``,
/// and what its jobs need to know.
private final class ConflictGates: Sendable {
    let holder: DurableJobID
    /// How the adder completes in its own transaction, if it does.
    let complete: (@Sendable (DurableJobContext, Int) async throws -> Int)?
    let holderStarted = Gate()
    /// Opened by ``ConflictRecorder`` once the adder's first attempt ended, however it ended: the holder
    /// then finishes, so that a run whose adder does not retry ends too, and fails the checks.
    let holderReleased = Gate()
    /// Opened by ``ConflictRecorder`` once the worker heard that the store recorded the holder's success.
    let holderRecorded = Gate()

    init(holder: DurableJobID, complete: (@Sendable (DurableJobContext, Int) async throws -> Int)?) {
        self.holder = holder
        self.complete = complete
    }
}

/// Runs until the adder's first attempt ended: that attempt adds a job waiting for it while it runs.
private struct ConflictHolder: DurableJob {
    static let kind = "conformance.conflict.holder"
    let gates: ConflictGates
    func run(_ input: Int, context: DurableJobContext) async throws -> Int {
        gates.holderStarted.open()
        await gates.holderReleased.waitAsync()
        return 0
    }
}

/// Adds a job after the holder: on its first attempt while the holder runs, on the next once the
/// holder's success is recorded.
private struct ConflictingAdder: DurableJob {
    static let kind = "conformance.conflict.adder"
    let gates: ConflictGates
    func run(_ input: Int, context: DurableJobContext) async throws -> Int {
        await (context.attempt == 1 ? gates.holderStarted : gates.holderRecorded).waitAsync()
        var more = JobGraph(name: "more")
        more.add(ConflictMark.self, input: 0, name: "after holder")
        try context.add(more, after: [gates.holder])
        if let complete = gates.complete { return try await complete(context, context.attempt) }
        return context.attempt
    }
}

private struct ConflictMark: DurableJob {
    static let kind = "conformance.conflict.mark"
    func run(_ input: Int, context: DurableJobContext) async throws -> Int { input }
}

/// Opens `holderReleased` when the worker hears how the adder's first attempt ended, and
/// `holderRecorded` when it hears that the holder's success was recorded.
private struct ConflictRecorder: JobInstrument, DurableWorkerInstrument {
    let gates: ConflictGates
    func attemptEnded(_ attempt: ClaimedJob, job: Job, end: DurableAttemptEnd, worker: DurableWorker) {
        if attempt.kind == ConflictingAdder.kind { gates.holderReleased.open() }
        if attempt.kind == ConflictHolder.kind, end == .succeeded { gates.holderRecorded.open() }
    }
}
