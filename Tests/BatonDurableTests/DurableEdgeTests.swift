import Baton
import BatonTesting
import Foundation
import Testing

@testable import BatonDurable

/// A store that forwards to another, with hooks the tests set: a gate before completion-and-claim
/// calls, and a prune just before reads of a run's record.
final class HookedStore: JobStore {
    let base: SQLiteJobStore
    /// When set, `finish(_:thenClaim:…)` calls wait for it (and `finishEntered` opens first).
    let finishGate = Protected<Gate?>(nil)
    let finishEntered = Gate()
    /// The gated `finish(_:thenClaim:…)` calls waiting now, and the most at once; `secondFinishEntered`
    /// opens when two wait together.
    let finishesWaiting = Protected((now: 0, most: 0))
    let secondFinishEntered = Gate()
    /// When set, `record(of:)` prunes every finished run first (another worker's retention, say).
    let pruneBeforeRecord = Protected(false)
    /// When set, every report call fails — releases too (a store that takes nothing).
    let refuseAll = Protected(false)
    /// When set and true for a call's reports, `finish(_:thenClaim:…)` fails (a store that cannot take them).
    let refuse = Protected<(@Sendable ([AttemptReport]) -> Bool)?>(nil)
    /// Called with the reports of every `finish(_:thenClaim:…)` call that the base store took, and its results.
    let finished = Protected<(@Sendable ([AttemptReport], [FinishResult]) -> Void)?>(nil)

    /// When set, `renew` calls wait for it (and `renewEntered` opens first): renewals that get no answer.
    let renewGate = Protected<Gate?>(nil)
    let renewEntered = Gate()
    /// When set, `prune` calls wait for it (and `pruneEntered` opens first): a prune that takes long.
    let pruneGate = Protected<Gate?>(nil)
    let pruneEntered = Gate()
    /// Called at each renewal of some leases, before it reaches the base store.
    let onRenew = Protected<(@Sendable () -> Void)?>(nil)
    /// When set, `claim` calls claim nothing (a worker's claim loop finds no work).
    let claimNothing = Protected(false)
    /// When set, the next `claim` call takes it (it is cleared): it claims with `limit` instead of the
    /// worker's, and calls `after` once the base store has answered (a claim that took long to answer).
    let nextClaim = Protected<(limit: Int?, after: @Sendable () -> Void)?>(nil)
    /// When set, `release` calls fail until a finish-and-claim has claimed a job, and the first one after
    /// it fails too; `released` opens at the first that goes through.
    let failReleasesUntilAfterAClaim = Protected(false)
    private let releaseState = Protected((claimed: false, failedAfter: false))
    let released = Gate()

    init(_ base: SQLiteJobStore) { self.base = base }

    var clock: DurableClock { base.clock }
    var isClosed: Bool { base.isClosed }
    /// Two, as PostgreSQL's (the SQLite store underneath takes one at a time): the worker tests that use
    /// this store run with two report calls in flight.
    var reportCallsInFlight: Int { 2 }
    func submit(_ graph: GraphSpec, uniqueKey: String?) async throws -> SubmittedRun {
        try await base.submit(graph, uniqueKey: uniqueKey)
    }
    func claim(worker: String, kinds: [String], limit: Int, lease: Duration) async throws -> [ClaimedJob] {
        if claimNothing.withLock({ $0 }) { return [] }
        let hook = nextClaim.exchange(nil)
        let claimed = try await base.claim(worker: worker, kinds: kinds, limit: hook?.limit ?? limit, lease: lease)
        hook?.after()
        return claimed
    }
    func renew(_ leases: [Lease], worker: String, lease: Duration) async throws -> [LeaseStatus] {
        if !leases.isEmpty { onRenew.withLock { $0 }?() }
        if !leases.isEmpty, let gate = renewGate.withLock({ $0 }) {
            renewEntered.open()
            await gate.waitAsync()
        }
        return try await base.renew(leases, worker: worker, lease: lease)
    }
    func finish(_ reports: [AttemptReport]) async throws -> [FinishResult] {
        if refuseAll.withLock({ $0 }) {
            throw DurableError(code: .storeFailure, message: "the test store takes nothing")
        }
        if let refuse = refuse.withLock({ $0 }), refuse(reports) {
            throw DurableError(code: .storeFailure, message: "the test store refuses these reports")
        }
        return try await base.finish(reports)
    }
    /// Whether a release failed after a finish-and-claim had claimed a job (`failReleasesUntilAfterAClaim`).
    var failedAReleaseAfterAClaim: Bool { releaseState.withLock { $0.failedAfter } }
    func finish(
        _ reports: [AttemptReport], thenClaim limit: Int, worker: String, kinds: [String], lease: Duration
    ) async throws -> (results: [FinishResult], claimed: [ClaimedJob]) {
        if let gate = finishGate.withLock({ $0 }) {
            finishEntered.open()
            let waiting = finishesWaiting.withLock { state in
                state.now += 1
                state.most = max(state.most, state.now)
                return state.now
            }
            if waiting >= 2 { secondFinishEntered.open() }
            await gate.waitAsync()
            finishesWaiting.withLock { $0.now -= 1 }
        }
        if refuseAll.withLock({ $0 }) {
            throw DurableError(code: .storeFailure, message: "the test store takes nothing")
        }
        if let refuse = refuse.withLock({ $0 }), refuse(reports) {
            throw DurableError(code: .storeFailure, message: "the test store refuses these reports")
        }
        let result = try await base.finish(reports, thenClaim: limit, worker: worker, kinds: kinds, lease: lease)
        if !result.claimed.isEmpty { releaseState.withLock { $0.claimed = true } }
        finished.withLock { $0 }?(reports, result.results)
        return result
    }
    func release(_ leases: [Lease]) async throws {
        if refuseAll.withLock({ $0 }) {
            throw DurableError(code: .storeFailure, message: "the test store takes nothing")
        }
        let armed = failReleasesUntilAfterAClaim.withLock { $0 }
        let fail =
            armed
            && releaseState.withLock { state in
                if !state.claimed { return true }
                defer { state.failedAfter = true }
                return !state.failedAfter
            }
        if fail { throw DurableError(code: .storeFailure, message: "the test store fails this release") }
        try await base.release(leases)
        released.open()
    }
    func cancel(run: DurableRunID, reason: String) async throws { try await base.cancel(run: run, reason: reason) }
    func cancel(job: DurableJobID, reason: String) async throws { try await base.cancel(job: job, reason: reason) }
    func register(_ worker: WorkerRecord) async throws { try await base.register(worker) }
    func unregister(worker: String) async throws { try await base.unregister(worker: worker) }
    func snapshot(of run: DurableRunID) async throws -> RunSnapshot { try await base.snapshot(of: run) }
    func run(of job: DurableJobID) async throws -> DurableRunID { try await base.run(of: job) }
    func traceCarrier(of run: DurableRunID) async throws -> [String: String] { try await base.traceCarrier(of: run) }
    func record(of job: DurableJobID) async throws -> JobRecord { try await base.record(of: job) }
    func record(of run: DurableRunID) async throws -> RunRecord {
        if pruneBeforeRecord.withLock({ $0 }) { _ = try await base.prune(finishedBefore: .distantFuture) }
        return try await base.record(of: run)
    }
    /// When set, `nextDueDate` calls (a worker's poll) wait for it, and `dueEntered` opens first.
    let dueGate = Protected<Gate?>(nil)
    let dueEntered = Gate()
    func nextDueDate(kinds: [String]) async throws -> Date? {
        if let gate = dueGate.withLock({ $0 }) {
            dueEntered.open()
            await gate.waitAsync()
        }
        return try await base.nextDueDate(kinds: kinds)
    }
    func prune(finishedBefore date: Date) async throws -> Int {
        if let gate = pruneGate.withLock({ $0 }) {
            pruneEntered.open()
            await gate.waitAsync()
        }
        return try await base.prune(finishedBefore: date)
    }
    func runs(_ filter: RunFilter) async throws -> RunPage { try await base.runs(filter) }
    func runCounts() async throws -> [RunState: Int] { try await base.runCounts() }
    func attempts(of job: DurableJobID) async throws -> [AttemptRecord] { try await base.attempts(of: job) }
    func jobs(_ filter: JobFilter) async throws -> JobPage { try await base.jobs(filter) }
    func workers() async throws -> [WorkerSummary] { try await base.workers() }
    func payload(of job: DurableJobID) async throws -> JobPayload { try await base.payload(of: job) }
    func attempts(ofRun run: DurableRunID) async throws -> [DurableJobID: [AttemptRecord]] {
        try await base.attempts(ofRun: run)
    }
    func retry(job: DurableJobID) async throws -> Int { try await base.retry(job: job) }
    func retry(run: DurableRunID) async throws -> Int { try await base.retry(run: run) }
    func delete(run: DurableRunID) async throws { try await base.delete(run: run) }
    func schedule(_ schedule: Schedule) async throws -> ScheduleRecord { try await base.schedule(schedule) }
    func schedules() async throws -> [ScheduleRecord] { try await base.schedules() }
    func scheduleListing() async throws -> ScheduleListing { try await base.scheduleListing() }
    func setSchedule(named name: String, paused: Bool) async throws {
        try await base.setSchedule(named: name, paused: paused)
    }
    func removeSchedule(named name: String) async throws { try await base.removeSchedule(named: name) }
    func fireDueSchedules() async throws -> FiredSchedules { try await base.fireDueSchedules() }
    func wakeups() -> AsyncStream<Void> { base.wakeups() }
}

/// Returns its input once the gate named by it opens.
struct WaitsForGate: DurableJob {
    static let kind = "test.waits-for-gate"
    let gates: [String: Gate]
    func run(_ label: String, context: DurableJobContext) async throws -> String {
        await gates[label]?.waitAsync()
        return label
    }
}

/// Returns its input at once.
struct Echo: DurableJob {
    static let kind = "test.echo"
    func run(_ input: String, context: DurableJobContext) async throws -> String { input }
}

@Suite("DurableWorker and store edge cases")
struct DurableEdgeTests {
    @Test("a shutdown() called before run() begins is obeyed: run() returns instead of running on")
    func shutdownBeforeRun() async throws {
        let store = try SQLiteJobStore.inMemory()
        let worker = try makeWorker(store, [Echo()])
        worker.shutdown()
        try await withDeadline(.seconds(30), "run() after shutdown()") { try await worker.run() }
        // The next run() starts afresh and runs until told to stop again.
        var graph = JobGraph(name: "g")
        let echo = graph.add(Echo.self, input: "again")
        let run = try await store.submit(graph)
        try await withDeadline(.seconds(30), "run(until:) on a worker that was shut down before") {
            try await worker.run(until: run)
        }
        #expect(try await store.output(of: echo, in: run) == "again")
    }

    /// A probe (7 December 2026): the retention's prune ran inside the renewal round, and a prune of
    /// 80,000 runs (38 s) held every renewal of the worker: its running jobs were stopped as their leases
    /// ran out, and failed.
    @Test("a worker's retention prune does not hold back its lease renewals")
    func pruneBesideRenewals() async throws {
        let base = try SQLiteJobStore.inMemory()
        let store = HookedStore(base)
        let started = Gate()
        let endings = Protected<[String]>([])
        var graph = JobGraph(name: "g")
        graph.add(Blocker.self, input: "b")
        let run = try await store.submit(graph)
        let worker = try DurableWorker(
            store: store, jobs: [Blocker(started: started, endings: endings)],
            configuration: .init(
                // A lease far longer than the renewals' interval: a loaded machine (a CI run) delays renewals,
                // and a lease of 3 s ran out there without the prune being in the way.
                id: "w", leaseDuration: .seconds(60), renewInterval: .milliseconds(500),
                pollInterval: .milliseconds(200), shutdownGracePeriod: .zero, retention: .seconds(60)))
        let hold = Gate()
        store.pruneGate.withLock { $0 = hold }
        let renewals = Protected(0)
        let renewedTwiceMore = Gate()
        let running = Task { try await worker.run() }
        try await withDeadline(.seconds(30), "the job's start and the worker's first prune") {
            await started.waitAsync()
            await store.pruneEntered.waitAsync()
        }
        store.onRenew.withLock {
            $0 = {
                if renewals.withLock({ count in
                    count += 1
                    return count
                }) == 2 {
                    renewedTwiceMore.open()
                }
            }
        }
        // The prune still waits: two renewals more come all the same (at 0.5 s each). Before, the round of
        // renewals waited for the prune: none came.
        try await withDeadline(.seconds(30), "two lease renewals while the prune is under way") {
            await renewedTwiceMore.waitAsync()
        }
        #expect(endings.current.isEmpty, "the job runs on: \(endings.current)")
        hold.open()
        try await store.cancel(run: run.id, reason: "done")
        worker.shutdown()
        try await withDeadline(.seconds(30), "the worker's stop") { try await running.value }
    }

    /// A probe (7 December 2026): a store that refused every report (a table dropped) was asked again at
    /// each poll for ever, and `shutdown()` never returned (`run()` waited for the reports to go).
    @Test("a graceful shutdown whose reports the store refuses stops all the same, giving them up")
    func shutdownGivesUpRefusedReports() async throws {
        let base = try SQLiteJobStore.inMemory()
        let store = HookedStore(base)
        let refusals = Protected(0)
        let refusedTwice = Gate()
        store.refuse.withLock {
            $0 = { _ in
                if refusals.withLock({ count in
                    count += 1
                    return count
                }) == 2 {
                    refusedTwice.open()
                }
                return true
            }
        }
        var graph = JobGraph(name: "g")
        let echo = graph.add(Echo.self, input: "x")
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Echo()], grace: .zero)
        let running = Task { try await worker.run() }
        try await withDeadline(.seconds(30), "two refused reports") { await refusedTwice.waitAsync() }
        worker.shutdown()
        try await withDeadline(.seconds(30), "the shutdown of a worker whose store refuses its reports") {
            try await running.value
        }
        // Not recorded: its job runs again once its lease ends, as a killed worker's would.
        #expect(try await base.record(of: run[echo]).state == .running)
        // Retried less and less often: a few refusals in the seconds the shutdown waited, not one a poll.
        #expect(refusals.current < 12, "\(refusals.current) refusals")
    }

    /// The review of that change: a body that stopped after the moment the reports were given up queued
    /// its report then, and a store that refused it held the worker for ever again.
    @Test("a body that stops after the reports were given up does not hold the shutdown either")
    func bodyStoppingAfterTheGiveUp() async throws {
        let base = try SQLiteJobStore.inMemory()
        let store = HookedStore(base)
        let started = Gate()
        var graph = JobGraph(name: "g")
        graph.add(SlowToStop.self, input: 6_500)
        _ = try await store.submit(graph)
        let worker = try makeWorker(store, [SlowToStop(started: started)], grace: .zero)
        let running = Task { try await worker.run() }
        try await withDeadline(.seconds(30), "the job's start") { await started.waitAsync() }
        store.refuseAll.withLock { $0 = true }
        worker.shutdown()
        // Reports given up 5 s after the deadline; the body stops 6.5 s after it, and its release is refused.
        try await withDeadline(.seconds(30), "the shutdown of a worker whose body stops late") {
            try await running.value
        }
    }

    @Test("run(until:) returns when its run is pruned before the worker sees it finish")
    func runPrunedBeforeSeenFinished() async throws {
        let base = try SQLiteJobStore.inMemory()
        let store = HookedStore(base)
        var graph = JobGraph(name: "g")
        graph.add(Echo.self, input: "x")
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Echo()])
        // Every read of the run's record finds it pruned once it has finished.
        store.pruneBeforeRecord.withLock { $0 = true }
        let running = Task { try await worker.run(until: run) }
        await #expect {
            try await withDeadline(.seconds(30), "run(until:) of a pruned run") { _ = try await running.value }
        } throws: { error in
            guard let error = error as? DurableError else { return false }
            return error.code == .unknownRun || error.message.contains("pruned")
        }
    }

    @Test(
        "an immediate shutdown while a completion-and-claim is under way: the jobs it claims are given back, unattempted, and run() returns"
    )
    func shutdownDuringClaim() async throws {
        let base = try SQLiteJobStore.inMemory()
        let store = HookedStore(base)
        let started = Gate()
        let endings = Protected<[String]>([])
        var graph = JobGraph(name: "chain")
        let first = graph.add(Echo.self, input: "first")
        let second = graph.add(Blocker.self, input: "second", after: [first])
        let run = try await store.submit(graph)
        let gate = Gate()
        store.finishGate.withLock { $0 = gate }
        let began = Gate()
        let worker = try makeWorker(
            store, [Echo(), Blocker(started: started, endings: endings)],
            hooks: .init(shutdownBegan: { began.open() }))
        let running = Task { try await worker.run() }
        defer { gate.open() }
        // The first job's report and the claim of the second are held at the store.
        try await withDeadline(.seconds(30), "the report of the first job") { await store.finishEntered.waitAsync() }
        running.cancel()  // an immediate shutdown
        // The shutdown begins while the call is held.
        try await withDeadline(.seconds(30), "the shutdown beginning") { await began.waitAsync() }
        gate.open()
        try await withDeadline(.seconds(30), "the worker stopping") { try await running.value }
        let record = try await base.record(of: run[second])
        #expect(record.state == .ready, "the second job was claimed and not given back: \(record.state)")
        #expect(record.attempts == 0)
        #expect(try await base.record(of: run[first]).state == .succeeded)
    }

    @Test(
        "attempts that end while a report call waits at the store go in a second call instead of waiting for it"
    )
    func secondReportWhileTheFirstWaits() async throws {
        let base = try SQLiteJobStore.inMemory()
        let store = HookedStore(base)
        let gates = ["a": Gate(), "b": Gate()]
        var graph = JobGraph(name: "two")
        graph.add(WaitsForGate.self, input: "a", name: "a")
        graph.add(WaitsForGate.self, input: "b", name: "b")
        let run = try await store.submit(graph)
        let held = Gate()
        store.finishGate.withLock { $0 = held }
        let worker = try makeWorker(store, [WaitsForGate(gates: gates)])
        let running = Task { try await worker.run(until: run) }
        defer {
            held.open()
            for gate in gates.values { gate.open() }
            running.cancel()
        }
        gates["a"]!.open()
        try await withDeadline(.seconds(30), "the report of 'a' reaching the store") {
            await store.finishEntered.waitAsync()
        }
        gates["b"]!.open()
        try await withDeadline(.seconds(30), "the report of 'b' reaching the store while that of 'a' waits there") {
            await store.secondFinishEntered.waitAsync()
        }
        held.open()
        try await withDeadline(.seconds(30), "the run finishing") { _ = try await running.value }
        #expect(store.finishesWaiting.current.most == 2)
        #expect(try await base.explain(run: run.id).counts == [.succeeded: 2])
    }

    @Test("a configuration that cannot work is refused with a message naming the setting")
    func configurationIsValidated() throws {
        let store = try SQLiteJobStore.inMemory()
        for (configuration, setting) in [
            (DurableWorker.Configuration(renewInterval: .zero), "renewInterval"),
            (DurableWorker.Configuration(pollInterval: .zero), "pollInterval"),
            (DurableWorker.Configuration(maxConcurrentJobs: 0), "maxConcurrentJobs"),
            (DurableWorker.Configuration(leaseDuration: .seconds(-1)), "leaseDuration"),
            (DurableWorker.Configuration(retention: .seconds(-5)), "retention"),
            // Beyond what a sleep can count: the worker trapped in its first wait.
            (DurableWorker.Configuration(pollInterval: .seconds(Int64.max)), "pollInterval"),
            (DurableWorker.Configuration(leaseDuration: .seconds(Int64.max)), "leaseDuration"),
            (DurableWorker.Configuration(shutdownGracePeriod: .seconds(Int64.max)), "shutdownGracePeriod"),
            (DurableWorker.Configuration(retention: .seconds(Int64.max)), "retention"),
        ] {
            #expect {
                _ = try DurableWorker(store: store, jobs: [Echo()], configuration: configuration)
            } throws: { error in
                guard let error = error as? DurableError else { return false }
                return error.code == .invalidConfiguration && error.message.contains(setting)
            }
        }
        _ = try DurableWorker(store: store, jobs: [Echo()], configuration: .init())
    }

    /// `timeout: .seconds(Int64.max)` (meant as "no limit") was stored, and every worker that claimed the
    /// job trapped in its sleep ("Not enough bits to represent the passed value"): the lease ran out,
    /// the next worker claimed it and died too. Refused at submission, as other numbers are.
    @Test("a timeout or a retry wait beyond 100 years is refused at submission, saying which job")
    func durationsBeyondAClocksReachAreRefused() async throws {
        let store = try SQLiteJobStore.inMemory()
        for (retry, timeout, words) in [
            (RetryPolicy.never, Duration.seconds(Int64.max), "job 'a' has a timeout of"),
            (
                RetryPolicy.constant(maxAttempts: 2, delay: .seconds(Int64.max)), nil,
                "job 'a' has a retry policy that waits"
            ),
            (
                RetryPolicy.exponential(maxAttempts: 2, maximum: .seconds(Int64.max)), nil,
                "job 'a' has a retry policy that waits"
            ),
        ] as [(RetryPolicy, Duration?, String)] {
            var graph = JobGraph(name: "g")
            graph.add(Echo.self, input: "a", name: "a", retry: retry, timeout: timeout)
            let error = await #expect(throws: DurableError.self) { _ = try await store.submit(graph) }
            #expect(error?.code == .invalidGraph)
            #expect(error?.message.contains(words) == true, "\(String(describing: error))")
        }
        var fine = JobGraph(name: "g")
        fine.add(
            Echo.self, input: "a", name: "a", retry: .constant(maxAttempts: 2, delay: .seconds(36_500 * 86_400)),
            timeout: .seconds(36_500 * 86_400))
        _ = try await store.submit(fine)
    }

    @Test("a category limit or an attempt count below 1 is refused at submission, saying which job, not raised to 1")
    func limitsBelowOneAreRefused() async throws {
        let store = try SQLiteJobStore.inMemory()
        var zeroLimit = JobGraph(name: "g")
        zeroLimit.add(Echo.self, input: "a", name: "a", categories: [.named("db", limit: 0)])
        let limit = await #expect(throws: DurableError.self) { _ = try await store.submit(zeroLimit) }
        #expect(limit?.message.contains("job 'a' names category") == true)
        var noAttempts = JobGraph(name: "g")
        noAttempts.add(Echo.self, input: "a", name: "a", retry: .immediate(maxAttempts: 0))
        let attempts = await #expect(throws: DurableError.self) { _ = try await store.submit(noAttempts) }
        #expect(attempts?.message.contains("job 'a' allows 0 attempts") == true)
        #expect(try await store.claim(worker: "w", kinds: [Echo.kind], limit: 9, lease: .seconds(9)).isEmpty)
    }

    @Test(
        "a unique key held by a run of another shape (job count, or a job's name or kind) is refused; one of the same shape returns the run"
    )
    func uniqueKeyOfAnotherShape() async throws {
        let store = try SQLiteJobStore.inMemory()
        var one = JobGraph(name: "one")
        one.add(Echo.self, input: "a")
        let first = try await store.submit(one, uniqueKey: "k")
        #expect(
            try await store.submit(one, uniqueKey: "k")
                == DurableRun(
                    SubmittedRun(run: first.id, jobs: first.jobs, existing: true)))
        var two = JobGraph(name: "two")
        two.add(Echo.self, input: "a", name: "a")
        let b = two.add(Echo.self, input: "b", name: "b")
        await #expect {
            _ = try await store.submit(two, uniqueKey: "k")
        } throws: { error in
            (error as? DurableError)?.code == .uniqueKeyConflict
        }
        // A handle of another graph is an error, not a crash.
        await #expect {
            _ = try await store.output(of: b, in: first)
        } throws: { error in
            (error as? DurableError)?.code == .unknownJob
        }
        // As many jobs, named otherwise: another shape too.
        var renamed = JobGraph(name: "renamed")
        renamed.add(Echo.self, input: "a", name: "other")
        let error = await #expect(throws: DurableError.self) { _ = try await store.submit(renamed, uniqueKey: "k") }
        #expect(error?.code == .uniqueKeyConflict)
        #expect(error?.message.contains("whose job 0 is '\(Echo.kind)'") == true)
    }

    @Test("identities are never given twice, even after pruning deleted the newest runs")
    func identitiesAfterPrune() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "g")
        graph.add(Echo.self, input: "x")
        let first = try await store.submit(graph)
        let worker = try makeWorker(store, [Echo()])
        try await withDeadline(.seconds(30), "the first run") { try await worker.run(until: first) }
        #expect(try await store.prune(finishedBefore: .distantFuture) == 1)
        let second = try await store.submit(graph)
        #expect(second.id != first.id)
        #expect(Set(second.jobs).isDisjoint(with: first.jobs))
        #expect(second.id.rawValue > first.id.rawValue)
    }

    @Test("a store that cannot be opened says why: a missing directory is not called a damaged database")
    func openErrors() throws {
        let missing = FileManager.default.temporaryDirectory
            .appendingPathComponent("baton-missing-\(UUID().uuidString)/store.sqlite").path
        #expect {
            _ = try SQLiteJobStore(path: missing)
        } throws: { error in
            guard let error = error as? DurableError else { return false }
            return error.code == .storeFailure && error.message.contains("directory exists")
        }
        let garbage = FileManager.default.temporaryDirectory
            .appendingPathComponent("baton-garbage-\(UUID().uuidString).sqlite")
        try Data(repeating: 0x5a, count: 8192).write(to: garbage)
        defer { try? FileManager.default.removeItem(at: garbage) }
        #expect {
            _ = try SQLiteJobStore(path: garbage.path)
        } throws: { error in
            (error as? DurableError)?.code == .notAStore
        }
    }

    @Test("a retry policy or a date that no store can keep is refused before anything is written")
    func unkeepableValues() async throws {
        let store = try SQLiteJobStore.inMemory()
        for retry in [
            RetryPolicy.exponential(maxAttempts: 3, multiplier: .nan),
            .exponential(maxAttempts: 3, multiplier: .infinity),
            .exponential(maxAttempts: 3, jitter: 2),
        ] {
            var graph = JobGraph(name: "g")
            graph.add(Echo.self, input: "x", retry: retry)
            await #expect {
                _ = try await store.submit(graph)
            } throws: { error in
                (error as? DurableError)?.code == .invalidGraph
            }
        }
    }

    /// Describing a NaN date traps in FoundationEssentials: the check that refused it put the date in its
    /// message and stopped the program instead. And `prune(finishedBefore: NaN)` deleted every finished
    /// run on PostgreSQL (NaN sorts above every number there) and none on SQLite.
    @Test(
        "a start date that is no point in time, or a negative retry wait, is refused saying which job; so is pruning before one"
    )
    func datesAndWaitsThatAreNoTime() async throws {
        let store = try SQLiteJobStore.inMemory()
        for seconds in [Double.nan, .infinity, -.infinity] {
            var graph = JobGraph(name: "g")
            graph.add(Echo.self, input: "x", name: "a", notBefore: Date(timeIntervalSince1970: seconds))
            let error = await #expect(throws: DurableError.self) { _ = try await store.submit(graph) }
            #expect(error?.code == .invalidGraph)
            #expect(
                error?.message.contains("job 'a' has a notBefore of \(seconds) seconds") == true,
                "\(String(describing: error))")
        }
        for retry in [
            RetryPolicy.constant(maxAttempts: 3, delay: .seconds(-100)),
            .exponential(maxAttempts: 3, initial: .seconds(-5), maximum: .seconds(10)),
            .exponential(maxAttempts: 3, initial: .seconds(1), maximum: .seconds(-1)),
        ] {
            var graph = JobGraph(name: "g")
            graph.add(Echo.self, input: "x", name: "a", retry: retry)
            let error = await #expect(throws: DurableError.self) { _ = try await store.submit(graph) }
            #expect(error?.code == .invalidGraph)
            #expect(error?.message.contains("a wait cannot be negative") == true, "\(String(describing: error))")
        }
        var zero = JobGraph(name: "g")
        zero.add(Echo.self, input: "x", name: "a", retry: .constant(maxAttempts: 3, delay: .zero))
        _ = try await store.submit(zero)
        let error = await #expect(throws: DurableError.self) {
            _ = try await store.prune(finishedBefore: Date(timeIntervalSince1970: .nan))
        }
        #expect(error?.code == .misuse)
        #expect(error?.message.contains("prune(finishedBefore:)") == true, "\(String(describing: error))")
    }

    @Test("dates in inputs and outputs come back exactly; those stored as ISO 8601 text still read")
    func datesRoundTrip() throws {
        let date = Date(timeIntervalSinceReferenceDate: 817_000_000.123_456_7)
        let data = try DurableCoding.encode([date])
        #expect(try DurableCoding.decode([Date].self, from: data, what: "output", job: "j", kind: "k") == [date])
        let old = Data(#"["2026-11-26T10:00:00Z","2026-11-26T10:00:00.250Z"]"#.utf8)
        let read = try DurableCoding.decode([Date].self, from: old, what: "output", job: "j", kind: "k")
        #expect(read.map(\.timeIntervalSince1970) == [1_795_687_200, 1_795_687_200.25])
    }

    @Test(
        "a report the store refuses holds up only its own job: the others sent with it are sent again without it, and stored"
    )
    func poisonedReportDoesNotWedgeItsBatch() async throws {
        let base = try SQLiteJobStore.inMemory()
        let store = HookedStore(base)
        var graph = JobGraph(name: "g")
        let healthy = graph.add(Echo.self, input: "fine")
        let poisoned = graph.add(Poisoned.self, input: "x", retry: .never)
        let run = try await store.submit(graph)
        // Refused: every call with the poisoned job's report, and every call before the first that carries
        // it with another report (so that the two are sent together at least once).
        let together = Protected(false)
        store.refuse.withLock {
            $0 = { reports in
                let poison = reports.contains { report in
                    if case .failed(let message, _) = report.outcome { return message.contains("poison") }
                    return false
                }
                let sawTogether = together.withLock { seen in
                    if poison && reports.count > 1 { seen = true }
                    return seen
                }
                return poison || !sawTogether
            }
        }
        let stored = Gate()
        let poisonStored = Gate()
        let (healthyJob, poisonedJob) = (run[healthy], run[poisoned])
        store.finished.withLock {
            $0 = { reports, results in
                for (report, result) in zip(reports, results) where result != .rejected {
                    if report.lease.job == healthyJob { stored.open() }
                    if report.lease.job == poisonedJob { poisonStored.open() }
                }
            }
        }
        let worker = try makeWorker(store, [Echo(), Poisoned()])
        let running = Task { try await worker.run() }
        defer { running.cancel() }
        try await withDeadline(.seconds(30), "the healthy job's report stored while the poisoned one is refused") {
            await stored.waitAsync()
        }
        #expect(together.withLock { $0 }, "the two reports were sent together")
        #expect(try await base.record(of: run[poisoned]).state == .running, "the poisoned report is still refused")
        // The store takes it once it can.
        store.refuse.withLock { $0 = nil }
        try await withDeadline(.seconds(30), "the poisoned report stored once the store takes it") {
            await poisonStored.waitAsync()
        }
        #expect(try await base.record(of: run[poisoned]).lastError == "poison")
        running.cancel()
        try await withDeadline(.seconds(30), "the worker stopping") { try await running.value }
    }
}

/// A job type whose kind holds a NUL character: every claim names the worker's kinds, and PostgreSQL
/// refused each one (the worker claimed nothing, for any kind).
struct NulKind: DurableJob {
    static let kind = "test.nul\0kind"
    func run(_ input: String, context: DurableJobContext) async throws -> String { input }
}

@Suite("Worker kinds")
struct WorkerKindTests {
    @Test("a job type whose kind holds a NUL character is refused when the worker is made, naming it")
    func nulKindIsRefused() throws {
        let store = try SQLiteJobStore.inMemory()
        let error = #expect(throws: DurableError.self) {
            _ = try DurableWorker(store: store, jobs: [Echo(), NulKind()], configuration: .init(id: "w"))
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("'test.nul\\0kind'") == true, "\(error?.message ?? "")")
    }
}

/// Fails with an error whose description the hooked store refuses.
struct Poisoned: DurableJob {
    static let kind = "test.poisoned"
    struct Failure: Error, CustomStringConvertible {
        var description: String { "poison" }
    }
    func run(_ input: String, context: DurableJobContext) async throws -> String { throw Failure() }
}

@Suite("Durable coding messages")
struct DurableCodingTests {
    struct Counted: Codable { var n: Int }

    @Test(
        "a stored value that does not decode is described in plain words, once punctuated; bytes that are not JSON are said to be so"
    )
    func decodingMessages() {
        func message(_ bytes: String) -> String {
            do {
                _ = try DurableCoding.decode(Counted.self, from: Data(bytes.utf8), what: "input", job: "j", kind: "k")
                return ""
            } catch {
                return error.message
            }
        }
        let wrongType = message(#"{"n":"seven"}"#)
        #expect(wrongType.contains("'n' is not a whole number"), "\(wrongType)")
        #expect(wrongType.contains("different version"), "\(wrongType)")
        let notJSON = message("seven")
        #expect(notJSON.contains("not valid JSON"), "\(notJSON)")
        #expect(notJSON.contains("not stored as JSON"), "\(notJSON)")
        #expect(!notJSON.contains("different version"), "\(notJSON)")
        let missing = message("{}")
        #expect(missing.contains("field 'n' is missing"), "\(missing)")
        for text in [wrongType, notJSON, missing] { #expect(!text.contains(".."), "\(text)") }
    }
}

@Suite("DurableWorker: waits without spinning")
struct DurableWorkerWaitTests {
    @Test("a refused report waits for its retry without waking the worker again and again")
    func refusedReportWaitsQuietly() async throws {
        let base = try SQLiteJobStore.inMemory()
        let store = HookedStore(base)
        var graph = JobGraph(name: "g")
        let echo = graph.add(Echo.self, input: "x")
        let run = try await store.submit(graph)
        let refusals = Protected(0)
        store.refuse.withLock {
            $0 = { _ in
                refusals.withLock { count in
                    count += 1
                    return count == 1
                }
            }
        }
        let stored = Gate()
        store.finished.withLock { $0 = { _, results in if results.contains(.accepted(.succeeded)) { stored.open() } } }
        // Before the fix the owner re-armed a timer for the report's 1 ms batching delay, already past,
        // and woke at once until the retry: thousands of decisions within one poll interval.
        let decisions = Protected(0)
        var hooks = DurableWorker.Hooks()
        hooks.decided = { decisions.withLock { $0 += 1 } }
        let worker = try DurableWorker(
            store: store, jobs: [Echo()],
            configuration: .init(
                id: "quiet", maxConcurrentJobs: 4, leaseDuration: .seconds(8), renewInterval: .seconds(2),
                pollInterval: .seconds(1)),
            hooks: hooks)
        let running = Task { try await worker.run() }
        defer { running.cancel() }
        try await withDeadline(.seconds(30), "the report stored after one refusal") { await stored.waitAsync() }
        #expect(refusals.withLock { $0 } >= 2)
        #expect(try await base.record(of: run[echo]).state == .succeeded)
        // A few dozen decisions at most: the claim, the attempt's end, the refused report, its retry.
        #expect(decisions.withLock { $0 } < 200, "the owner decided \(decisions.withLock { $0 }) times")
        running.cancel()
        try await withDeadline(.seconds(30), "the worker stopping") { try await running.value }
    }

    /// A worker idle past its stall-warning delay while a poll was slow to answer (a loaded machine)
    /// armed a timer for the stall check, already due, at every wake-up until the poll answered: a spin
    /// (and, in debug builds, the owner's assertion stopped the program).
    @Test("an idle worker whose poll is slow to answer waits for it without spinning")
    func slowPollDoesNotSpin() async throws {
        let base = try SQLiteJobStore.inMemory()
        let store = HookedStore(base)
        var graph = JobGraph(name: "g")
        graph.add(NoWorkerHere.self, input: "nobody runs this")
        let run = try await base.submit(graph)
        let gate = Gate()
        defer { gate.open() }
        store.dueGate.withLock { $0 = gate }
        let decisions = Protected(0)
        var hooks = DurableWorker.Hooks()
        hooks.decided = { decisions.withLock { $0 += 1 } }
        var configuration = DurableWorker.Configuration(id: "idle", pollInterval: .milliseconds(50))
        configuration.stallWarningDelay = .milliseconds(50)
        let worker = try DurableWorker(store: store, jobs: [Echo()], configuration: configuration, hooks: hooks)
        let running = Task { try await worker.run(until: run) }
        defer { running.cancel() }
        try await withDeadline(.seconds(30), "the poll") { await store.dueEntered.waitAsync() }
        let before = decisions.withLock { $0 }
        try await Task.sleep(for: .milliseconds(500))  // the stall check falls due while the poll waits
        let during = decisions.withLock { $0 } - before
        gate.open()
        #expect(during < 50, "the owner decided \(during) times while its poll waited")
        running.cancel()
        try await withDeadline(.seconds(30), "the worker stopping") { _ = try? await running.value }
    }
}

/// A value of a type the store never writes (a store edited by hand, by another program) stopped
/// `baton` and every reader with GRDB's `try!` (signal 4): every read now throws a `DurableError`
/// that names the column and the value, and says what to do.
@Suite("SQLiteJobStore: values it never writes")
struct ForeignValueTests {
    @Test(
        "every read throws a DurableError naming the column",
        arguments: [
            ("UPDATE baton_runs SET created = 'yesterday'", "created"),
            ("UPDATE baton_jobs SET attempts = 'x'", "attempts"),
            ("UPDATE baton_jobs SET last_error = x'ff00fe'", "last_error"),
        ])
    func everyReadThrows(_ update: String, _ column: String) async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("jobs.sqlite")
        let store = try SQLiteJobStore(path: path)
        defer { try? store.close() }
        var graph = JobGraph(name: "tampered")
        let first = graph.add(FetchFeed.self, input: "a")
        graph.add(FetchFeed.self, input: "b", after: [first])
        let run = try await store.submit(graph)
        try await store.writer.write { db in try db.execute(sql: update) }
        let reads: [(String, () async throws -> Void)] = [
            ("snapshot", { _ = try await store.snapshot(of: run.id) }),
            ("explain", { _ = try await store.explain(run: run.id) }),
            ("runs", { _ = try await store.runs(RunFilter()) }),
        ]
        var failed = 0
        for (name, read) in reads {
            do {
                try await read()
            } catch let error as DurableError {
                failed += 1
                #expect(error.code == .storeFailure, "\(name)")
                #expect(error.message.contains("column: \"\(column)\""), "\(name): \(error.message)")
                #expect(error.message.contains("Something other than BatonDurable changed that row"), "\(name)")
            }
        }
        #expect(failed >= 2, "the reads that decode the column throw")
    }
}
