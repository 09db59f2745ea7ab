public import Baton
public import BatonObservability
import CoreMetrics

// Adapters from a durable worker's events (DurableWorkerInstrument) to BatonObservability's timeline and
// metrics. They live here, not in BatonObservability, so that users of the metrics alone never build GRDB:
// give the instruments to the worker's queue (DurableWorker.Configuration.instruments, or
// JobQueue.defaultInstruments) and they see its claims, lost leases and retries too.

extension JobTimeline: DurableWorkerInstrument {
    /// Marks the attempt's job `JobTimeline.Mark.Kind.claimed`.
    public func attemptClaimed(_ attempt: ClaimedJob, job: Job, worker: DurableWorker) {
        mark(.claimed, of: job)
    }

    /// Marks the attempt's job `JobTimeline.Mark.Kind.leaseLost`.
    public func attemptLostLease(_ attempt: ClaimedJob, job: Job, worker: DurableWorker) {
        mark(.leaseLost, of: job)
    }

    /// Marks the attempt's job `JobTimeline.Mark.Kind.retried` when the store scheduled another attempt,
    /// and `JobTimeline.Mark.Kind.snoozed` when the job snoozed (its entry ends failed: its body threw the
    /// ``Snooze``).
    public func attemptEnded(_ attempt: ClaimedJob, job: Job, end: DurableAttemptEnd, worker: DurableWorker) {
        switch end {
        case .retryScheduled: mark(.retried, of: job)
        case .snoozed: mark(.snoozed, of: job)
        default: break
        }
    }
}

extension JobMetrics: DurableWorkerInstrument {
    /// Counts an attempt after the first in `JobMetrics.Name.retried`, labelled with the worker's queue and the
    /// durable kind.
    public func attemptClaimed(_ attempt: ClaimedJob, job: Job, worker: DurableWorker) {
        guard attempt.attempt > 1, factory != nil else { return }
        durableCounters(queue: worker.queue, kind: attempt.kind).retried.increment()
    }

    /// Counts a lost lease in `JobMetrics.Name.leasesLost`.
    public func attemptLostLease(_ attempt: ClaimedJob, job: Job, worker: DurableWorker) {
        guard factory != nil else { return }
        durableCounters(queue: worker.queue, kind: attempt.kind).leasesLost.increment()
    }
}
