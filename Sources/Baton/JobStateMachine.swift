/// The life of one job as a plain value: one `mutating` method per event, each returning what the
/// owner must do next. It never calls out, never locks and never touches another job, so it can be
/// tested without threads; ``Job`` keeps it behind the job's lock and performs the actions after
/// unlocking.
///
/// Every state change goes through ``JobState/allowedTransitions``.
struct JobStateMachine: Sendable {
    // Declared largest first so the value packs tightly (it lives in every job).
    /// While pending: dependencies not yet finished, plus one "hold" taken while the job is being
    /// added to its queue, so that it cannot move on before it is fully registered.
    private(set) var waitingFor = 0
    /// The reason given to the first cancel request, if any.
    private(set) var cancellation: (any Error)?
    /// Set once, on entering `finishing`.
    private(set) var outcome: JobOutcome?
    /// The current state.
    private(set) var state: JobState = .initialized
    /// Whether the body started (and therefore held a slot of its queue).
    private(set) var didExecute = false
    /// Whether the job has conditions to evaluate before it is ready.
    private(set) var hasConditions = false

    var isCancelled: Bool { cancellation != nil }

    private mutating func move(to next: JobState) {
        precondition(state.canTransition(to: next), "Baton internal error: invalid job transition \(state) → \(next)")
        state = next
    }

    // MARK: Enqueue and dependencies

    enum EnqueueResult: Equatable {
        case enqueued
        case alreadyEnqueued(JobState)
        case alreadyFinished
    }

    /// The job is being added to a queue; `dependencies` of them may not have finished yet.
    mutating func enqueue(dependencies: Int, hasConditions: Bool) -> EnqueueResult {
        switch state {
        case .initialized:
            move(to: .pending)
            waitingFor = dependencies + 1  // + the registration hold
            self.hasConditions = hasConditions
            return .enqueued
        case .finishing, .finished:
            return .alreadyFinished
        default:
            return .alreadyEnqueued(state)
        }
    }

    enum AddDependencyAction: Equatable {
        /// Not enqueued yet: just remember the dependency.
        case record
        /// Already waiting in a queue: remember it and register with the dependency now.
        case recordAndRegister
        /// Too late: the job already left `pending`.
        case tooLate(JobState)
    }

    mutating func addDependency() -> AddDependencyAction {
        switch state {
        case .initialized:
            return .record
        case .pending:
            waitingFor += 1
            return .recordAndRegister
        default:
            return .tooLate(state)
        }
    }

    /// What to do once nothing holds a pending job back any more.
    enum ReleaseAction: Equatable {
        case none
        case evaluateConditions
        case becomeReady
        /// The job moved to `finishing`; deliver its finish.
        case finish
    }

    /// `count` dependencies (or the registration hold) finished.
    mutating func dependenciesFinished(_ count: Int = 1) -> ReleaseAction {
        guard state == .pending else { return .none }  // cancelled or failed while waiting
        waitingFor -= count
        precondition(waitingFor >= 0, "Baton internal error: dependency count below zero")
        guard waitingFor == 0 else { return .none }
        if let reason = cancellation {
            return enterFinishing(.cancelled(reason))
        }
        if hasConditions {
            move(to: .evaluatingConditions)
            return .evaluateConditions
        }
        move(to: .ready)
        return .becomeReady
    }

    /// The conditions were evaluated; `failure` is the error of the first failed one.
    mutating func conditionsEvaluated(failure: (any Error)?) -> ReleaseAction {
        guard state == .evaluatingConditions else { return .none }  // cancelled meanwhile
        if let failure { return enterFinishing(.failed(failure)) }
        if let reason = cancellation { return enterFinishing(.cancelled(reason)) }
        move(to: .ready)
        return .becomeReady
    }

    /// Fail a pending job without running it (it is part of a dependency cycle).
    mutating func failPending(_ error: any Error) -> Bool {
        guard state == .pending else { return false }
        _ = enterFinishing(.failed(error))
        return true
    }

    // MARK: Start

    enum StartAction: Equatable {
        /// Run the body now.
        case run
        /// The job was cancelled or finished meanwhile; nothing to run.
        case skip
    }

    /// A worker of the job's queue picked it.
    mutating func startFromQueue() -> StartAction {
        guard state == .ready else { return .skip }
        move(to: .executing)
        didExecute = true
        return .run
    }

    enum ManualStartAction: Equatable {
        case run
        /// Cancelled before it started: finish as cancelled without running the body.
        case finish
        case notStartable(JobState)
    }

    /// `start()` called by hand on a job that is in no queue.
    mutating func startManually() -> ManualStartAction {
        guard state == .initialized else { return .notStartable(state) }
        if let reason = cancellation {
            move(to: .pending)
            return enterFinishing(.cancelled(reason)) == .finish ? .finish : .notStartable(state)
        }
        move(to: .executing)
        didExecute = true
        return .run
    }

    // MARK: Cancel

    enum CancelAction: Equatable {
        /// Already cancelled, finishing or finished: nothing changes.
        case ignored
        /// Not enqueued yet: it will finish as cancelled once added to a queue or started.
        case recorded
        /// It was waiting; it now finishes as cancelled without running.
        case finish
        /// Its body is running: tell it.
        case interrupt
    }

    mutating func cancel(reason: any Error) -> CancelAction {
        guard cancellation == nil else { return .ignored }
        switch state {
        case .finishing, .finished:
            return .ignored
        case .initialized:
            cancellation = reason
            return .recorded
        case .pending, .evaluatingConditions, .ready:
            // Waiting jobs finish at once: a cancelled job never waits for its dependencies.
            cancellation = reason
            return enterFinishing(.cancelled(reason)) == .finish ? .finish : .ignored
        case .executing:
            cancellation = reason
            return .interrupt
        }
    }

    // MARK: Finish

    enum FinishResult: Equatable {
        case finish
        case notExecuting(JobState)
    }

    /// The body completed, with `error` if it failed.
    mutating func finish(error: (any Error)?) -> FinishResult {
        guard state == .executing else { return .notExecuting(state) }
        let outcome: JobOutcome
        switch (error, cancellation) {
        case (nil, nil): outcome = .succeeded
        case (nil, let reason?): outcome = .cancelled(reason)
        case (let error?, let reason?) where error is CancellationError: outcome = .cancelled(reason)
        case (let error?, nil) where error is CancellationError: outcome = .cancelled(error)
        case (let error?, _): outcome = .failed(error)
        }
        return enterFinishing(outcome) == .finish ? .finish : .notExecuting(state)
    }

    private mutating func enterFinishing(_ outcome: JobOutcome) -> ReleaseAction {
        if state == .pending || state == .evaluatingConditions || state == .ready || state == .executing {
            move(to: .finishing)
            self.outcome = outcome
            waitingFor = 0
            return .finish
        }
        return .none
    }

    /// Observers were told of the finish: the job is done.
    mutating func completeFinish() {
        move(to: .finished)
    }
}
