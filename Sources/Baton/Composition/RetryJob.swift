/// Runs a job made by a factory, and again — up to `maxAttempts` times in all — while it fails with an
/// error worth retrying, waiting by a ``Backoff`` between attempts.
///
/// ```swift
/// let fetch = RetryJob(name: "fetch", maxAttempts: 3, backoff: .exponential(initial: .seconds(1))) { attempt in
///     ValueJob<Data>(name: "fetch #\(attempt)") { _ in try await download() }
/// }
/// ```
///
/// Each attempt is a child, reported to the retry job's observers as a produced job (the first one
/// included). An attempt that fails, or is cancelled on its own (its timeout, say), is retried while
/// attempts are left and `retryIf` agrees. The retry job succeeds when an attempt succeeds, and
/// otherwise fails with ``RetryJob/Failure``, which carries the last attempt's error. Cancelling the
/// retry job cancels the running attempt and stops retrying: it then finishes cancelled, like any
/// other job — also when the cancel comes just after an attempt failed that would have been retried
/// (an attempt that failed for good, with no attempt left or `retryIf` saying no, still fails it).
/// The clock is injectable so tests never sleep.
public final class RetryJob: GroupJob, @unchecked Sendable {
    // @unchecked Sendable: `attemptCount`, `lastAttempt` and `lastOutcome` are guarded by the job's lock.
    public let maxAttempts: Int
    private let backoff: Backoff
    /// The caller's closures, guarded by the job's lock; dropped (with what they captured) as the job
    /// finishes, before its waiters resume.
    @exclusivity(unchecked) private var closures: Closures?
    @exclusivity(unchecked) private var attemptCount = 0
    @exclusivity(unchecked) private var lastAttempt: Job?
    @exclusivity(unchecked) private var lastOutcome: JobOutcome?
    /// The cancel stopped the retries: the last attempt failed with attempts left and an error worth
    /// retrying (the retry job finishes cancelled, not failed).
    @exclusivity(unchecked) private var retryStoppedByCancel = false

    /// Why a retry job failed.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// The retry job's name.
        public let jobName: String
        public let attempts: Int
        /// The last attempt's error.
        public let lastError: any Error
        public var description: String {
            "job '\(jobName)' failed after \(attempts) attempt\(attempts == 1 ? "" : "s"): \(lastError)"
        }
    }

    /// - Parameters:
    ///   - name: Used in diagnostics and errors.
    ///   - maxAttempts: Attempts in all, the first included (at least 1).
    ///   - backoff: How long to wait before each attempt after the first.
    ///   - clock: The clock the waits are measured on (a manual one in tests).
    ///   - shouldRetry: `retryIf:`, whether an attempt's error is worth another attempt (default: always).
    ///   - makeAttempt: Makes attempt number `n` (from 1).
    public init<C: Clock>(
        name: String? = nil, maxAttempts: Int, backoff: Backoff = .immediate, clock: C,
        retryIf shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true },
        makeAttempt: @escaping @Sendable (_ attempt: Int) -> Job
    ) where C.Duration == Duration, C: Sendable {
        if maxAttempts < 1 { fatalError("Baton: a retry job needs at least 1 attempt, not \(maxAttempts).") }
        self.maxAttempts = maxAttempts
        self.backoff = backoff
        closures = Closures(
            sleep: { try await clock.sleepAnyLength(for: $0) }, shouldRetry: shouldRetry, makeAttempt: makeAttempt)
        super.init(name: name, maxConcurrentChildren: 1)
        let first = makeAttempt(1)
        attemptCount = 1
        lastAttempt = first
        addChild(first)
        onStart { job in (job as? RetryJob)?.announceFirst() }
    }

    /// Retries on the continuous clock.
    public convenience init(
        name: String? = nil, maxAttempts: Int, backoff: Backoff = .immediate,
        retryIf shouldRetry: @escaping @Sendable (any Error) -> Bool = { _ in true },
        makeAttempt: @escaping @Sendable (_ attempt: Int) -> Job
    ) {
        self.init(
            name: name, maxAttempts: maxAttempts, backoff: backoff, clock: ContinuousClock(), retryIf: shouldRetry,
            makeAttempt: makeAttempt)
    }

    /// How many attempts were made so far.
    public var attempts: Int { mutex.withLock { attemptCount } }

    private func announceFirst() {
        if let first = mutex.withLock({ lastAttempt }) { announce(first) }
    }

    public override func childDidFinish(_ child: Job, outcome: JobOutcome) {
        let (isLast, attempt, cancelled, replaced, closures) = withCore {
            core -> (Bool, Int, Bool, JobOutcome?, Closures?) in
            guard child === lastAttempt else { return (false, 0, false, nil, nil) }
            // The replaced outcome is let go of after unlocking: its error may hold the last reference
            // to anything.
            defer { lastOutcome = outcome }
            return (true, attemptCount, core.lifecycle.isCancelled, lastOutcome, self.closures)
        }
        _ = replaced
        // User code (the predicate and the factory) runs outside the lock.
        guard isLast, let error = outcome.error, attempt < maxAttempts, let closures, closures.shouldRetry(error)
        else { return }
        if cancelled {
            mutex.withLock { retryStoppedByCancel = true }
            return
        }
        let next = closures.makeAttempt(attempt + 1)
        let previous: Job? = mutex.withLock {
            attemptCount = attempt + 1
            defer { lastAttempt = next }
            return lastAttempt
        }
        _ = previous  // dropped outside the lock
        next.addBackoff(backoff.delay(beforeAttempt: attempt + 1), sleep: closures.sleep)
        addChild(next)
    }

    public override func errorAfterChildren(failures: [GroupJobError.Failure]) -> (any Error)? {
        let (last, attempts, cancelled, stopped) = withCore { core in
            (lastOutcome, attemptCount, core.lifecycle.isCancelled, retryStoppedByCancel)
        }
        switch last {
        case nil, .succeeded?:
            return nil
        case .failed(let error)?:
            // Cancelled after an attempt failed that would have been retried: the cancel is why it stopped.
            return stopped ? CancellationError() : Failure(jobName: name, attempts: attempts, lastError: error)
        case .cancelled(let reason)?:
            // Cancelled with the retry job: the retry job is cancelled. On its own, with no attempt left:
            // a failure like any other.
            return cancelled ? CancellationError() : Failure(jobName: name, attempts: attempts, lastError: reason)
        }
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        let last = mutex.withLock { (lastAttempt.take(), closures.take()) }
        _ = last  // dropped outside the lock
        return super.didComplete(outcome: outcome, executed: executed, extras: extras)
    }

    private struct Closures {
        let sleep: @Sendable (Duration) async throws -> Void
        let shouldRetry: @Sendable (any Error) -> Bool
        let makeAttempt: @Sendable (Int) -> Job
    }
}

/// Runs a job, then — while `next` returns one — the next, waiting by a ``Backoff`` in between: paging
/// ("fetch the next page while there is one") and polling.
///
/// ```swift
/// let pages = RepeatJob(name: "pages", first: fetchPage(1)) { previous, outcome in
///     guard outcome.didSucceed, let next = (previous as? PageJob)?.nextPage else { return nil }
///     return fetchPage(next)
/// }
/// ```
///
/// Each iteration is a child (see ``GroupJob``); the repeat job fails if any iteration failed.
/// Cancelling it cancels the running iteration and stops the repetition: it then finishes cancelled
/// (failed, if an iteration failed).
public final class RepeatJob: GroupJob, @unchecked Sendable {
    // @unchecked Sendable: `latest` and `iterations` are guarded by the job's lock.
    private let backoff: Backoff
    /// The caller's closure and the clock's sleep, guarded by the job's lock; dropped as the job
    /// finishes, before its waiters resume.
    @exclusivity(unchecked) private var closures:
        (
            sleep: @Sendable (Duration) async throws -> Void,
            next: @Sendable (_ previous: Job, _ outcome: JobOutcome) -> Job?
        )?
    @exclusivity(unchecked) private var latest: Job?  // guarded by the job's lock
    @exclusivity(unchecked) private var iterationCount = 1
    /// The cancel stopped the repetition before `next` was asked for the following iteration.
    @exclusivity(unchecked) private var stoppedByCancel = false

    public init<C: Clock>(
        name: String? = nil, backoff: Backoff = .immediate, clock: C, first: Job,
        next: @escaping @Sendable (_ previous: Job, _ outcome: JobOutcome) -> Job?
    ) where C.Duration == Duration, C: Sendable {
        self.backoff = backoff
        closures = (sleep: { try await clock.sleepAnyLength(for: $0) }, next: next)
        super.init(name: name, children: [first], maxConcurrentChildren: 1)
        latest = first
    }

    public convenience init(
        name: String? = nil, backoff: Backoff = .immediate, first: Job,
        next: @escaping @Sendable (_ previous: Job, _ outcome: JobOutcome) -> Job?
    ) {
        self.init(name: name, backoff: backoff, clock: ContinuousClock(), first: first, next: next)
    }

    /// How many iterations were started so far.
    public var iterations: Int { mutex.withLock { iterationCount } }

    /// A poll may run for ever: finished iterations are let go of (``GroupJob/childJobs`` lists the
    /// current one).
    override var keepsFinishedChildren: Bool { false }

    public override func childDidFinish(_ child: Job, outcome: JobOutcome) {
        let (isLatest, cancelled, closures) = withCore { core in
            (child === latest, core.lifecycle.isCancelled, self.closures)
        }
        guard isLatest else { return }
        if cancelled {
            mutex.withLock { stoppedByCancel = true }
            return
        }
        guard let closures, let following = closures.next(child, outcome) else { return }
        let (number, previous): (Int, Job?) = mutex.withLock {
            iterationCount += 1
            defer { latest = following }
            return (iterationCount, latest)
        }
        _ = previous  // dropped outside the lock
        following.addBackoff(backoff.delay(beforeAttempt: number), sleep: closures.sleep)
        addChild(following)
    }

    /// Failed if an iteration failed; otherwise cancelled if a cancel stopped it before `next` said it
    /// was done (as a ``RetryJob`` that a cancel stopped).
    public override func errorAfterChildren(failures: [GroupJobError.Failure]) -> (any Error)? {
        if let failure = super.errorAfterChildren(failures: failures) { return failure }
        return mutex.withLock { stoppedByCancel } ? CancellationError() : nil
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        let last = mutex.withLock { (latest.take(), closures.take()) }
        _ = last  // dropped outside the lock
        return super.didComplete(outcome: outcome, executed: executed, extras: extras)
    }
}
