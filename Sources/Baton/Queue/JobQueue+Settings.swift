import Dispatch

/// The queue's settings, waits and event streams.
extension JobQueue {
    // MARK: Settings

    /// At most this many jobs execute at once. Raising it starts waiting jobs at once.
    ///
    /// - Precondition: At least 1.
    public var maxConcurrentJobs: Int {
        get { lock.withLock { scheduler.maxConcurrent } }
        set {
            if newValue < 1 {
                fatalError("Baton: maxConcurrentJobs of queue '\(name)' must be at least 1, not \(newValue).")
            }
            startWorkers(
                lock.withLock {
                    scheduler.maxConcurrent = newValue
                    return scheduler.workersToStart()
                })
        }
    }

    /// While `true`, no job starts; jobs already executing go on. Jobs still become ready, get
    /// cancelled and finish as usual.
    ///
    /// Once setting it to `true` has returned, no job is taken from the ready list, and a job the queue
    /// had taken that still waits for its exclusivity categories does not start either: when they are
    /// granted, it gives them and its slot back and returns to the ready list, to claim them again
    /// when the queue resumes. A suspended queue's jobs hold no category.
    public var isSuspended: Bool {
        get { lock.withLock { scheduler.isSuspended } }
        set {
            startWorkers(
                lock.withLock {
                    scheduler.isSuspended = newValue
                    return scheduler.workersToStart()
                })
        }
    }

    /// The number of unfinished jobs in the queue. A job that is finishing at this moment may still be
    /// counted; `waitUntilAllJobsAreFinished()` waits until none is.
    public var jobCount: Int { lock.withLock { scheduler.members.count } }

    /// The unfinished jobs, in the order they were created.
    public var jobs: [Job] {
        lock.withLock { Array(scheduler.members.values) }.filter { !$0.isFinished }.sorted { $0.id < $1.id }
    }

    /// Adds a closure as a ``BlockJob`` and returns the job.
    @discardableResult
    public func add(name: String? = nil, _ block: @escaping @Sendable () throws -> Void) -> BlockJob {
        let job = BlockJob(name: name, block)
        add(job)
        return job
    }

    // MARK: Cancelling and waiting

    /// Cancels every unfinished job of the queue; see ``Job/cancel(reason:)``.
    public func cancelAll(reason: (any Error)? = nil) {
        for job in lock.withLock({ Array(scheduler.members.values) }) {
            job.cancel(reason: reason)
        }
    }

    /// Blocks the calling thread until the queue has no unfinished job (each one finished and handed
    /// over, see ``Job/outcome``).
    ///
    /// Called from code that runs as part of a job's finish (its finish observers, the instruments told
    /// of it, the `deinit`s of what it lets go of), it must not wait for that job's own queue, nor for a
    /// queue holding jobs that wait for the finishing one: the queue counts them until the finish ends,
    /// so the wait would never return. It stops the program instead, naming the job ("BUG DETECTED").
    ///
    /// - Important: Never call it from a thread the queue needs (the main thread for ``main``).
    @available(*, noasync, message: "Use 'await queue.waitUntilAllJobsAreFinished()' instead")
    public func waitUntilAllJobsAreFinished() {
        let semaphore = DispatchSemaphore(value: 0)
        let inFinish = HandOverFrame.isActive
        let (empty, members): (Bool, [Job]) = lock.withLock {
            if scheduler.members.isEmpty { return (true, []) }
            idleWaiters.append(.semaphore(semaphore))
            return (false, inFinish ? Array(scheduler.members.values) : [])
        }
        guard !empty else { return }
        if inFinish { HandOverFrame.beforeBlocking("queue '\(name)'", roots: members, queue: self) }
        semaphore.wait()
    }

    /// Waits, without blocking a thread, until the queue has no unfinished job.
    ///
    /// Cancelling the awaiting task does not cancel the queue's jobs (use ``cancelAll(reason:)``).
    public func waitUntilAllJobsAreFinished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let empty = lock.withLock {
                if scheduler.members.isEmpty { return true }
                idleWaiters.append(.continuation(continuation))
                return false
            }
            if empty { continuation.resume() }
        }
    }

    /// A new sequence of the lifecycle events of every job added to the queue from now on, with the
    /// job. The sequence ends only when the queue is released; stop iterating (or drop it) when you have
    /// seen enough — while one is open, every job added takes the general way in, which costs a little more.
    public func events() -> AsyncStream<(Job, JobLifecycleEvent)> {
        let (stream, continuation) = AsyncStream<(Job, JobLifecycleEvent)>.makeStream()
        let id = streamsLock.withLock {
            nextStreamID += 1
            eventStreams[nextStreamID] = continuation
            return nextStreamID
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            let removed = self.streamsLock.withLock { self.eventStreams.removeValue(forKey: id) }
            _ = removed  // dropped outside the lock
        }
        return stream
    }

    // MARK: Diagnostics support

    func lockedSnapshot() -> (
        members: [Job], suspended: Bool, running: Int, limit: Int, bound: Int?, waitingProducers: Int
    ) {
        lock.withLock {
            (
                Array(scheduler.members.values), scheduler.isSuspended, scheduler.running, scheduler.maxConcurrent,
                admission.limit, admission.waitingCount
            )
        }
    }
}

/// Someone a queue resumes, outside its lock, once a finish is recorded: a wait for the queue to become
/// empty, or a producer let in.
enum IdleWaiter {
    case continuation(CheckedContinuation<Void, Never>)
    case semaphore(DispatchSemaphore)
    /// Not waiting for the queue to be empty: a producer let in under ``JobQueue/maxUnfinishedJobs``,
    /// resumed at the same point.
    case producer(CheckedContinuation<Void, any Error>)

    func resume() {
        switch self {
        case .continuation(let continuation): continuation.resume()
        case .semaphore(let semaphore): semaphore.signal()
        case .producer(let continuation): continuation.resume()
        }
    }
}
