/// A job that finishes when you say so, not when ``Job/execute()`` returns — the classic
/// "asynchronous operation" for work that completes in a callback.
///
/// ```swift
/// final class Fetch: AsynchronousJob {
///     override func execute() {
///         client.fetch { result in self.finish(result.error) }
///     }
/// }
/// ```
///
/// If ``Job/execute()`` throws, the job fails at once and must not be finished again.
open class AsynchronousJob: Job, @unchecked Sendable {
    // @unchecked Sendable: no stored properties of its own.

    override var finishesWhenExecuteReturns: Bool { false }

    /// Finishes the job: succeeded with `nil`, failed with an error (or cancelled, if it was asked to
    /// cancel or `error` is a `CancellationError`).
    ///
    /// - Precondition: The job is executing, and this is the first call. Finishing twice is a bug in
    ///   the calling code, like resuming a continuation twice, and stops the program.
    public final func finish(_ error: (any Error)? = nil) {
        complete(error: error, onWorker: false)
    }
}

/// A job whose closure receives a completion handle, for wrapping callback-based APIs.
///
/// ```swift
/// let job = CallbackJob { job, done in
///     legacyClient.download(url) { error in done(error) }
/// }
/// ```
///
/// Call `done` exactly once. The closure is dropped once the job finished.
public final class CallbackJob: AsynchronousJob, @unchecked Sendable {
    // @unchecked Sendable: `body` is guarded by the job's lock.
    @exclusivity(unchecked) private var body: (@Sendable (CallbackJob, Completion) -> Void)?

    /// The handle passed to the closure; call it once when the work is done.
    public struct Completion: Sendable {
        let job: CallbackJob

        /// Finishes the job: succeeded with `nil`, failed with an error.
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

    public init(
        name: String? = nil, priority: JobPriority = .normal,
        _ body: @escaping @Sendable (CallbackJob, Completion) -> Void
    ) {
        self.body = body
        super.init(name: name, priority: priority)
    }

    public override func execute() {
        let body = mutex.withLock { self.body }
        body?(self, Completion(job: self))
    }

    override func dropClosures(executed: Bool) {
        mutex.withLock { body = nil }
    }
}
