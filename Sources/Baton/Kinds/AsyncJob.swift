/// A job whose body is `async`.
///
/// ```swift
/// let parse = AsyncJob { job in try await parseFeed() }
/// ```
///
/// The body runs in a new `Task` with a priority that matches the job's. Cancelling the job cancels
/// that task, so `Task.isCancelled`, `Task.checkCancellation()` and cancellation-aware awaits inside
/// the body see it. The job holds its queue slot until the body returns.
///
/// Subclasses may override ``perform()`` instead of passing a closure.
open class AsyncJob: Job, @unchecked Sendable {
    // @unchecked Sendable: `body` and `task` are guarded by the job's lock.
    @exclusivity(unchecked) private var body = Body()
    @exclusivity(unchecked) private var task: Task<Void, Never>?

    /// The closure, in a value of its own: a closure returned on its own through the lock's generic
    /// result costs an allocation each way.
    private struct Body {
        var run: (@Sendable (AsyncJob) async throws -> Void)?
    }

    /// Creates a job that runs `body`.
    public init(
        name: String? = nil, priority: JobPriority = .normal,
        _ body: @escaping @Sendable (AsyncJob) async throws -> Void
    ) {
        self.body.run = body
        super.init(name: name, priority: priority)
    }

    /// Creates a job for a subclass that overrides ``perform()``.
    public override init(name: String? = nil, priority: JobPriority = .normal) {
        super.init(name: name, priority: priority)
    }

    /// The job's work. The default runs the closure given to the initializer.
    open func perform() async throws {
        let body = mutex.withLock { self.body }
        try await body.run?(self)
    }

    override var finishesWhenExecuteReturns: Bool { false }

    public final override func execute() throws {
        let priority = effectivePriority
        let task = Task(priority: priority.taskPriority) {
            do {
                try await self.perform()
                self.bodyCompleted(error: nil)
            } catch {
                self.bodyCompleted(error: error)
            }
        }
        // A cancel that came before the task was stored did not reach it: pass it on now.
        let (cancelled, raised) = withCore { core in
            // Not kept by a job whose body finished already (its hand-over may be over).
            if core.lifecycle.outcome == nil { self.task = task }  // guarded by the same lock
            return (core.lifecycle.isCancelled, core.effectivePriority)
        }
        if cancelled { task.cancel() }
        // Raised before the task was stored: the raise did not reach it.
        if raised > priority { Job.escalate(task, to: raised) }
    }

    override func escalateBody(to priority: JobPriority) {
        guard let task = mutex.withLock({ task }) else { return }
        Job.escalate(task, to: priority)
    }

    override func interruptBody(reason: any Error, _ work: inout Propagation) {
        mutex.withLock { task }?.cancel()
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        let (body, task) = mutex.withLock {
            defer { self.body = Body() }
            return (self.body, self.task.take())
        }
        _ = (body, task)  // dropped outside the lock
        return []
    }
}
