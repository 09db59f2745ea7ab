/// Back-pressure: a bound on a queue's unfinished jobs, which producers wait under or are refused over.
extension JobQueue {
    /// The bound on unfinished jobs (added and not finished) that producers respect: while the queue
    /// holds this many, ``addWhenRoom(_:)-([Job])`` waits and ``tryAdd(_:)-([Job])`` refuses. `nil`
    /// (the default): no bound.
    ///
    /// ``add(_:)-([Job])`` ignores the bound (it never waits), and what it adds counts. Dependencies
    /// that conditions generate join with the jobs that asked for them and count from then on, but
    /// are not waited for. A batch larger than the bound is let in once the queue is empty, alone.
    /// Raising the bound lets waiting producers in at once. A job counts until its finish has been
    /// handed over: its own `onFinish` observers run while it still counts, so a `tryAdd` from one of
    /// them on a full queue is refused (refill from outside the finishing job, or with
    /// ``addWhenRoom(_:)-([Job])``).
    ///
    /// ```swift
    /// let queue = JobQueue(name: "import", maxConcurrentJobs: 8, maxUnfinishedJobs: 10_000)
    /// for try await record in records {
    ///     try await queue.addWhenRoom(BlockJob { store(record) })  // waits while 10,000 are unfinished
    /// }
    /// ```
    ///
    /// - Precondition: nil or at least 1.
    public var maxUnfinishedJobs: Int? {
        get { lock.withLock { admission.limit } }
        set {
            if let newValue, newValue < 1 {
                fatalError("Baton: maxUnfinishedJobs of queue '\(name)' must be at least 1 (or nil), not \(newValue).")
            }
            let admitted = lock.withLock {
                admission.limit = newValue
                return admission.admitWaiting(unfinished: scheduler.members.count)
            }
            for producer in admitted { producer.resume() }
        }
    }

    /// Adds a job once the queue has room under ``maxUnfinishedJobs``; see ``addWhenRoom(_:)-([Job])``.
    public func addWhenRoom(_ job: Job) async throws {
        try await addWhenRoom([job])
    }

    /// Adds jobs once the queue has room for all of them under ``maxUnfinishedJobs``, waiting (without
    /// blocking a thread) while it has not. Producers that wait are let in first come, first served: a
    /// small batch does not overtake a large one that asked first, and the jobs of producers let in
    /// reach the queue in the order the producers asked (one adds at a time). Without a bound it does
    /// not wait.
    ///
    /// Jobs count from when they are added: `waitUntilAllJobsAreFinished()` may return while a
    /// producer that was let in has yet to add its jobs. A job of this queue that waits here for room
    /// in its own queue waits for itself once the bound is full of such jobs: produce from outside
    /// the bounded queue.
    ///
    /// - Throws: `CancellationError` if the calling task is cancelled before the jobs could be added
    ///   (also without a bound): while it waits for room, or for producers let in before it to add
    ///   theirs; then none of them was added, and the room it was given goes to those behind it. Once it
    ///   returns, they all were (see ``add(_:)-([Job])``).
    public func addWhenRoom(_ jobs: [Job]) async throws {
        guard !jobs.isEmpty else { return }
        let ticket = Admission.Ticket(count: jobs.count)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let arrival = lock.withLock {
                    admission.arrive(ticket, unfinished: scheduler.members.count, continuation)
                }
                switch arrival {
                case .admitted: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .waiting: break
                }
            }
        } onCancel: {
            let (cancelled, admitted) = lock.withLock {
                let cancelled = admission.cancel(ticket)
                // Those behind it may have room now.
                return (cancelled, admission.admitWaiting(unfinished: scheduler.members.count))
            }
            cancelled?.resume(throwing: CancellationError())
            for producer in admitted { producer.resume() }
        }
        addAdmitted(jobs, ticket)
    }

    /// Adds a job if the queue has room under ``maxUnfinishedJobs`` and no producer waits for room;
    /// see ``tryAdd(_:)-([Job])``.
    @discardableResult
    public func tryAdd(_ job: Job) -> Bool {
        tryAdd([job])
    }

    /// Adds jobs if the queue has room for all of them under ``maxUnfinishedJobs`` and no producer waits
    /// for room (it does not overtake them); otherwise adds none and returns `false`. Never waits.
    @discardableResult
    public func tryAdd(_ jobs: [Job]) -> Bool {
        guard !jobs.isEmpty else { return true }
        let ticket = Admission.Ticket(count: jobs.count)
        let admitted = lock.withLock { admission.tryAdmit(ticket, unfinished: scheduler.members.count) }
        guard admitted else { return false }
        addAdmitted(jobs, ticket)
        return true
    }

    /// Producers in the line for room, cancelled ones not yet swept included (for tests).
    var linedUpProducersForTesting: Int { lock.withLock { admission.lineLength } }

    /// Room reserved for producers let in that have not added their jobs yet (for tests).
    var reservedRoomForTesting: Int { lock.withLock { admission.reserved } }

    /// Adds the jobs of a producer whose turn it is, then gives back the room it reserved (they count
    /// as unfinished now), letting in whoever now has room and resuming the next producer to add.
    private func addAdmitted(_ jobs: [Job], _ ticket: Admission.Ticket) {
        add(jobs)
        let next = lock.withLock { admission.added(ticket, unfinished: scheduler.members.count) }
        for producer in next { producer.resume() }
    }
}
