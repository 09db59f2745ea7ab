public import Foundation

/// Where durable graphs live: the state of every job, its lease, its categories and its output.
///
/// A store decides *what may start*; a ``DurableWorker`` runs what it claims on a Baton `JobQueue`,
/// which decides *when it runs*. The protocol is small and speaks only data (kinds, encoded inputs and
/// outputs, states), so a store is a handful of SQL transactions: ``SQLiteJobStore`` is the embedded
/// default, and a PostgreSQL store implements the same methods.
///
/// Every method is one atomic transaction. One clock decides every lease, retry and `notBefore` of a
/// store: ``SQLiteJobStore``'s is ``clock`` (one machine); a store shared by machines uses its
/// server's (PostgreSQL: `now()`), unless given a clock other than ``DurableClock/system``. Dates the
/// protocol returns for a worker to wait on (``nextDueDate(kinds:)``) are on ``clock``.
/// The checks in the `JobStoreConformance` test target are the contract: a store passes all of them.
///
/// ## Thread safety
/// Implementations are `Sendable`; any method may be called from any task, concurrently, and several
/// processes may share one store.
public protocol JobStore: Sendable {
    /// This process's clock: what workers measure their leases and waits on (and, for the SQLite store,
    /// what decides `notBefore`, lease expiry and retention).
    var clock: DurableClock { get }

    /// Stores a whole graph in one transaction and returns the identities given to its jobs.
    ///
    /// Jobs without dependencies are ready at once. When `uniqueKey` matches a run already in the
    /// store (finished or not, until it is pruned), nothing is written and that run is returned with
    /// ``SubmittedRun/existing`` set.
    /// - Throws: ``DurableError`` (``DurableError/Code/dependencyCycle``, ``DurableError/Code/invalidGraph``)
    ///   before writing anything.
    func submit(_ graph: GraphSpec, uniqueKey: String?) async throws -> SubmittedRun

    /// Claims up to `limit` ready jobs of the given kinds for `worker`, each with a fresh lease token
    /// and a lease ending `lease` from now, in one transaction.
    ///
    /// A job may be claimed when it is ready, its `notBefore` has passed, and each of its categories
    /// has fewer holders than its limit. Higher priority first, then older first. The same transaction
    /// first ends expired leases: such a job becomes ready again (attempt + 1 at its next claim), or
    /// failed when it has no attempt left, or cancelled when its cancellation was requested.
    func claim(worker: String, kinds: [String], limit: Int, lease: Duration) async throws -> [ClaimedJob]

    /// Extends the leases that `worker` still holds to `lease` from now. One result per lease, in order:
    /// ``LeaseStatus/cancelRequested(reason:until:)`` when the job's cancellation was asked for (keep the lease
    /// until the job has ended, then report it), ``LeaseStatus/lost`` when the token is no longer the
    /// job's current one (stop the attempt: its completion will be rejected).
    func renew(_ leases: [Lease], worker: String, lease: Duration) async throws -> [LeaseStatus]

    /// Records how attempts ended, each with the token of its claim, in one transaction.
    ///
    /// For an accepted report the store records the outcome and output, releases the job's categories
    /// and, in the same transaction, makes ready the dependents whose last dependency this was; a
    /// failure with attempts left becomes a retry (`notBefore` from the job's ``RetryPolicy``); a final
    /// failure or a cancellation cancels the dependents that do not run regardless, transitively,
    /// with a reason that names the job. A report whose token is not current is rejected and changes
    /// nothing — except the report that ended the attempt, sent again (a retry after a reply lost at
    /// commit), which a store reached over a network (the PostgreSQL store) answers as it did the
    /// first time, changing nothing.
    func finish(_ reports: [AttemptReport]) async throws -> [FinishResult]

    /// ``finish(_:)`` followed by ``claim(worker:kinds:limit:lease:)``: what a worker does when its jobs
    /// end and it has room for more. A store may do both in one transaction (the SQLite store does):
    /// in a chain, the job that a completion makes ready is claimed in the completion's own
    /// transaction, with no wake-up in between. The default implementation calls the two in turn.
    ///
    /// Each step keeps its own guarantees: reports are accepted only with their current tokens, and a
    /// claim respects dependencies, `notBefore` and category limits as they are after the reports.
    func finish(
        _ reports: [AttemptReport], thenClaim limit: Int, worker: String, kinds: [String], lease: Duration
    ) async throws -> (results: [FinishResult], claimed: [ClaimedJob])

    /// Gives claimed jobs back unattempted (graceful shutdown): they become ready again at once with
    /// their attempt count as before the claim, and their categories are released. Stale tokens are
    /// ignored.
    func release(_ leases: [Lease]) async throws

    /// Cancels every unfinished job of a run. Pending and ready jobs are cancelled at once; a running
    /// job is asked to cancel (its worker learns it at its next renewal) and becomes cancelled when its
    /// attempt ends, however it ends (a success reported after the request is recorded as cancelled,
    /// its output not kept), or when its lease expires.
    func cancel(run: DurableRunID, reason: String) async throws

    /// Cancels one job as ``cancel(run:reason:)`` does; its dependents are cancelled unless they run regardless.
    func cancel(job: DurableJobID, reason: String) async throws

    /// Records that a worker runs the given kinds, until `expires` (workers refresh this as they renew).
    /// `explain` reports ready jobs whose kind no live worker has registered.
    func register(_ worker: WorkerRecord) async throws

    /// Removes a worker's registration (it stopped).
    func unregister(worker: String) async throws

    /// Everything `explain` needs about a run, read in one transaction.
    func snapshot(of run: DurableRunID) async throws -> RunSnapshot

    /// The run a job belongs to.
    func run(of job: DurableJobID) async throws -> DurableRunID

    /// The trace context stored with the run at submission (``GraphSpec/carrierToStore(instrument:)``),
    /// empty when it was submitted outside a traced context. A run's carrier never changes, so workers
    /// may keep it. Stores that keep none use the default, which returns an empty carrier.
    func traceCarrier(of run: DurableRunID) async throws -> [String: String]

    /// The run's own record (cheap: no jobs), for waiting until it has finished.
    /// - Throws: ``DurableError`` (``DurableError/Code/unknownRun``) when it is not in the store.
    func record(of run: DurableRunID) async throws -> RunRecord

    /// The earliest time after now at which a job of these kinds may become claimable without any other
    /// event: the earliest future `notBefore` of a ready job, or the earliest lease expiry. `nil` if none.
    /// Workers sleep until then (or a wake-up, or their polling interval).
    func nextDueDate(kinds: [String]) async throws -> Date?

    /// Deletes the runs that finished before `date`, with their jobs. Returns how many runs.
    /// `SQLiteJobStore` deletes them a few thousand jobs per transaction (a run is never split), so that
    /// other writers of the file — workers renewing their leases — are not held for the whole prune.
    func prune(finishedBefore date: Date) async throws -> Int

    /// Runs newest first, a page at a time, filtered by state, name and creation time. Answered from
    /// the runs' own rows and their indexes (no job is read): milliseconds with 100,000 runs.
    /// - Throws: ``DurableError/Code/misuse`` for a limit outside 1…1,000.
    func runs(_ filter: RunFilter) async throws -> RunPage

    /// How many runs are in each state.
    func runCounts() async throws -> [RunState: Int]

    /// A job's ended attempts in the order they ended: each failure, cancellation and lost lease with
    /// its worker and error, then the success, if it succeeded.
    /// - Throws: ``DurableError/Code/unknownJob``.
    func attempts(of job: DurableJobID) async throws -> [AttemptRecord]

    /// The jobs of a run in the order they were added to it, a page at a time, optionally only those
    /// in one state. Answered from the index of the run's jobs: milliseconds with 10,000 jobs in a run.
    /// - Throws: ``DurableError/Code/unknownRun``; ``DurableError/Code/misuse`` for a limit outside
    ///   1…1,000.
    func jobs(_ filter: JobFilter) async throws -> JobPage

    /// The ended attempts of every job of a run, each job's as ``attempts(of:)`` lists them, read in one
    /// query rather than one per job (for timelines). Jobs with no ended attempt are absent.
    /// - Throws: ``DurableError/Code/unknownRun``.
    func attempts(ofRun run: DurableRunID) async throws -> [DurableJobID: [AttemptRecord]]

    /// The workers whose registration has not lapsed, and every worker that holds a running job's lease
    /// (registered or not: one whose registration lapsed while it holds leases is listed without
    /// kinds), by id, each with the leases it holds.
    func workers() async throws -> [WorkerSummary]

    /// A job's input and output as stored.
    /// - Throws: ``DurableError/Code/unknownJob``.
    func payload(of job: DurableJobID) async throws -> JobPayload

    /// Runs a failed or cancelled job again, in place, with its retry policy's attempts (and its
    /// backoff from the start) — numbered on from the attempts it made, so that no two claims of a job
    /// share a number — together with the jobs
    /// that were cancelled because of it (its cancelled dependents, transitively); the run is
    /// unfinished again until they finish. Dependents that run regardless wait for its new outcome. A
    /// dependent that another failed job outside the retry would cancel again stays cancelled. A job
    /// that never started keeps its `notBefore` (a dependent cancelled before its start date waits for
    /// that date again); one that ran is due at once.
    /// Returns how many jobs run again.
    /// - Throws: ``DurableError/Code/misuse`` when the job is not failed or cancelled, or one of its own
    ///   dependencies failed or was cancelled (retry that one instead); ``DurableError/Code/unknownJob``.
    @discardableResult
    func retry(job: DurableJobID) async throws -> Int

    /// Retries every failed or cancelled job of a run whose own dependencies did not fail (with their
    /// cancelled dependents), as ``retry(job:)`` does. Returns how many jobs run again: 0 when none had
    /// failed or been cancelled.
    /// - Throws: ``DurableError/Code/unknownRun``.
    @discardableResult
    func retry(run: DurableRunID) async throws -> Int

    /// Deletes a finished run with its jobs, as ``prune(finishedBefore:)`` does for old runs.
    /// - Throws: ``DurableError/Code/misuse`` while some job is unfinished (cancel the run first);
    ///   ``DurableError/Code/unknownRun``.
    func delete(run: DurableRunID) async throws

    /// Stores a schedule, replacing the one of the same name. A new schedule, or one whose timing
    /// changed, ticks next at the first tick after now; one stored again with the same timing (as an
    /// application does at each start) keeps its next tick, so a tick that is due or was missed still
    /// fires by its ``Schedule/CatchUp`` rule. A paused schedule stays paused.
    /// - Throws: ``DurableError/Code/invalidGraph`` for a bad name, timing or graph, or a timing that
    ///   would never tick, before writing.
    @discardableResult
    func schedule(_ schedule: Schedule) async throws -> ScheduleRecord

    /// The stored schedules, by name.
    /// - Throws: ``DurableError/Code/decoding`` when one is stored in a form this program cannot read
    ///   (written by a newer version): ``scheduleListing()`` lists the others beside it.
    func schedules() async throws -> [ScheduleRecord]

    /// Every stored schedule, by name, with those this program cannot read (written by a newer version,
    /// or damaged) listed apart instead of failing the listing: what an operator's tool shows. The
    /// default implementation lists ``schedules()``; a store that wraps another forwards this too.
    func scheduleListing() async throws -> ScheduleListing

    /// A sentence for an error an attempt threw that this store's own library made (a PostgreSQL
    /// error from a job's `writes`), which workers record as the attempt's error; nil to record the
    /// error's own description. The default is nil.
    func describeFailure(_ error: any Error) -> String?

    /// Pauses a schedule (its ticks are not fired) or resumes it (from its first tick after now: ticks
    /// that passed while it was paused are not fired).
    /// - Throws: ``DurableError/Code/misuse`` when there is no schedule of that name.
    func setSchedule(named name: String, paused: Bool) async throws

    /// Removes a schedule; runs it submitted stay.
    /// - Throws: ``DurableError/Code/misuse`` when there is no schedule of that name.
    func removeSchedule(named name: String) async throws

    /// Submits one run for each due tick of each unpaused schedule (by its ``Schedule/CatchUp``), each
    /// with the tick as its unique key, and moves the schedules on, in one transaction: however many
    /// workers call this at once, a tick makes one run. ``DurableWorker/run()`` calls it.
    func fireDueSchedules() async throws -> FiredSchedules

    /// A stream that yields whenever work may have become claimable (a submission, a completion, a
    /// release, a cancellation). A store shared by processes delivers its own changes at once and other
    /// processes' changes as it can (SQLite: not at all — workers poll; PostgreSQL: `LISTEN/NOTIFY`).
    /// Each call returns a new stream; it ends when the caller stops iterating.
    func wakeups() -> AsyncStream<Void>

    /// Whether the store was closed, so that every call fails from now on: a `DurableWorker` then stops
    /// and its `run` throws, rather than retrying for ever. The default is `false`.
    var isClosed: Bool { get }

    /// How many `finish(_:thenClaim:…)` calls a `DurableWorker` may have in flight at once: a store that
    /// commits calls side by side (PostgreSQL: 2) lets attempts that end while one call waits for its
    /// commit go in another; one that writes one call at a time (SQLite) gains nothing from it. The
    /// default is 1.
    var reportCallsInFlight: Int { get }
}

/// A job claimed by a worker: what it needs to run one attempt.
public struct ClaimedJob: Hashable, Codable, Sendable {
    public var lease: Lease
    public var run: DurableRunID
    public var name: String
    public var kind: String
    /// The encoded input (the output of the job's `inputFrom` dependency, when it has one).
    public var input: Data
    /// This attempt's number, from 1.
    public var attempt: Int
    public var maxAttempts: Int
    public var priority: Int
    public var timeout: Duration?
    /// When the lease ends unless renewed, on the clock that decides the store's leases (PostgreSQL: the
    /// server's, which may differ from this machine's). A worker measures its own lease from the moment
    /// it asked instead.
    public var leaseExpires: Date

    public init(
        lease: Lease, run: DurableRunID, name: String, kind: String, input: Data, attempt: Int, maxAttempts: Int,
        priority: Int, timeout: Duration?, leaseExpires: Date
    ) {
        self.lease = lease
        self.run = run
        self.name = name
        self.kind = kind
        self.input = input
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.priority = priority
        self.timeout = timeout
        self.leaseExpires = leaseExpires
    }

    public var job: DurableJobID { lease.job }
}

/// How one attempt ended, as a worker reports it.
public struct AttemptReport: Hashable, Codable, Sendable {
    public enum Outcome: Hashable, Codable, Sendable {
        /// The job returned this encoded output.
        case succeeded(output: Data)
        /// The job threw. `retryable: false` fails the job now whatever attempts are left (for example
        /// an input that does not decode).
        case failed(message: String, retryable: Bool)
        /// The job stopped because it was cancelled.
        case cancelled(reason: String)
        /// The job asked to run again after `wait` (``Snooze``): it becomes ready then, its attempt count
        /// and its maximum both one higher, so that the snooze spends no attempt of its retry policy.
        case snoozed(wait: Duration)
    }

    public var lease: Lease
    public var outcome: Outcome
    /// Jobs the attempt adds to its run, stored with its success in the same transaction (ignored for
    /// any other outcome, and for a rejected report).
    public var additions: RunAddition?

    public init(lease: Lease, outcome: Outcome, additions: RunAddition? = nil) {
        self.lease = lease
        self.outcome = outcome
        self.additions = additions
    }
}

/// What a store did with an ``AttemptReport``.
public enum FinishResult: Hashable, Codable, Sendable {
    /// Recorded; the job is now in this state (`ready` for a scheduled retry).
    case accepted(DurableJobState)
    /// Not the job's current lease (it expired and the job was claimed again, released, or finished):
    /// nothing changed.
    case rejected
}

/// The answer to a lease renewal.
public enum LeaseStatus: Hashable, Codable, Sendable {
    /// Still held, now until this time.
    case renewed(until: Date)
    /// Still held (until this time), but the job's cancellation was asked for: stop it and report.
    case cancelRequested(reason: String, until: Date)
    /// No longer held: stop the attempt; its completion would be rejected.
    case lost
}

/// A worker as registered in a store.
public struct WorkerRecord: Hashable, Codable, Sendable {
    public var id: String
    public var kinds: [String]
    /// The registration lapses at this time unless refreshed.
    public var expires: Date

    public init(id: String, kinds: [String], expires: Date) {
        self.id = id
        self.kinds = kinds
        self.expires = expires
    }
}

extension JobStore {
    /// Never closed.
    public var isClosed: Bool { false }

    /// One call at a time.
    public var reportCallsInFlight: Int { 1 }

    /// The error's own description (see the requirement).
    public func describeFailure(_ error: any Error) -> String? { nil }

    /// ``schedules()``: a store that cannot list the schedules it cannot read apart fails as a whole.
    public func scheduleListing() async throws -> ScheduleListing {
        ScheduleListing(schedules: try await schedules())
    }

    /// Stores a schedule that submits `graph` every `interval` (counted from 1970-01-01 00:00 UTC).
    @discardableResult
    public func schedule(
        name: String, every interval: Duration, graph: JobGraph, catchUp: Schedule.CatchUp = .skip,
        overlap: Schedule.Overlap = .allow
    ) async throws -> ScheduleRecord {
        try await schedule(
            Schedule(
                name: name, timing: .every(interval), graph: try graph.spec(), catchUp: catchUp, overlap: overlap))
    }

    /// Stores a schedule that submits `graph` at the times a five-field cron expression matches in
    /// `timeZone` (an IANA name).
    @discardableResult
    public func schedule(
        name: String, cron: String, timeZone: String = "UTC", graph: JobGraph, catchUp: Schedule.CatchUp = .skip,
        overlap: Schedule.Overlap = .allow
    ) async throws -> ScheduleRecord {
        try await schedule(
            Schedule(
                name: name, timing: .cron(cron, timeZone: timeZone), graph: try graph.spec(), catchUp: catchUp,
                overlap: overlap))
    }

    /// Pauses a schedule: ``setSchedule(named:paused:)``.
    public func pauseSchedule(named name: String) async throws { try await setSchedule(named: name, paused: true) }

    /// Resumes a schedule from its next tick: ``setSchedule(named:paused:)``.
    public func resumeSchedule(named name: String) async throws { try await setSchedule(named: name, paused: false) }

    /// Calls ``finish(_:)``, then ``claim(worker:kinds:limit:lease:)`` when `limit` is positive.
    public func finish(
        _ reports: [AttemptReport], thenClaim limit: Int, worker: String, kinds: [String], lease: Duration
    ) async throws -> (results: [FinishResult], claimed: [ClaimedJob]) {
        let results = try await finish(reports)
        guard limit > 0 else { return (results, []) }
        return (results, try await claim(worker: worker, kinds: kinds, limit: limit, lease: lease))
    }
}
