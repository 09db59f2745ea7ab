import Dispatch

extension Job {
    /// The job's outcome, once it finished.
    ///
    /// Waits without blocking a thread. Cancelling the awaiting `Task` does **not** cancel the job —
    /// a job may have many waiters, and one of them going away is no reason to stop the work for the
    /// others — and the wait goes on until the job finishes (every job in a queue does). To cancel the
    /// job with the task, use ``outcomeCancellingWithTask()``. When it returns, the job reports
    /// ``isFinished`` (and so does every child of a group).
    public var outcome: JobOutcome {
        get async {
            await withCheckedContinuation { (continuation: CheckedContinuation<JobOutcome, Never>) in
                let outcome: JobOutcome? = withCore { core in
                    if core.lifecycle.isFinished { return core.lifecycle.outcome }
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
    /// - Important: Never call it from the thread that must run the job (for example the main thread
    ///   for ``JobQueue/main``), or it waits forever.
    @available(*, noasync, message: "Use 'await job.outcome' instead")
    @discardableResult
    public func waitUntilFinished() -> JobOutcome {
        let semaphore = DispatchSemaphore(value: 0)
        let outcome: JobOutcome? = withCore { core in
            if core.lifecycle.isFinished { return core.lifecycle.outcome }
            core.waiters.append(.semaphore(semaphore))
            return nil
        }
        if let outcome { return outcome }
        semaphore.wait()
        return withCore { $0.lifecycle.outcome! }
    }
}
