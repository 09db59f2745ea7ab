import Dispatch

/// Something observers must be told, in lifecycle order.
enum ObserverEvent {
    case start
    case cancel(any Error)
    case produce(Job)
    case progress(Double)
    case finish(JobOutcome)
}

/// Someone waiting for a job to finish.
enum JobWaiter {
    case continuation(CheckedContinuation<JobOutcome, Never>)
    case semaphore(DispatchSemaphore)

    func resume(_ outcome: JobOutcome) {
        switch self {
        case .continuation(let continuation): continuation.resume(returning: outcome)
        case .semaphore(let semaphore): semaphore.signal()
        }
    }
}

/// What is left to do after a state change, once the lock is released.
enum FinishStep {
    case nothing
    /// Deliver pending observer events (and possibly the finish) in order.
    case drain
    /// The job finished with no observers to tell: release everything it held.
    case completed(Completion)

    struct Completion {
        let outcome: JobOutcome
        let dependents: [Job]
        let waiters: [JobWaiter]
        let queue: JobQueue?
        let heldSlot: Bool
        let onWorker: Bool
        let exclusivityScope: ExclusivityScope?
        let conditionTask: Task<Void, Never>?
    }
}

extension Job {
    // MARK: Observer events, delivered one at a time and in order

    /// Queues an observer event; returns whether the caller must deliver events (nobody else is).
    /// - Important: Call with the lock held.
    func appendEventLocked(_ event: ObserverEvent) -> Bool {
        pendingEvents.append(event)
        if isDelivering { return false }
        isDelivering = true
        return true
    }

    /// The machine just entered `finishing`: finish at once if there is nobody to tell, otherwise queue
    /// the finish behind the events not yet delivered.
    /// - Important: Call with the lock held.
    func finishStepLocked() -> FinishStep {
        guard let outcome = machine.outcome else {
            preconditionFailure("Baton internal error: finishing without an outcome")
        }
        if observerList.isEmpty && !isDelivering {
            return .completed(takeCompletionLocked())
        }
        return appendEventLocked(.finish(outcome)) ? .drain : .nothing
    }

    /// Moves to `finished` and takes everything the job must hand over or let go.
    /// - Important: Call with the lock held.
    private func takeCompletionLocked() -> FinishStep.Completion {
        machine.completeFinish()
        let completion = FinishStep.Completion(
            outcome: machine.outcome!,
            dependents: dependentList,
            waiters: waiters,
            queue: owningQueue,
            heldSlot: machine.didExecute,
            onWorker: finishingOnWorker,
            exclusivityScope: exclusivityRequestedIn,
            conditionTask: conditionTask
        )
        dependentList = []
        waiters = []
        owningQueue = nil
        dependencyList = []
        observerList = []
        pendingEvents = []
        conditionList = []
        conditionTask = nil
        exclusivityRequestedIn = nil
        return completion
    }

    /// Performs `step` (lock not held). Returns the dependents to release.
    func perform(_ step: FinishStep) -> [Job] {
        switch step {
        case .nothing: return []
        case .drain: return drainEvents()
        case .completed(let completion): return complete(completion)
        }
    }

    private func complete(_ completion: FinishStep.Completion) -> [Job] {
        dropClosures(executed: completion.heldSlot)
        completion.conditionTask?.cancel()
        completion.exclusivityScope?.release(self)
        completion.queue?.jobDidFinish(self, heldSlot: completion.heldSlot, onWorker: completion.onWorker)
        for waiter in completion.waiters { waiter.resume(completion.outcome) }
        return completion.dependents
    }

    /// Delivers queued events to the observers, one at a time, in order, outside the lock. Exactly one
    /// thread delivers at a time (the one that found `isDelivering` false). Returns the dependents to
    /// release if the finish was delivered; it never releases them itself, so finishing never recurses.
    func drainEvents() -> [Job] {
        var released: [Job] = []
        while true {
            let next: (ObserverEvent, [any JobObserver])? = mutex.withLock {
                if pendingEvents.isEmpty {
                    isDelivering = false
                    return nil
                }
                return (pendingEvents.removeFirst(), observerList)
            }
            guard let (event, observers) = next else { return released }
            switch event {
            case .start:
                for observer in observers { observer.jobDidStart(self) }
            case .cancel(let reason):
                for observer in observers { observer.jobDidCancel(self, reason: reason) }
            case .produce(let job):
                for observer in observers { observer.job(self, didProduce: job) }
            case .progress(let fraction):
                for observer in observers { observer.job(self, didReportProgress: fraction) }
            case .finish(let outcome):
                for observer in observers { observer.jobDidFinish(self, outcome: outcome) }
                released = complete(mutex.withLock { takeCompletionLocked() })
            }
        }
    }

    // MARK: Releasing dependents

    /// Tells each dependent that one of its dependencies finished, using a work list: a dependent that
    /// finishes as a result adds its own dependents to the list instead of recursing, so a chain of any
    /// length is released in constant stack space.
    static func release(_ dependents: [Job]) {
        guard !dependents.isEmpty else { return }
        var work = dependents
        var index = 0
        // Dependents that became ready, batched per queue so that a fan-out takes each queue's lock once.
        var ready: [JobQueue.ReadyJob] = []
        var readyQueue: JobQueue?
        while index < work.count {
            let job = work[index]
            index += 1
            switch job.dependenciesFinished(1) {
            case .ready(let queue, let entry):
                if queue !== readyQueue {
                    readyQueue?.jobsBecameReady(ready)
                    ready.removeAll(keepingCapacity: true)
                    readyQueue = queue
                }
                ready.append(entry)
            case .more(let more):
                work.append(contentsOf: more)
            case .nothing:
                break
            }
            if index >= 4096 {  // drop what was handled so a long release does not hold it all
                work.removeFirst(index)
                index = 0
            }
        }
        readyQueue?.jobsBecameReady(ready)
    }

    enum DependencyRelease {
        case nothing
        /// Ready to run; a pending job is always in a queue.
        case ready(JobQueue, JobQueue.ReadyJob)
        case more([Job])
    }

    /// `count` of this job's dependencies (or its registration hold) finished.
    func dependenciesFinished(_ count: Int) -> DependencyRelease {
        completeRelease(mutex.withLock { releaseLocked(count) })
    }

    /// What a release decided under the lock, to be carried out after unlocking.
    struct LockedRelease {
        let action: JobStateMachine.ReleaseAction
        let queue: JobQueue?
        let step: FinishStep
        let claim: ExclusivityScope?
        let priority: JobPriority
    }

    /// - Important: Call with the lock held.
    func releaseLocked(_ count: Int) -> LockedRelease {
        let action = machine.dependenciesFinished(count)
        return LockedRelease(
            action: action, queue: owningQueue,
            step: action == .finish ? finishStepLocked() : .nothing,
            claim: action == .becomeReady ? startClaimLocked() : nil,
            priority: storedPriority
        )
    }

    /// Carries out a release (lock not held).
    func completeRelease(_ release: LockedRelease) -> DependencyRelease {
        switch release.action {
        case .none:
            return .nothing
        case .becomeReady:
            guard let queue = release.queue else {
                preconditionFailure("Baton internal error: a ready job without a queue")
            }
            if let claim = release.claim {
                claimExclusivity(in: claim)
                return .nothing
            }
            return .ready(queue, JobQueue.ReadyJob(id: id, priority: release.priority))
        case .evaluateConditions:
            evaluateConditions()
            return .nothing
        case .finish:
            return .more(perform(release.step))
        }
    }

    /// The entry for the ready list of the job's queue.
    func readyEntry() -> JobQueue.ReadyJob {
        JobQueue.ReadyJob(id: id, priority: priority)
    }

    /// Whether the job has conditions to evaluate.
    /// - Important: Call with the lock held.
    var hasConditionsLocked: Bool { conditionList.contains { !($0 is any SatisfiedWithoutEvaluation) } }

    /// The job just became ready: if it needs exclusivity categories, records where it asks for them
    /// and returns that scope (the caller must then call ``claimExclusivity(in:)``).
    /// - Important: Call with the lock held.
    func startClaimLocked() -> ExclusivityScope? {
        guard !exclusivity.isEmpty, let scope = owningQueue?.exclusivityScope else { return nil }
        exclusivityRequestedIn = scope
        return scope
    }

    /// Asks for the job's categories (lock not held); the job goes to its queue's ready list when
    /// they are granted.
    func claimExclusivity(in scope: ExclusivityScope) {
        let categories = mutex.withLock { exclusivity }
        if scope.request(self, categories) { exclusivityGranted() }
    }

    /// The job's exclusivity categories were granted: it may run.
    func exclusivityGranted() {
        let queue = mutex.withLock { machine.state == .ready ? owningQueue : nil }
        queue?.jobsBecameReady([readyEntry()])
    }

    func conditionsEvaluated(failure: (any Error)?) {
        var queue: JobQueue?
        var step = FinishStep.nothing
        var claim: ExclusivityScope?
        let action: JobStateMachine.ReleaseAction = mutex.withLock {
            let action = machine.conditionsEvaluated(failure: failure)
            queue = owningQueue
            conditionsEvaluating = []
            if action == .finish { step = finishStepLocked() }
            if action == .becomeReady { claim = startClaimLocked() }
            return action
        }
        switch action {
        case .becomeReady:
            if let claim { claimExclusivity(in: claim) } else { queue?.jobsBecameReady([readyEntry()]) }
        case .finish: Job.release(perform(step))
        case .none, .evaluateConditions: break
        }
    }
}
