import Baton
import Foundation
import Tracing

/// Why the worker cancelled a running attempt, which decides what it tells the store.
enum CancelCause: Sendable {
    /// The store asked (the job or its run was cancelled): report it cancelled.
    case requested(String)
    /// The lease is gone: report nothing (it would be rejected).
    case leaseLost
    /// No renewal reached the store and the lease is about to end (``DurableWorker/leaseWatchLoop()``):
    /// report the attempt failed, to be retried — rejected if the lease has ended meanwhile, and
    /// otherwise the job and its category slots are free at once, not when the lease runs out.
    case leaseRunningOut
    /// Shutdown after the grace period: give the lease back.
    case shutdown
}

/// What the report loop sends.
enum PendingReport: Sendable {
    case report(AttemptReport)
    case release(Lease)

    var job: DurableJobID { lease.job }

    var lease: Lease {
        switch self {
        case .report(let report): report.lease
        case .release(let lease): lease
        }
    }
}

/// A claimed job the worker holds.
struct ActiveAttempt: Sendable {
    let claimed: ClaimedJob
    let job: AsyncJob
    var cause: CancelCause?
    var leaseExpires: Date
    /// The attempt's job has ended and its report (or release) waits to be sent: there is nothing left
    /// to stop when its lease runs out.
    var ended = false
    /// The attempt's span, when the worker traces.
    var span: (any Span)? = nil
}

/// The worker's state, behind its lock.
struct WorkerState: Sendable {
    /// Claimed and not yet reported (a job stays here until its report is sent, so its lease is renewed
    /// and its slot counted until then).
    /// By lease, not by job: an attempt that ended here may still be listed when this worker claims
    /// the job again (a retry), and the two must not be confused.
    var active: [Lease: ActiveAttempt] = [:]
    var reports: [PendingReport] = []
    var shutdownDeadline: ContinuousClock.Instant?
    var cancelledForShutdown = false
    /// When this worker last pruned finished runs (store clock).
    var lastPrune: Date?
    /// Slots of `maxConcurrentJobs` promised to a claim under way (the claim loop's, or the report
    /// loop's claim in the same transaction as its reports), so two claims never take the same room.
    var reserved = 0
    /// How many reservations were made: the claim loop offers its room to the store
    /// (`JobStore.parkClaim`) and checks that no reservation came in between.
    var reservations: UInt64 = 0
    /// The claim loop found no room because of a reservation: the reservation's holder wakes it after.
    var claimWanted = false
    /// The store was closed under the worker (``JobStore/isClosed``): the error that showed it, and how
    /// many reports and releases could not be sent. `run` throws once the worker has stopped.
    var storeClosed: (error: String, dropped: Int)?
}

/// The reason a worker gives a Baton job it cancels.
public struct DurableCancellation: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
