extension Job {
    /// Cancels the job if it has not finished `limit` after its body started. (A cancel is a request:
    /// a body that never looks at it runs to its end; see <doc:UsingBaton>.)
    ///
    /// The job is cancelled with a ``JobError`` of code ``JobError/Code/timedOut`` that names the job
    /// and the limit as reason (its body is told as for any cancel; a body that stops by throwing
    /// `CancellationError` finishes cancelled with that reason). Pass a manual clock in tests so they
    /// never sleep.
    ///
    /// - Precondition: `limit` is positive (a zero or negative limit is a bug in the calling code — it
    ///   would cancel every job at once — and stops the program with a message naming the job; for no
    ///   limit, don't add a timeout). Call before the job starts.
    public func addTimeout<C: Clock>(_ limit: Duration, clock: C) where C.Duration == Duration, C: Sendable {
        if limit <= .zero {
            fatalError(
                "Baton: the timeout of job '\(name)' must be positive, not \(limit). For no time limit, don't call addTimeout."
            )
        }
        let timer = TimerBox()
        addObserver(
            BlockObserver(
                onStart: { job in
                    let task = Task {
                        do {
                            try await clock.sleepAnyLength(for: limit)
                        } catch {
                            return  // the job finished first
                        }
                        job.cancel(
                            reason: JobError(
                                code: .timedOut, jobs: [job.name],
                                message: "job '\(job.name)' timed out: it ran longer than its limit of \(limit)."
                            ))
                    }
                    timer.set(task)
                },
                onFinish: { _, _ in timer.cancel() }
            ))
    }

    /// Cancels the job if it has not finished `limit` after its body started, on the continuous clock.
    public func addTimeout(_ limit: Duration) {
        addTimeout(limit, clock: ContinuousClock())
    }
}

/// Holds a timer task so the finish observer can cancel it.
final class TimerBox: @unchecked Sendable {
    // @unchecked Sendable: `task` and `cancelled` are guarded by `lock`.
    private let lock = Lock()
    @exclusivity(unchecked) private var task: Task<Void, Never>?
    @exclusivity(unchecked) private var cancelled = false

    func set(_ task: Task<Void, Never>) {
        let cancelNow = lock.withLock {
            self.task = task
            return cancelled
        }
        if cancelNow { task.cancel() }
    }

    func cancel() {
        let task: Task<Void, Never>? = lock.withLock {
            cancelled = true
            defer { self.task = nil }
            return self.task
        }
        task?.cancel()
    }
}

/// A job that only waits: it succeeds `duration` after it starts. Useful as a dependency ("not before
/// a minute has passed") and in tests with a manual clock.
public final class DelayJob: AsyncJob, @unchecked Sendable {
    // @unchecked Sendable: `sleep` is guarded by the job's lock.
    public let duration: Duration
    /// The clock's sleep (it holds the clock), dropped as the job finishes.
    @exclusivity(unchecked) private var sleep: (@Sendable (Duration) async throws -> Void)?

    public init<C: Clock>(name: String? = nil, _ duration: Duration, clock: C)
    where C.Duration == Duration, C: Sendable {
        self.duration = duration
        sleep = { try await clock.sleepAnyLength(for: $0) }
        super.init(name: name)
    }

    public convenience init(name: String? = nil, _ duration: Duration) {
        self.init(name: name, duration, clock: ContinuousClock())
    }

    public override func perform() async throws {
        let sleep = mutex.withLock { self.sleep }
        try await sleep?(duration)
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        let sleep = mutex.withLock { self.sleep.take() }
        _ = sleep  // dropped outside the lock
        return super.didComplete(outcome: outcome, executed: executed, extras: extras)
    }
}
