extension Job {
    /// How much of the job is done, from 0 to 1: what its body last reported, and 1 once it succeeded.
    public var progress: Double {
        withCore { core in core.lifecycle.outcome?.didSucceed == true ? 1 : core.extras?.fractionCompleted ?? 0 }
    }

    /// Reports how much of the work is done (clamped to 0…1); observers hear of it in order with the
    /// job's other events, and a group it belongs to updates its own progress. Reports made while the
    /// job is not executing are ignored.
    public func reportProgress(_ fraction: Double) {
        let fraction = min(max(fraction.isNaN ? 0 : fraction, 0), 1)
        Job.propagate(withCore { $0.recordProgress(fraction) }, from: self, fraction)
    }

    /// Carries a progress report that `job` recorded (`recorded`) to its observers and up through the
    /// groups it is in — by a loop, since groups nest deeply — as far as a group's progress changes.
    static func propagate(
        _ recorded: (parent: GroupJob?, mustDeliver: Bool)?, from job: Job, _ fraction: Double
    ) {
        var recorded = recorded
        var job = job
        var fraction = fraction
        while let (parent, mustDeliver) = recorded {
            if mustDeliver { Propagation.run { job.deliver(&$0) } }
            guard let parent, let combined = parent.childProgressed(job, fraction) else { return }
            recorded = parent.withCore { $0.recordProgress(combined) }
            job = parent
            fraction = combined
        }
    }
}

extension JobCore {
    /// Records `fraction` as the job's progress; `nil` if it is not executing or its progress did not
    /// change. Otherwise, the group it is in and whether the caller must deliver the event.
    mutating func recordProgress(_ fraction: Double) -> (parent: GroupJob?, mustDeliver: Bool)? {
        guard case .executing = lifecycle.state else { return nil }
        let extras = extrasForWriting()
        guard extras.fractionCompleted != fraction || fraction == 0 else { return nil }
        extras.fractionCompleted = fraction
        let deliver = wantsEvents ? lifecycle.record(.progress(fraction)) : false
        return (extras.parent, deliver)
    }
}

/// What happened to a job, as delivered by ``Job/events()`` and ``JobQueue/events()``.
public enum JobLifecycleEvent: Sendable, CustomStringConvertible {
    case started
    case cancelled(any Error)
    case produced(Job)
    case progressed(Double)
    case finished(JobOutcome)

    public var description: String {
        switch self {
        case .started: "started"
        case .cancelled(let reason): "cancelled(\(reason))"
        case .produced(let job): "produced(\(job.name))"
        case .progressed(let fraction): "progressed(\(fraction))"
        case .finished(let outcome): "finished(\(outcome))"
        }
    }
}

/// Forwards a job's events to a closure (for the async sequences).
struct EventForwarder: JobObserver {
    let forward: @Sendable (Job, JobLifecycleEvent) -> Void
    func jobDidStart(_ job: Job) { forward(job, .started) }
    func jobDidCancel(_ job: Job, reason: any Error) { forward(job, .cancelled(reason)) }
    func job(_ job: Job, didProduce newJob: Job) { forward(job, .produced(newJob)) }
    func job(_ job: Job, didReportProgress fraction: Double) { forward(job, .progressed(fraction)) }
    func jobDidFinish(_ job: Job, outcome: JobOutcome) { forward(job, .finished(outcome)) }
}

extension Job {
    /// A new sequence of the job's lifecycle events from now on, ending after `finished`.
    ///
    /// ```swift
    /// for await event in job.events() { print(event) }
    /// ```
    ///
    /// Each call adds an observer: make the sequence before adding the job to a queue to see every
    /// event. On a finished job it yields `finished` and ends. It also ends, without `finished`, when
    /// the job is released unfinished (never added to a queue, or a child of a group that never ran).
    public func events() -> AsyncStream<JobLifecycleEvent> {
        let (stream, continuation) = AsyncStream<JobLifecycleEvent>.makeStream()
        let end = StreamEnd(continuation)
        addObserver(
            EventForwarder { _, event in
                end.continuation.yield(event)
                if case .finished = event { end.continuation.finish() }
            })
        return stream
    }
}

/// Ends a job's event stream when its observer is released: an `AsyncStream` whose continuation is
/// released unfinished keeps its iterators waiting for ever. (A job lets its observers go after its
/// finish — the stream has ended then — or when it is released unfinished; never under a lock.)
private final class StreamEnd: Sendable {
    let continuation: AsyncStream<JobLifecycleEvent>.Continuation
    init(_ continuation: AsyncStream<JobLifecycleEvent>.Continuation) { self.continuation = continuation }
    deinit { continuation.finish() }
}
