public import Baton

/// Watches what a ``DurableWorker`` does outside its queue: claims, lost leases, and how the store
/// recorded each attempt. `BatonObservability`'s `JobTimeline` and `JobMetrics` conform.
///
/// A worker tells the instruments of its queue (``DurableWorker/Configuration/instruments``) that also
/// conform to this protocol. Each attempt is told of as claimed, then at most once as having lost its
/// lease, then exactly once as ended; `job` is the Baton job that runs the attempt on the worker's
/// queue (its `jobWasAdded` comes after `attemptClaimed`).
///
/// Calls come from the worker's tasks, outside its lock, and must be quick.
///
/// ## Thread safety
/// Called from any thread, concurrently for different attempts.
public protocol DurableWorkerInstrument: Sendable {
    /// `worker` claimed `attempt` from its store and is about to add `job` to its queue.
    func attemptClaimed(_ attempt: ClaimedJob, job: Job, worker: DurableWorker)
    /// `worker` no longer holds `attempt`'s lease, or soon may not: a renewal said it was gone (it
    /// expired and the job was claimed again; nothing more is reported), or no renewal reached the store
    /// until shortly before it ends (the server away, a partition; the attempt is reported failed, and
    /// the store rejects the report if the lease ended first). `job` is being cancelled; a job that ends
    /// anyway is reported as it ended, and the store decides.
    func attemptLostLease(_ attempt: ClaimedJob, job: Job, worker: DurableWorker)
    /// `attempt` is over for `worker`: the store recorded `end` (or nothing, for a lost lease).
    func attemptEnded(_ attempt: ClaimedJob, job: Job, end: DurableAttemptEnd, worker: DurableWorker)
}

extension DurableWorkerInstrument {
    public func attemptClaimed(_ attempt: ClaimedJob, job: Job, worker: DurableWorker) {}
    public func attemptLostLease(_ attempt: ClaimedJob, job: Job, worker: DurableWorker) {}
    public func attemptEnded(_ attempt: ClaimedJob, job: Job, end: DurableAttemptEnd, worker: DurableWorker) {}
}

/// How one attempt ended, as its worker's store recorded it.
public enum DurableAttemptEnd: Hashable, Sendable, CustomStringConvertible {
    /// The job succeeded.
    case succeeded
    /// The attempt failed and the job has failed (no attempt left, or the failure is not retryable).
    case failed(message: String)
    /// The attempt failed; the store will run the job again (after its ``RetryPolicy``'s wait).
    case retryScheduled(message: String)
    /// The job was cancelled.
    case cancelled(reason: String)
    /// The job asked to run again after `wait` (``Snooze``): the store will run it again then, without
    /// counting the attempt against its retry policy.
    case snoozed(wait: Duration)
    /// The worker lost the lease: nothing was reported; the store decides at its next claim.
    case leaseLost
    /// Given back unattempted at shutdown: the job is ready again with the same attempt number.
    case released
    /// The store rejected the report: the lease had ended before it arrived.
    case rejected

    /// A short word for spans and logs: `succeeded`, `failed`, `retrying`, `cancelled`, `snoozed`,
    /// `lease lost`, `released`, `rejected`.
    public var description: String {
        switch self {
        case .succeeded: "succeeded"
        case .failed: "failed"
        case .retryScheduled: "retrying"
        case .cancelled: "cancelled"
        case .snoozed: "snoozed"
        case .leaseLost: "lease lost"
        case .released: "released"
        case .rejected: "rejected"
        }
    }

    /// What the store recorded for `report`.
    init(_ report: AttemptReport, _ result: FinishResult) {
        let message: String =
            switch (report.outcome, result) {
            // A success not recorded as one: the store refused the jobs it added, or it was asked to
            // cancel (and added nothing). The job's last error in the store has the store's words.
            case (.succeeded, .accepted(.cancelled)):
                report.additions?.jobs.isEmpty ?? true
                    ? "asked to cancel while it ran: its success was recorded as cancelled"
                    : "asked to cancel while it ran: its success was recorded as cancelled, and the jobs it added were not added"
            case (.succeeded, .accepted(let state)) where state != .succeeded:
                "the store refused the jobs it added (its last error in the store says why)"
            case (.succeeded, _): ""
            case (.failed(let message, _), _): message
            case (.cancelled(let reason), _): reason
            case (.snoozed, _): ""
            }
        switch (report.outcome, result) {
        case (.snoozed(let wait), .accepted(.ready)):
            self = .snoozed(wait: wait)
            return
        case (.snoozed, .accepted(.cancelled)):
            self = .cancelled(reason: "asked to cancel while it ran: its snooze was recorded as cancelled")
            return
        default: break
        }
        switch result {
        case .rejected: self = .rejected
        case .accepted(.succeeded): self = .succeeded
        case .accepted(.failed): self = .failed(message: message)
        case .accepted(.cancelled): self = .cancelled(reason: message)
        case .accepted(.ready), .accepted(.pending), .accepted(.running): self = .retryScheduled(message: message)
        }
    }
}
