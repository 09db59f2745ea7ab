public import Foundation

/// What a run as a whole has come to, from its jobs' states.
public enum RunState: String, Codable, Sendable, CaseIterable, CustomStringConvertible {
    /// Some job has not finished (pending, ready or running).
    case running
    /// Every job finished and succeeded.
    case succeeded
    /// Every job finished, and at least one failed.
    case failed
    /// Every job finished, none failed, and at least one was cancelled.
    case cancelled

    public var description: String { rawValue }
}

/// Which runs ``JobStore/runs(_:)`` lists: newest first, a page at a time.
///
/// ```swift
/// var filter = RunFilter(state: .failed, limit: 20)
/// let first = try await store.runs(filter)
/// filter.before = first.next  // the following page, or nil when there is none
/// ```
public struct RunFilter: Hashable, Codable, Sendable {
    /// Only runs in this state, or any.
    public var state: RunState?
    /// Only runs of this exact name, or any.
    public var name: String?
    /// Only runs created at or after this time.
    public var createdSince: Date?
    /// Only runs created before this time.
    public var createdBefore: Date?
    /// Only runs older than this one (its identity excluded): ``RunPage/next`` of the previous page.
    public var before: DurableRunID?
    /// At most this many runs (1…1,000).
    public var limit: Int

    public init(
        state: RunState? = nil, name: String? = nil, createdSince: Date? = nil, createdBefore: Date? = nil,
        before: DurableRunID? = nil, limit: Int = 50
    ) {
        self.state = state
        self.name = name
        self.createdSince = createdSince
        self.createdBefore = createdBefore
        self.before = before
        self.limit = limit
    }

    /// Throws ``DurableError/Code/misuse`` for a limit outside 1…1,000.
    package func check() throws {
        guard (1...1_000).contains(limit) else {
            throw DurableError(
                code: .misuse,
                message: "a page of runs holds 1 to 1,000 runs, not \(limit); ask for the next page with `before`.")
        }
    }
}

/// A run with its progress, as the run list shows it.
public struct RunSummary: Hashable, Codable, Sendable {
    public var id: DurableRunID
    public var name: String
    public var uniqueKey: String?
    public var created: Date
    /// When its last job finished, or `nil` while it runs.
    public var finished: Date?
    public var state: RunState
    /// Its jobs: how many in all, how many have not finished, and how many finished failed or cancelled.
    public var jobs: Int
    public var unfinished: Int
    public var failed: Int
    public var cancelled: Int

    public init(
        id: DurableRunID, name: String, uniqueKey: String?, created: Date, finished: Date?, jobs: Int,
        unfinished: Int, failed: Int, cancelled: Int
    ) {
        self.id = id
        self.name = name
        self.uniqueKey = uniqueKey
        self.created = created
        self.finished = finished
        self.jobs = jobs
        self.unfinished = unfinished
        self.failed = failed
        self.cancelled = cancelled
        self.state = RunSummary.state(unfinished: unfinished, failed: failed, cancelled: cancelled)
    }

    /// The run's state from its counts.
    static func state(unfinished: Int, failed: Int, cancelled: Int) -> RunState {
        if unfinished > 0 { return .running }
        if failed > 0 { return .failed }
        if cancelled > 0 { return .cancelled }
        return .succeeded
    }

    /// Finished jobs, succeeded or not.
    public var done: Int { jobs - unfinished }
}

/// One page of ``JobStore/runs(_:)``.
public struct RunPage: Hashable, Codable, Sendable {
    public var runs: [RunSummary]
    /// Pass as ``RunFilter/before`` for the next page; `nil` when this page is the last.
    public var next: DurableRunID?

    public init(runs: [RunSummary], next: DurableRunID?) {
        self.runs = runs
        self.next = next
    }
}

/// Which jobs of a run ``JobStore/jobs(_:)`` lists: in the order they were added to the run (the
/// submitted graph's jobs first), a page at a time.
///
/// ```swift
/// var filter = JobFilter(run: run, state: .failed, limit: 100)
/// let first = try await store.jobs(filter)
/// filter.after = first.next  // the following page, or nil when there is none
/// ```
public struct JobFilter: Hashable, Codable, Sendable {
    /// The run whose jobs are listed.
    public var run: DurableRunID
    /// Only jobs in this state, or any.
    public var state: DurableJobState?
    /// Only jobs added after this one (itself excluded): ``JobPage/next`` of the previous page. A job of
    /// another run, or one that is not in the store, gives an empty page.
    public var after: DurableJobID?
    /// At most this many jobs (1…1,000).
    public var limit: Int

    public init(run: DurableRunID, state: DurableJobState? = nil, after: DurableJobID? = nil, limit: Int = 100) {
        self.run = run
        self.state = state
        self.after = after
        self.limit = limit
    }

    /// Throws ``DurableError/Code/misuse`` for a limit outside 1…1,000.
    package func check() throws {
        guard (1...1_000).contains(limit) else {
            throw DurableError(
                code: .misuse,
                message: "a page of jobs holds 1 to 1,000 jobs, not \(limit); ask for the next page with `after`.")
        }
    }
}

/// A job as a run's job list shows it: no input, output, edges or categories (``JobStore/snapshot(of:)``
/// has those).
public struct JobSummary: Hashable, Codable, Sendable {
    public var id: DurableJobID
    public var name: String
    public var kind: String
    public var state: DurableJobState
    /// Attempts started so far (the running one included).
    public var attempts: Int
    /// When its latest attempt started (its claim), or nil before the first (or for a store of an older
    /// schema).
    public var started: Date?
    /// When it finished, or nil.
    public var finished: Date?
    /// The last attempt's error, or the cancellation's reason.
    public var lastError: String?
    /// The job that added it to the run, or nil for a job of the submitted graph.
    public var addedBy: DurableJobID?

    public init(
        id: DurableJobID, name: String, kind: String, state: DurableJobState, attempts: Int, started: Date?,
        finished: Date?, lastError: String?, addedBy: DurableJobID?
    ) {
        self.id = id
        self.name = name
        self.kind = kind
        self.state = state
        self.attempts = attempts
        self.started = started
        self.finished = finished
        self.lastError = lastError
        self.addedBy = addedBy
    }
}

/// One page of ``JobStore/jobs(_:)``.
public struct JobPage: Hashable, Codable, Sendable {
    public var jobs: [JobSummary]
    /// Pass as ``JobFilter/after`` for the next page; `nil` when this page is the last.
    public var next: DurableJobID?

    public init(jobs: [JobSummary], next: DurableJobID?) {
        self.jobs = jobs
        self.next = next
    }
}

/// A worker as ``JobStore/workers()`` lists it: its registration, if it has not lapsed, and the jobs
/// whose leases it holds.
public struct WorkerSummary: Hashable, Codable, Sendable {
    public var id: String
    /// The kinds it registered to run; empty when it is not registered (its registration lapsed, or it
    /// never registered) but still holds leases.
    public var kinds: [String]
    /// When its registration lapses unless refreshed; nil when it is not registered.
    public var expires: Date?
    /// The running jobs it holds, by job.
    public var leases: [HeldLease]

    public init(id: String, kinds: [String], expires: Date?, leases: [HeldLease]) {
        self.id = id
        self.kinds = kinds
        self.expires = expires
        self.leases = leases
    }
}

/// A running job's lease, as ``WorkerSummary`` shows it.
public struct HeldLease: Hashable, Codable, Sendable {
    public var job: DurableJobID
    public var name: String
    public var kind: String
    public var run: DurableRunID
    /// The attempt that holds it.
    public var attempt: Int
    /// When the attempt started (its claim), when known.
    public var started: Date?
    /// When the lease ends unless renewed.
    public var expires: Date?

    public init(
        job: DurableJobID, name: String, kind: String, run: DurableRunID, attempt: Int, started: Date?, expires: Date?
    ) {
        self.job = job
        self.name = name
        self.kind = kind
        self.run = run
        self.attempt = attempt
        self.started = started
        self.expires = expires
    }
}

/// A job's input and output as stored (``JobStore/payload(of:)``): encoded JSON.
public struct JobPayload: Hashable, Codable, Sendable {
    /// The input it was given; nil when it takes another job's output (``inputFrom``).
    public var input: Data?
    /// The job whose output is its input.
    public var inputFrom: DurableJobID?
    /// Its output, once it succeeded.
    public var output: Data?

    public init(input: Data?, inputFrom: DurableJobID?, output: Data?) {
        self.input = input
        self.inputFrom = inputFrom
        self.output = output
    }
}

/// One ended attempt of a job, as ``JobStore/attempts(of:)`` lists them.
public struct AttemptRecord: Hashable, Codable, Sendable {
    /// How an attempt ended.
    public enum Outcome: String, Codable, Sendable, CustomStringConvertible {
        /// Its worker reported success.
        case succeeded
        /// Its worker reported an error.
        case failed
        /// Its worker reported that it stopped on a cancellation.
        case cancelled
        /// Its lease expired: the worker stopped renewing it (killed, stuck, cut off).
        case lost
        /// Its job asked to run again later (``Snooze``); the record's error says how long it waits.
        case snoozed

        public var description: String { rawValue }
    }

    /// Its number, from 1 (attempts given back unattempted at a shutdown are not counted): each claim of
    /// the job has its own, also across a ``JobStore/retry(job:)``, which numbers on from the attempts
    /// before it. The list is in the order they ended.
    public var attempt: Int
    /// The worker that held it, when known: not kept for a success (the job's row keeps no worker once
    /// it finished), nor for attempts recorded before workers were.
    public var worker: String?
    public var ended: Date
    public var outcome: Outcome
    /// What the job became: ready (to be retried, or after a snooze), succeeded, failed or cancelled.
    public var result: DurableJobState
    /// The error, the cancellation's reason, or why the lease was lost.
    public var error: String?

    /// When it began (its claim); nil for attempts recorded by a store of an older schema.
    public var started: Date?

    public init(
        attempt: Int, worker: String?, started: Date? = nil, ended: Date, outcome: Outcome,
        result: DurableJobState, error: String?
    ) {
        self.attempt = attempt
        self.worker = worker
        self.started = started
        self.ended = ended
        self.outcome = outcome
        self.result = result
        self.error = error
    }
}

/// What both stores' run queries share: their SQL on the runs table (the same in SQLite and
/// PostgreSQL), and the repairs' messages.
package enum RunQueries {
    /// The condition on a row of the runs table for a run in `state`.
    package static func condition(_ state: RunState) -> String {
        switch state {
        case .running: "finished IS NULL"
        case .failed: "finished IS NOT NULL AND failed > 0"
        case .cancelled: "finished IS NOT NULL AND failed = 0 AND cancelled > 0"
        case .succeeded: "finished IS NOT NULL AND failed = 0 AND cancelled = 0"
        }
    }

    /// The columns of a ``JobSummary``, in the order ``jobSummary(_:)`` reads them.
    package static let jobSummaryColumns = "id, name, kind, state, attempts, started, finished, last_error, added_by"

    /// The jobs of a run as ``JobStore/jobs(_:)`` lists them, from `table` (the same in both stores), its
    /// parameters numbered by `placeholder` (`?1` in SQLite, `$1` in PostgreSQL; the run's is used twice):
    /// the run, then the state when `state`, then the job after which the page starts when `after`, then
    /// the limit (one more than the page, to know whether another follows). Ordered by the run
    /// index's second column, so that the index on (run, idx) answers it.
    package static func jobsSQL(table: String, state: Bool, after: Bool, placeholder: (Int) -> String) -> String {
        var count = 1
        var conditions = ["run = \(placeholder(count))"]
        if state {
            count += 1
            conditions.append("state = \(placeholder(count))")
        }
        if after {
            // A job of another run (or none) matches no row: the page is empty.
            count += 1
            conditions.append(
                "idx > (SELECT idx FROM \(table) WHERE id = \(placeholder(count)) AND run = \(placeholder(1)))")
        }
        return """
            SELECT \(jobSummaryColumns) FROM \(table) WHERE \(conditions.joined(separator: " AND "))
            ORDER BY idx LIMIT \(placeholder(count + 1))
            """
    }

    /// One row: how many runs of `table` are running, failed and cancelled, and how many in all.
    package static func countsSQL(table: String) -> String {
        let count = { (state: RunState) in "(SELECT count(*) FROM \(table) WHERE \(condition(state)))" }
        return "SELECT \(count(.running)), \(count(.failed)), \(count(.cancelled)), (SELECT count(*) FROM \(table))"
    }

    /// The counts by state from the row of ``countsSQL(table:)``.
    package static func counts(running: Int, failed: Int, cancelled: Int, all: Int) -> [RunState: Int] {
        [.running: running, .failed: failed, .cancelled: cancelled, .succeeded: all - running - failed - cancelled]
    }

    /// The workers from their registrations (`registered`: id, kinds, expiry) and the running jobs'
    /// leases, which may name workers that are not registered.
    package static func workers(
        registered: [(id: String, kinds: [String], expires: Date)], leases: [(owner: String, lease: HeldLease)]
    ) -> [WorkerSummary] {
        var byID: [String: WorkerSummary] = [:]
        for worker in registered {
            byID[worker.id] = WorkerSummary(id: worker.id, kinds: worker.kinds, expires: worker.expires, leases: [])
        }
        for (owner, lease) in leases {
            byID[owner, default: WorkerSummary(id: owner, kinds: [], expires: nil, leases: [])].leases.append(lease)
        }
        return byID.values.sorted { $0.id < $1.id }
    }

    package static func unknownRun(_ run: DurableRunID, doing: String) -> DurableError {
        DurableError(code: .unknownRun, message: "\(run) is not in the store (pruned?); \(doing).")
    }

    package static func unknownJob(_ job: DurableJobID, doing: String) -> DurableError {
        DurableError(code: .unknownJob, message: "\(job) is not in the store (pruned?); \(doing).")
    }

    /// Checks a retry's target: a failed or cancelled job.
    package static func checkRetryable(_ job: DurableJobID, name: String, state: DurableJobState) throws {
        switch state {
        case .failed, .cancelled: return
        case .succeeded:
            throw DurableError(
                code: .misuse,
                message: "job '\(name)' (\(job)) succeeded; only a failed or cancelled job can be retried.")
        case .pending, .ready, .running:
            throw DurableError(
                code: .misuse,
                message:
                    "job '\(name)' (\(job)) is \(state), not finished; only a failed or cancelled job can be retried (cancel it first to start it over)."
            )
        }
    }

    /// The error for a retry whose job cannot run because a dependency outside the retry failed.
    package static func blockedRetry(
        _ job: DurableJobID, name: String, dependency: String, state: DurableJobState
    ) -> DurableError {
        DurableError(
            code: .misuse,
            message:
                "job '\(name)' (\(job)) cannot run again: its dependency '\(dependency)' \(state == .failed ? "failed" : "was cancelled"). Retry '\(dependency)' instead; its cancelled dependents are retried with it."
        )
    }

    /// The error for a retry whose job would be cancelled again by a dependency still being cancelled.
    package static func retryWhileCancelling(_ job: DurableJobID, name: String, dependency: String) -> DurableError {
        DurableError(
            code: .misuse,
            message:
                "job '\(name)' (\(job)) cannot run again yet: its dependency '\(dependency)' is still being cancelled (its attempt has not ended), and would cancel it again. Retry once '\(dependency)' has stopped (explain shows it); nothing was retried."
        )
    }

    /// The error for deleting an unfinished run.
    package static func unfinishedDelete(_ run: DurableRunID, unfinished: Int) -> DurableError {
        DurableError(
            code: .misuse,
            message:
                "\(run) has \(unfinished) unfinished job\(unfinished == 1 ? "" : "s"); cancel it and wait until it has finished before deleting it."
        )
    }
}
