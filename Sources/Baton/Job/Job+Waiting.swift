import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Job {
    /// The job's outcome, once it finished.
    ///
    /// Waits without blocking a thread. Cancelling the awaiting `Task` does **not** cancel the job —
    /// a job may have many waiters, and one of them going away is no reason to stop the work for the
    /// others — and the wait goes on until the job finishes (every job in a queue does). To cancel the
    /// job with the task, use ``outcomeCancellingWithTask()``. When it returns, the job reports
    /// ``isFinished`` (and so does every child of a group): it handed back its exclusivity categories,
    /// and nothing its closures and observers captured is kept alive by Baton any more.
    public var outcome: JobOutcome {
        get async {
            await withCheckedContinuation { (continuation: CheckedContinuation<JobOutcome, Never>) in
                let outcome: JobOutcome? = withCore { core in
                    if core.lifecycle.isFinished && !core.completing { return core.lifecycle.outcome }
                    core.waiters.append(.continuation(continuation))
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        }
    }

    /// The job's outcome, cancelling the job if the awaiting `Task` is cancelled first.
    ///
    /// The job is cancelled with the task's `CancellationError` as reason; this still waits for it
    /// to finish, so the outcome is always the job's real one.
    public func outcomeCancellingWithTask() async -> JobOutcome {
        await withTaskCancellationHandler {
            await outcome
        } onCancel: {
            cancel(reason: CancellationError())
        }
    }

    /// Blocks the calling thread until the job finished, and returns its outcome.
    ///
    /// Called from one of the job's own finish observers (``onFinish(_:)``), which run before the job
    /// reports ``isFinished``, it returns the outcome they are being told at once: waiting there would
    /// wait for itself.
    ///
    /// - Important: Never call it from the thread that must run the job (for example the main thread
    ///   for ``JobQueue/main``), or it waits forever.
    @available(*, noasync, message: "Use 'await job.outcome' instead")
    @discardableResult
    public func waitUntilFinished() -> JobOutcome {
        if let outcome = FinishDelivery.outcome(of: self) { return outcome }
        let semaphore = DispatchSemaphore(value: 0)
        // Code that runs while this thread completes a job (a deinit, an instrument) must not wait for
        // that completion to end: it gets the outcome at once. (The mark is the thread's, not the job's:
        // such code waiting for another job completing elsewhere gets its outcome at once too.)
        let inHandOver = CompletingThread.isCompleting
        let outcome: JobOutcome? = withCore { core in
            if core.lifecycle.isFinished && (!core.completing || inHandOver) {
                return core.lifecycle.outcome
            }
            core.waiters.append(.semaphore(semaphore))
            return nil
        }
        if let outcome { return outcome }
        semaphore.wait()
        return withCore { $0.lifecycle.outcome! }
    }
}

/// The finishes being told to observers on the current thread (innermost first), so that a job's own
/// finish observer that waits for the job gets its outcome instead of waiting for itself.
final class FinishDelivery {
    let job: ObjectIdentifier
    let outcome: JobOutcome
    let outer: FinishDelivery?

    private init(job: ObjectIdentifier, outcome: JobOutcome, outer: FinishDelivery?) {
        self.job = job
        self.outcome = outcome
        self.outer = outer
    }

    /// Runs `body` (the observers of `job`'s finish) with the finish recorded for this thread.
    static func telling(_ job: Job, _ outcome: JobOutcome, _ body: () -> Void) {
        let delivery = FinishDelivery(job: ObjectIdentifier(job), outcome: outcome, outer: current)
        current = delivery
        defer { current = delivery.outer }
        withExtendedLifetime(delivery) { body() }
    }

    /// The outcome of `job`'s finish if this thread is telling it to observers.
    static func outcome(of job: Job) -> JobOutcome? {
        var delivery = current
        while let each = delivery {
            if each.job == ObjectIdentifier(job) { return each.outcome }
            delivery = each.outer
        }
        return nil
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key, nil)
        precondition(rc == 0, "Baton: pthread_key_create failed with \(rc)")
        return key
    }()

    /// Not retained: `telling` keeps it alive while it is set.
    private static var current: FinishDelivery? {
        get { pthread_getspecific(key).map { Unmanaged<FinishDelivery>.fromOpaque($0).takeUnretainedValue() } }
        set { pthread_setspecific(key, newValue.map { Unmanaged.passUnretained($0).toOpaque() }) }
    }
}

/// Whether the current thread is completing a job (see `Job.complete`), so that a synchronous wait
/// for a job whose completion is under way does not wait for itself.
enum CompletingThread {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key, nil)
        precondition(rc == 0, "Baton: pthread_key_create failed with \(rc)")
        return key
    }()

    static var isCompleting: Bool { pthread_getspecific(key) != nil }

    /// Marks the thread as completing; returns whether this call set the mark (an outer completion on
    /// the same thread may have), to be passed to ``unmark(_:)``.
    static func mark() -> Bool {
        if isCompleting { return false }
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
        return true
    }

    /// Ends what ``mark()`` began.
    static func unmark(_ marked: Bool) {
        if marked { pthread_setspecific(key, nil) }
    }
}
