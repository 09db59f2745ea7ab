/// A job that finishes when you say so, not when ``Job/execute()`` returns: the classic "asynchronous
/// operation", for work that completes in a callback.
///
/// Give it a closure that receives a completion handle:
///
/// ```swift
/// let job = CallbackJob { job, done in
///     legacyClient.download(url) { error in done(error) }
/// }
/// ```
///
/// or subclass it and call ``finish(_:)``:
///
/// ```swift
/// final class Fetch: CallbackJob, @unchecked Sendable {
///     override func execute() {
///         client.fetch { result in self.finish(result.error) }
///     }
/// }
/// ```
///
/// Finish exactly once. If ``Job/execute()`` throws, the job fails at once and must not be finished
/// again. The closure is dropped once the job finished.
open class CallbackJob: Job, @unchecked Sendable {
    // @unchecked Sendable: `body` is guarded by the job's lock.
    @exclusivity(unchecked) private var body = Body()

    /// The closure, in a value of its own (see `AsyncJob.Body`).
    private struct Body {
        var run: (@Sendable (CallbackJob, Completion) -> Void)?
    }

    /// The handle passed to the closure; call it once when the work is done.
    public struct Completion: Sendable {
        let job: CallbackJob

        /// Finishes the job: succeeded with `nil`, failed with an error (cancelled with a `CancellationError`).
        public func callAsFunction(_ error: (any Error)? = nil) {
            job.finish(error)
        }

        /// Finishes the job from a `Result`, ignoring a success value.
        public func callAsFunction<Success>(_ result: Result<Success, any Error>) {
            switch result {
            case .success: job.finish(nil)
            case .failure(let error): job.finish(error)
            }
        }
    }

    /// Creates a job that runs `body`, which finishes it through the handle.
    public init(
        name: String? = nil, priority: JobPriority = .normal,
        _ body: @escaping @Sendable (CallbackJob, Completion) -> Void
    ) {
        self.body.run = body
        super.init(name: name, priority: priority)
    }

    /// Creates a job for a subclass that overrides ``Job/execute()`` and calls ``finish(_:)``.
    public override init(name: String? = nil, priority: JobPriority = .normal) {
        super.init(name: name, priority: priority)
    }

    override var finishesWhenExecuteReturns: Bool { false }

    override var handsOverAfterExecute: Bool { true }

    /// Runs the closure given to the initializer. Subclasses override it to start their work.
    /// The closure is taken out of the job: this call holds it until it returns, and the job's
    /// hand-over waits for that (a `done()` inside it, or from another thread meanwhile, resumes the
    /// job's waiters only once the closure and what it captured are released).
    open override func execute() throws {
        // Not once its outcome is decided (cancelled and finished by `didCancel` since it was started):
        // the closure is then dropped with the job's hand-over.
        let body = withCore { core in
            guard core.lifecycle.outcome == nil else { return Body() }
            defer { self.body = Body() }
            return self.body
        }
        body.run?(self, Completion(job: self))
    }

    /// Finishes the job: succeeded with `nil`, failed with an error, cancelled with a
    /// `CancellationError` (see ``Job/cancel(reason:)`` for what a cancel request changes).
    ///
    /// - Precondition: The job is executing, and this is the first call. Finishing twice is a bug in
    ///   the calling code, like resuming a continuation twice, and stops the program — except once the
    ///   job was asked to cancel: then ``Job/didCancel(reason:)`` and the work it stops may both finish
    ///   it, in either order, and the later call is ignored; a job cancelled before it was added or
    ///   started ignores a finish meanwhile (it finishes cancelled once added or started).
    ///
    /// A job finished by an observer of its start (``Job/onStart(_:)``) does not run its body.
    public final func finish(_ error: (any Error)? = nil) {
        bodyCompleted(error: error)
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        let body = mutex.withLock {
            defer { self.body = Body() }
            return self.body
        }
        _ = body  // dropped outside the lock
        return []
    }
}

@available(
    *, unavailable, renamed: "CallbackJob", message: "AsynchronousJob and CallbackJob are one type now: CallbackJob"
)
public typealias AsynchronousJob = CallbackJob
