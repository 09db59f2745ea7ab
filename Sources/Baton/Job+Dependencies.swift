extension Job {
    /// The jobs this job waits for. Empty once the job finished.
    public var dependencies: [Job] { mutex.withLock { dependencyList } }

    /// Makes this job wait until `dependency` finished, whatever its outcome.
    ///
    /// Dependencies may be in other queues. A dependency that never finishes (for example one never
    /// added to a queue) keeps this job waiting; ``JobQueue/snapshot()`` shows what it waits for.
    /// A dependency that closes a cycle is detected: every job in the cycle finishes failed with a
    /// ``JobError`` whose code is ``JobError/Code/dependencyCycle`` and whose message names the cycle.
    ///
    /// - Complexity: O(1) before the job is added to a queue. On a job already waiting in a queue,
    ///   the cycle check may visit the jobs connected to it.
    /// - Precondition: The job has not left `pending` (it has not started, been cancelled or finished),
    ///   and `dependency` is not the job itself. Breaking these is a bug in the calling code, so it
    ///   stops the program with a message that names both jobs.
    public func addDependency(_ dependency: Job) {
        precondition(dependency !== self, "Baton: job '\(name)' cannot depend on itself.")
        let action: JobStateMachine.AddDependencyAction = mutex.withLock {
            let action = machine.addDependency()
            if action == .record || action == .recordAndRegister { dependencyList.append(dependency) }
            return action
        }
        switch action {
        case .record:
            return
        case .tooLate(let state):
            preconditionFailure(
                "Baton: cannot make job '\(name)' depend on '\(dependency.name)': it is already \(state). Add dependencies before the job starts."
            )
        case .recordAndRegister:
            let unfinished = dependency.registerDependent(self, batch: 0, index: 0)
            if unfinished { CycleDetector.failCycles(through: [self]) }
            if !unfinished { Job.release([self]) }
        }
    }

    /// Adds several dependencies; see ``addDependency(_:)``.
    public func addDependencies(_ dependencies: some Sequence<Job>) {
        for dependency in dependencies { addDependency(dependency) }
    }

    /// Records `dependent` (member `index` of the `add` call `batch`) to be released when this job
    /// finishes. Returns `false` if this job has already finished (the dependent must not wait for it).
    func registerDependent(_ dependent: Job, batch: UInt64, index: Int) -> Bool {
        mutex.withLock {
            guard machine.state != .finished else { return false }
            dependentList.append(dependent)
            if !(batch != 0 && batchToken == batch && batchIndex < Int32(clamping: index)) { mayCloseCycle = true }
            return true
        }
    }

    /// Whether the job must be searched for cycles after its `add` call registered everything.
    func takeMayCloseCycle() -> Bool {
        mutex.withLock {
            defer { mayCloseCycle = false }
            return mayCloseCycle
        }
    }

    /// The fast way in: a job with no dependencies and no conditions, not cancelled, moves from
    /// `initialized` straight to `ready` on `queue` in one step. Returns its ready entry, or `nil` if it
    /// does not qualify (it then takes the general way, which also reports misuse).
    func enqueueReadyAtOnce(on queue: JobQueue) -> JobQueue.ReadyJob? {
        mutex.withLock {
            guard machine.state == .initialized, dependencyList.isEmpty, extras == nil, !machine.isCancelled else {
                return nil
            }
            _ = machine.enqueue(dependencies: 0, hasConditions: false)
            _ = machine.dependenciesFinished(1)
            owningQueue = queue
            return JobQueue.ReadyJob(id: id, priority: storedPriority)
        }
    }

    /// What ``enqueue(on:exclusivity:batch:index:)`` found.
    enum EnqueueOutcome {
        /// The job waits for these dependencies (it must register with them, then drop its hold).
        case waitsFor([Job])
        /// The job has no dependencies: it moved on at once (to ready, conditions, or finishing).
        case released(LockedRelease)
    }

    /// Moves the job to `pending` on `queue`; a job without dependencies moves on in the same step.
    /// - Precondition: the job is in no queue and has not finished.
    func enqueue(
        on queue: JobQueue, exclusivity categories: [ExclusivityCategory], batch: UInt64, index: Int
    )
        -> EnqueueOutcome
    {
        var problem: JobStateMachine.EnqueueResult = .enqueued
        var previous: JobQueue?
        let outcome: EnqueueOutcome? = mutex.withLock {
            problem = machine.enqueue(dependencies: dependencyList.count, hasConditions: hasConditionsLocked)
            guard problem == .enqueued else {
                previous = owningQueue
                return nil
            }
            owningQueue = queue
            exclusivity = categories
            if dependencyList.isEmpty { return .released(releaseLocked(1)) }
            batchToken = batch
            batchIndex = Int32(clamping: index)
            mayCloseCycle = !dependentList.isEmpty  // jobs enqueued earlier already wait for it
            return .waitsFor(dependencyList)
        }
        switch problem {
        case .enqueued:
            return outcome!
        case .alreadyFinished:
            preconditionFailure(
                "Baton: cannot add job '\(name)' to queue '\(queue.name)': it has already finished. Create a new job.")
        case .alreadyEnqueued(let state):
            let place = previous.map { "queue '\($0.name)'" } ?? "no queue (it was started by hand)"
            preconditionFailure(
                "Baton: cannot add job '\(name)' to queue '\(queue.name)': it is already \(state) in \(place). A job runs once; add it to one queue, once."
            )
        }
    }

    /// Whether the job is waiting for dependencies in a queue (a candidate member of a cycle), and if
    /// so the jobs it waits for and the jobs waiting for it.
    func pendingEdges() -> (dependencies: [Job], dependents: [Job])? {
        mutex.withLock {
            guard machine.state == .pending, machine.waitingFor > 0 else { return nil }
            return (dependencyList, dependentList)
        }
    }

    /// Fails every job of a dependency cycle that is still pending.
    ///
    /// All members move to `finishing` before any of them completes: completing one releases its
    /// dependents, and a member released that way must not become ready and run.
    static func failCycle(_ members: [Job], with error: JobError) {
        let steps: [FinishStep] = members.map { job in
            job.mutex.withLock { job.machine.failPending(error) ? job.finishStepLocked() : .nothing }
        }
        for (job, step) in zip(members, steps) {
            Job.release(job.perform(step))
        }
    }
}
