/// Something told about a job's lifecycle events.
///
/// Each event is delivered at most once per job, in lifecycle order (start, then cancel or produce,
/// then finish; a job cancelled before it started reports cancel then finish, with no start), on
/// whatever thread caused it, and never while Baton holds a lock. Events of one job are delivered one
/// at a time. Observers are dropped once the job finished.
///
/// All methods have empty default implementations; implement the ones you need.
public protocol JobObserver: Sendable {
    /// The job's body is about to run.
    func jobDidStart(_ job: Job)
    /// Someone asked the job to cancel while it was not yet finishing.
    func jobDidCancel(_ job: Job, reason: any Error)
    /// The job produced `newJob` (see ``Job/produce(_:)``).
    func job(_ job: Job, didProduce newJob: Job)
    /// The job reported progress (a fraction from 0 to 1), see ``Job/reportProgress(_:)``.
    func job(_ job: Job, didReportProgress fraction: Double)
    /// The job finished with `outcome`. Its dependents are released right after this returns.
    func jobDidFinish(_ job: Job, outcome: JobOutcome)
}

extension JobObserver {
    public func jobDidStart(_ job: Job) {}
    public func jobDidCancel(_ job: Job, reason: any Error) {}
    public func job(_ job: Job, didProduce newJob: Job) {}
    public func job(_ job: Job, didReportProgress fraction: Double) {}
    public func jobDidFinish(_ job: Job, outcome: JobOutcome) {}
}

/// An observer made of closures; any of them may be `nil`.
public struct BlockObserver: JobObserver {
    public var onStart: (@Sendable (Job) -> Void)?
    public var onCancel: (@Sendable (Job, any Error) -> Void)?
    public var onProduce: (@Sendable (Job, Job) -> Void)?
    public var onProgress: (@Sendable (Job, Double) -> Void)?
    public var onFinish: (@Sendable (Job, JobOutcome) -> Void)?

    public init(
        onStart: (@Sendable (Job) -> Void)? = nil,
        onCancel: (@Sendable (Job, any Error) -> Void)? = nil,
        onProduce: (@Sendable (Job, Job) -> Void)? = nil,
        onProgress: (@Sendable (Job, Double) -> Void)? = nil,
        onFinish: (@Sendable (Job, JobOutcome) -> Void)? = nil
    ) {
        self.onStart = onStart
        self.onCancel = onCancel
        self.onProduce = onProduce
        self.onProgress = onProgress
        self.onFinish = onFinish
    }

    public func jobDidStart(_ job: Job) { onStart?(job) }
    public func jobDidCancel(_ job: Job, reason: any Error) { onCancel?(job, reason) }
    public func job(_ job: Job, didProduce newJob: Job) { onProduce?(job, newJob) }
    public func job(_ job: Job, didReportProgress fraction: Double) { onProgress?(job, fraction) }
    public func jobDidFinish(_ job: Job, outcome: JobOutcome) { onFinish?(job, outcome) }
}

extension Job {
    /// Adds an observer.
    ///
    /// An observer added after some events were delivered receives only the later ones. One added
    /// after the job finished is told of the finish at once, on the calling thread, so that
    /// `job.onFinish { … }` never misses the outcome.
    public func addObserver(_ observer: some JobObserver) {
        let outcome: JobOutcome? = withCore { core in
            if core.lifecycle.isFinished { return core.lifecycle.outcome }
            core.observers.append(observer)
            if observer is FinishObserver { core.finishObservers += 1 }
            return nil
        }
        if let outcome { observer.jobDidFinish(self, outcome: outcome) }
    }

    /// Calls `body` when the job's body is about to run.
    public func onStart(_ body: @escaping @Sendable (Job) -> Void) {
        addObserver(BlockObserver(onStart: body))
    }

    /// Calls `body` when someone asks the job to cancel before it finishes.
    public func onCancel(_ body: @escaping @Sendable (Job, any Error) -> Void) {
        addObserver(BlockObserver(onCancel: body))
    }

    /// Calls `body` for each job this job produces.
    public func onProduce(_ body: @escaping @Sendable (Job, Job) -> Void) {
        addObserver(BlockObserver(onProduce: body))
    }

    /// Calls `body` with each progress report (a fraction from 0 to 1).
    public func onProgress(_ body: @escaping @Sendable (Double) -> Void) {
        addObserver(BlockObserver(onProgress: { _, fraction in body(fraction) }))
    }

    /// Calls `body` with the outcome when the job finishes (at once if it already has).
    public func onFinish(_ body: @escaping @Sendable (JobOutcome) -> Void) {
        addObserver(FinishObserver(body: body))
    }
}

/// The observer of ``Job/onFinish(_:)``: one closure, small enough to live inside the existential
/// without an allocation of its own.
struct FinishObserver: JobObserver {
    let body: @Sendable (JobOutcome) -> Void
    func jobDidFinish(_ job: Job, outcome: JobOutcome) { body(outcome) }
}
