/// A job whose body is `async`.
///
/// ```swift
/// let parse = AsyncJob { job in try await parseFeed(cancelled: job.isCancelled) }
/// ```
///
/// The body runs in a new `Task` with a priority that matches the job's. Cancelling the job cancels
/// that task, so `Task.isCancelled`, `Task.checkCancellation()` and cancellation-aware awaits inside
/// the body see it. The job holds its queue slot until the body returns.
///
/// Subclasses may override ``perform()`` instead of passing a closure.
open class AsyncJob: Job, @unchecked Sendable {
    // @unchecked Sendable: `body` and `task` are guarded by the job's lock.
    @exclusivity(unchecked) private var body: (@Sendable (AsyncJob) async throws -> Void)?
    @exclusivity(unchecked) private var task: Task<Void, Never>?

    /// Creates a job that runs `body`.
    public init(
        name: String? = nil, priority: JobPriority = .normal,
        _ body: @escaping @Sendable (AsyncJob) async throws -> Void
    ) {
        self.body = body
        super.init(name: name, priority: priority)
    }

    /// Creates a job for a subclass that overrides ``perform()``.
    public override init(name: String? = nil, priority: JobPriority = .normal) {
        super.init(name: name, priority: priority)
    }

    /// The job's work. The default runs the closure given to the initializer.
    open func perform() async throws {
        let body = mutex.withLock { self.body }
        try await body?(self)
    }

    override var finishesWhenExecuteReturns: Bool { false }

    public final override func execute() throws {
        let task = Task(priority: priority.taskPriority) {
            do {
                try await self.perform()
                self.complete(error: nil, onWorker: false)
            } catch {
                self.complete(error: error, onWorker: false)
            }
        }
        let cancelled = mutex.withLock {
            if machine.state == .executing { self.task = task }
            return machine.isCancelled
        }
        if cancelled { task.cancel() }
    }

    override func interruptBody() {
        mutex.withLock { task }?.cancel()
    }

    override func dropClosures(executed: Bool) {
        mutex.withLock {
            body = nil
            task = nil
        }
    }
}
