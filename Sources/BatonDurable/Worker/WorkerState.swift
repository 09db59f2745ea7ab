import Baton
import Foundation
import Tracing

/// Something the worker's owner task reacts to (``DurableWorker``'s `own(_:until:)`). Every change of
/// the worker's state is one of these, handled by that one task, in the order they arrive: the store's
/// answers come back as events from the child tasks that asked, jobs report their end through an
/// observer, and ``DurableWorker/shutdown()`` and a cancelled `run` send one.
enum WorkerEvent: Sendable {
    /// The store says work may have become claimable.
    case wake
    /// A timer the owner armed fired (its number: only the latest counts as "armed").
    case tick(UInt64)
    /// Stop claiming; cancel what still runs at this instant (a graceful shutdown, or now).
    case shutdown(ContinuousClock.Instant)
    /// `run` was cancelled: stop at once, giving back what runs.
    case hardStop
    /// An attempt's Baton job finished, with the encoded output of a success.
    case ended(Lease, JobOutcome, Data?)
    case claimed(ClaimRound)
    /// After a claim that left room: whether the run of `run(until:)` has finished, and when more work
    /// may become due (asked after the claimed jobs started, so they do not wait for it).
    case polled(runFinished: Bool, due: Date?)
    case reported(ReportRound)
    case renewed(RenewRound)
    /// The retention's prune is over (done or failed, the worker's log says).
    case pruned
    /// Tests: renew now, and resume once a renewal started after this request has been handled.
    case renewNow(CheckedContinuation<Void, Never>)
    /// The report batch is due (``WorkerOwner`` waits a moment for more attempts to end).
    /// Tests: run the lease watch now and answer when it would next stop an attempt (store clock).
    case checkLeases(CheckedContinuation<Date?, Never>)
}

/// The answer to a claim the owner asked for.
struct ClaimRound: Sendable {
    var limit: Int
    /// The store clock's time just before the call: leases count from here (``ActiveAttempt/leaseEnds``).
    var askedAt: Date
    var result: Result<[ClaimedJob], any Error>
    var carriers: [DurableRunID: [String: String]] = [:]
    /// Room was left: a ``WorkerEvent/polled(runFinished:due:)`` follows.
    var polls = false
}

/// The answer to a report of ended attempts, sent with a claim of the room they leave.
struct ReportRound: Sendable {
    var batch: [PendingReport]
    /// The owner's number for the call (see `WorkerOwner.reporting`).
    var call: UInt64 = 0
    var claimLimit: Int
    var askedAt: Date
    var result: Result<(results: [FinishResult], claimed: [ClaimedJob]), any Error>
    /// Why giving the released leases back failed (they are sent again); nil when it went through.
    var releaseError: (any Error)? = nil
    var carriers: [DurableRunID: [String: String]] = [:]
}

/// The answer to a renewal of held leases.
struct RenewRound: Sendable {
    var leases: [Lease]
    var askedAt: Date
    var result: Result<[LeaseStatus], any Error>
}

/// Why the worker cancelled a running attempt, which decides what it tells the store.
enum CancelCause: Sendable {
    /// The store asked (the job or its run was cancelled): report it cancelled.
    case requested(String)
    /// The lease is gone: report nothing (it would be rejected).
    case leaseLost
    /// No renewal reached the store and the lease is about to end: report the attempt failed, to be
    /// retried — rejected if the lease has ended meanwhile, and otherwise the job and its category
    /// slots are free at once, not when the lease runs out.
    case leaseRunningOut
    /// Shutdown after the grace period: give the lease back.
    case shutdown

    /// The instruments were told that the attempt lost its lease.
    var isLeaseLost: Bool {
        switch self {
        case .leaseLost, .leaseRunningOut: true
        case .requested, .shutdown: false
        }
    }
}

/// What the owner sends for an ended attempt.
enum PendingReport: Sendable {
    case report(AttemptReport)
    case release(Lease)

    var lease: Lease {
        switch self {
        case .report(let report): report.lease
        case .release(let lease): lease
        }
    }
}

/// A claimed job the worker holds: from its claim until its report is stored (so its lease is renewed
/// and its slot counted until then).
struct ActiveAttempt: Sendable {
    let claimed: ClaimedJob
    let job: AsyncJob
    /// Whether the job committed its success in a transaction of its own.
    let completion: AttemptCompletion
    var cause: CancelCause?
    /// When the lease ends as far as this worker can tell, on the store's clock *as this process reads
    /// it*: the time just before the claim or the last renewal that answered, plus the lease. A store
    /// judges leases by its own clock (PostgreSQL: the server's), which may be set differently; times
    /// taken on one clock and compared on it are right whatever the offset.
    var leaseEnds: Date
    /// The job has ended and its report (or release) waits to be sent: nothing is left to stop.
    var ended = false
    /// The attempt's span, when the worker traces, and the context its job runs in.
    var span: (any Span)? = nil
    var context: ServiceContext? = nil
}

/// `shutdown()` and a cancelled `run` reach the owner through this, behind one lock: the owner's input
/// while a run is under way, or a shutdown asked for before a run began, which the next one obeys.
struct WorkerControl {
    var input: AsyncStream<WorkerEvent>.Continuation?
    var running = false
    var pendingShutdown: ContinuousClock.Instant?
}

/// The reason a worker gives a Baton job it cancels.
public struct DurableCancellation: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
