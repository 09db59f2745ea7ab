public import Foundation

/// A Foundation `Operation` as a Baton job: the job finishes when the operation finishes.
///
/// - ``init(name:running:)``: executing the job runs the operation (on a private `OperationQueue`);
///   cancelling the job cancels the operation.
/// - ``watching(_:name:)``: a job that only waits for an operation that something else runs (for
///   example your own `OperationQueue`); it needs no Baton queue.
///
/// Completion is detected with a Foundation dependency (a tiny operation that depends on the wrapped
/// one), never with KVO, so it works on Linux, where Foundation has none. The job succeeds, or reports
/// cancelled if the operation was cancelled.
public final class OperationJob: CallbackJob, @unchecked Sendable {
    // @unchecked Sendable: `wrapped` is guarded by the job's lock (the operation is Foundation's
    // thread-safe Operation).
    @exclusivity(unchecked) private var wrapped: Operation?
    private let runsOperation: Bool

    /// The operation, until the job finished: it is let go of then (with what its block captured),
    /// before the job's waiters resume.
    public var operation: Operation? { mutex.withLock { wrapped } }

    /// A job that runs `operation` when it executes.
    public init(name: String? = nil, running operation: Operation) {
        wrapped = operation
        runsOperation = true
        super.init(name: name ?? operation.name ?? "Operation")
    }

    private init(name: String?, observing operation: Operation) {
        wrapped = operation
        runsOperation = false
        super.init(name: name ?? operation.name ?? "Operation")
    }

    /// Starts watching `operation`, which something else runs, and returns a job that finishes when it
    /// does. The job is running already (it is not meant to be added to a queue); make Baton jobs
    /// depend on it (see ``Job/addDependency(_:)-(Operation)``).
    public static func watching(_ operation: Operation, name: String? = nil) -> OperationJob {
        let job = OperationJob(name: name, observing: operation)
        try? job.start()  // a new job with no dependencies always starts
        return job
    }

    public override func execute() {
        guard let operation = mutex.withLock({ wrapped }) else { return }
        // The finisher lets go of the operation before it finishes the job, so that the job's waiters
        // do not resume while Baton still keeps the operation (and what its block captured) alive.
        let finisher = BlockOperation()
        finisher.addExecutionBlock { [self, weak finisher, weak operation] in
            let cancelled = operation?.isCancelled ?? false
            if let operation { finisher?.removeDependency(operation) }
            finish(cancelled ? CancellationError() : nil)
        }
        finisher.addDependency(operation)
        let queue = OperationQueue()
        queue.name = "Baton.OperationJob"
        queue.addOperations(runsOperation ? [operation, finisher] : [finisher], waitUntilFinished: false)
    }

    public override func didCancel(reason: any Error) {
        if runsOperation { mutex.withLock { wrapped }?.cancel() }
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        let operation = mutex.withLock { wrapped.take() }
        _ = operation  // dropped outside the lock
        return super.didComplete(outcome: outcome, executed: executed, extras: extras)
    }
}

extension Job {
    /// Makes this job wait until a Foundation `Operation` finished, whatever runs it.
    @discardableResult
    public func addDependency(_ operation: Operation) -> Bool {
        addDependency(OperationJob.watching(operation))
    }

    /// This job as a Foundation `Operation`, for APIs that want one: running the operation runs the
    /// job on the operation's thread and waits for it to finish.
    ///
    /// - Important: The job must not be in a Baton queue, and its Baton dependencies must have finished
    ///   when the operation runs (use Foundation dependencies on the operation instead). A job that
    ///   cannot start finishes the operation at once; ``JobRunnerOperation/startError`` says why.
    public func asOperation() -> JobRunnerOperation {
        JobRunnerOperation(job: self)
    }
}

/// A Foundation `Operation` that runs a Baton job (see ``Job/asOperation()``).
public final class JobRunnerOperation: Operation, @unchecked Sendable {
    // @unchecked Sendable: `job` is immutable and Sendable; `error` is guarded by `lock`.
    public let job: Job
    private let lock = Lock()
    private var error: JobError?
    /// Whether Foundation called `main()`.
    private var mainCalled = false

    init(job: Job) {
        self.job = job
        super.init()
        name = job.name
    }

    /// Why the job could not start, if it could not.
    public var startError: JobError? { lock.withLock { error } }

    public override func main() {
        lock.withLock { mainCalled = true }
        if isCancelled { job.cancel() }
        startJob()
    }

    /// Foundation does not call `main()` for an operation cancelled before it started: the job,
    /// cancelled with it, is then started here, so that it finishes (cancelled) instead of never.
    public override func start() {
        super.start()
        guard isCancelled, !lock.withLock({ mainCalled }) else { return }
        job.cancel()
        startJob()
    }

    private func startJob() {
        do {
            try job.start()
            job.waitUntilFinished()
        } catch {
            lock.withLock { self.error = error }
        }
    }

    public override func cancel() {
        super.cancel()
        job.cancel()
    }
}

@available(*, unavailable, renamed: "JobRunnerOperation")
public typealias JobOperation = JobRunnerOperation
