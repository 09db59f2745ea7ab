/// The life of one job as a plain value: one `enum State` whose cases carry their data, and one
/// `mutating` method per event, each returning the ``Action`` its owner must carry out.
///
/// The machine never locks, never calls out and never touches another job, so it is tested event by
/// event without threads (`JobLifecycleTests`). ``Job`` keeps it behind the job's lock, inside
/// ``JobCore``, and performs the actions after unlocking (`Job+Lifecycle.swift`).
///
/// ```
/// initialized ─▶ pending ─▶ evaluatingConditions ─▶ ready ─▶ executing ─▶ finishing ─▶ handingOver ─▶ finished
///      │            │  ▲              │       │        │  │                  ▲
///      │            │  └──────────────┴───────┴────────┘  │ (a dependency    │
///      │            │      added before the job started)  │  added late)     │
///      └────────────┴─────────────────┴───────────────────┴──────────────────┘
///        (cancelled, a failed condition, part of a cycle, abandoned by its group)
/// ```
///
/// `handingOver` is the last part of finishing, and public state `finished`: the outcome was told to
/// the observers; the job hands back its exclusivity categories and its queue's slot and lets go of
/// what it holds (its closures and whatever they captured), while its waiters and dependents wait.
/// A job whose `execute()` is still running when its finish is decided (a ``CallbackJob`` that called
/// `done()` inside it or from another thread) stays *parked* there until `execute()` returns, since
/// the call holds the closure. Only ``State/finished`` releases waiters (see ``isHandedOver``).
///
/// Observer events travel with the state: each transition that observers must hear of appends an
/// event, and exactly one thread at a time (the one the machine answers ``Action/deliver`` to)
/// delivers them, in order, outside the lock.
struct JobLifecycle {
    /// Where the job is.
    enum State {
        /// Not in a queue yet. `cancelled`: the reason of a cancel request made already; the job
        /// finishes cancelled (telling its observers) as soon as it is added or started.
        case initialized(cancelled: (any Error)?)
        /// In a queue, waiting for `waitingFor` things: its unfinished dependencies, plus one hold
        /// while it is being registered with them.
        case pending(waitingFor: Int)
        /// Its dependencies finished; its conditions are being evaluated (round `round`).
        case evaluatingConditions(round: UInt32)
        /// On its queue's ready list, waiting for a slot (`.none`); or started by its queue, holding a slot,
        /// and waiting for its exclusivity categories (`.waiting`).
        case ready(Claim)
        /// Its body runs. `cancelled`: the reason of a cancel request made meanwhile.
        case executing(cancelled: (any Error)?, claimed: Bool)
        /// The outcome is decided; observers are being told.
        case finishing(Ending)
        /// Observers were told; the job hands over what it held (public state `finished`). `parked`:
        /// its `execute()` has not returned yet, and the hand-over begins when it does.
        case handingOver(Ending, parked: Bool)
        /// Done: observers were told, categories, slot and closures handed back; waiters and dependents
        /// are released.
        case finished(Ending)
    }

    /// Where a ready job stands with its exclusivity categories. A job claims them only once its queue
    /// started it (it then holds a slot): a job that waits for a slot holds no category, and a job in a
    /// suspended queue claims nothing.
    enum Claim: Equatable {
        /// It waits on the ready list and holds nothing.
        case none
        /// Its queue started it: it holds a slot, asks for its categories (claim round `round`) and
        /// waits. The round tells a claim of an earlier round — the job was sent back to waiting
        /// meanwhile — from the current one. Once granted, the job executes.
        case waiting(round: UInt32)
    }

    /// How a job ended.
    struct Ending {
        let outcome: JobOutcome
        /// The reason of a cancel request, if someone asked the job to cancel (even if its body then
        /// completed). Kept, not dropped: letting go of it could free a user's object, which must not
        /// happen under the job's lock.
        let cancelReason: (any Error)?
        var cancelRequested: Bool { cancelReason != nil }
        /// Its body ran.
        let executed: Bool
        /// It held a slot of its queue (its body ran, or it was started and waited for its categories).
        let heldSlot: Bool
        /// It asked for exclusivity categories, which must be released.
        let claimed: Bool
    }

    /// What the owner must do after an event, outside the lock.
    enum Action {
        /// Nothing.
        case none
        /// Register with the dependencies (then drop the registration hold).
        case register
        /// Evaluate the conditions of round `round`.
        case evaluateConditions(round: UInt32)
        /// The queue started the job, which holds a slot now: ask for its exclusivity categories (claim
        /// round `round`), then run it once they are granted.
        case claim(round: UInt32)
        /// Put the job on its queue's ready list (`claims`: it claims categories when started).
        case enqueueReady(claims: Bool)
        /// Run the body now, on this thread, after delivering observer events if `deliver` (the start).
        case run(deliver: Bool)
        /// The body runs and was asked to cancel: deliver observer events first if `deliver` (this
        /// thread is then the deliverer), then tell the body.
        case interrupt(any Error, deliver: Bool)
        /// Deliver observer events (this thread is now the deliverer; the last event may be the finish).
        case deliver
    }

    private(set) var state: State = .initialized(cancelled: nil) {
        didSet {
            assert(
                oldValue.publicState == state.publicState || oldValue.publicState.canTransition(to: state.publicState),
                "Baton internal inconsistency: invalid job transition \(oldValue.publicState) → \(state.publicState)")
        }
    }
    /// Events not yet delivered to observers, oldest first.
    private var events: [ObserverEvent] = []
    /// Whether a thread is delivering events (then nobody else may).
    private var delivering = false
    /// The current round of condition evaluation or claim; an answer of an earlier round is ignored.
    private var round: UInt32 = 0
    /// Whether the job's `execute()` was called and has not returned (see `handingOver(parked:)`).
    private var executeOpen = false
    /// Whether a finishing job gave its queue's slot back before its hand-over ended (see
    /// `giveSlotBackEarly()`).
    private var slotGivenBack = false
    /// Fixed when the job joins a queue.
    private var hasConditions = false
    private var hasCategories = false

    // MARK: Queries

    var publicState: JobState { state.publicState }
}

extension JobLifecycle.State {
    var publicState: JobState {
        switch self {
        case .initialized: .initialized
        case .pending: .pending
        case .evaluatingConditions: .evaluatingConditions
        case .ready: .ready
        case .executing: .executing
        case .finishing: .finishing
        case .handingOver, .finished: .finished
        }
    }
}

extension JobLifecycle {
    /// Whether someone asked the job to cancel.
    var isCancelled: Bool {
        switch state {
        case .initialized(let reason), .executing(let reason, _): reason != nil
        case .pending, .evaluatingConditions, .ready: false  // a cancel there finishes the job at once
        case .finishing(let ending), .handingOver(let ending, _), .finished(let ending): ending.cancelRequested
        }
    }

    /// Why someone asked the job to cancel, if they did.
    var cancelReason: (any Error)? {
        switch state {
        case .initialized(let reason), .executing(let reason, _): reason
        case .pending, .evaluatingConditions, .ready: nil
        case .finishing(let ending), .handingOver(let ending, _), .finished(let ending): ending.cancelReason
        }
    }

    /// The outcome, once decided (finishing or finished).
    var outcome: JobOutcome? {
        switch state {
        case .finishing(let ending), .handingOver(let ending, _), .finished(let ending): ending.outcome
        default: nil
        }
    }

    /// Public state `finished`: handing over or handed over.
    var isFinished: Bool {
        switch state {
        case .handingOver, .finished: true
        default: false
        }
    }

    /// Whether the hand-over ended: only then do waiters resume and dependents move on.
    var isHandedOver: Bool {
        if case .finished = state { true } else { false }
    }

    /// Whether the job is handing over (parked or not).
    var isHandingOver: Bool {
        if case .handingOver = state { true } else { false }
    }

    /// The number of things a pending job waits for, or `nil` when it is not pending.
    var waitingFor: Int? {
        if case .pending(let count) = state { count } else { nil }
    }

    // MARK: Joining a queue

    /// Why a job cannot join a queue.
    enum EnqueueRefusal: Error {
        case alreadyFinished
        case alreadyIn(JobState)
    }

    /// The job joins a queue; `dependencies` of them may be unfinished.
    ///
    /// A job with no dependencies moves on in the same step. A job cancelled before tells its
    /// observers of the cancel, then finishes.
    mutating func enqueue(
        dependencies: Int, conditions: Bool, categories: Bool, observed: Bool
    ) -> Result<
        Action, EnqueueRefusal
    > {
        switch state {
        case .initialized(let reason?):
            if observed { events.append(.cancel(reason)) }
            return .success(enterFinishing(.cancelled(reason), cancelReason: reason))
        case .initialized(nil):
            hasConditions = conditions
            hasCategories = categories
            if dependencies == 0 { return .success(release()) }
            state = .pending(waitingFor: dependencies + 1)
            return .success(.register)
        case .finishing, .handingOver, .finished:
            return .failure(.alreadyFinished)
        default:
            return .failure(.alreadyIn(publicState))
        }
    }

    /// `count` dependencies (or the registration hold) finished.
    mutating func dependenciesFinished(_ count: Int = 1) -> Action {
        guard case .pending(let waiting) = state else { return .none }  // it finished meanwhile
        let left = waiting - count
        guard left >= 0 else { preconditionFailure("Baton internal inconsistency: dependency count below zero") }
        if left > 0 {
            state = .pending(waitingFor: left)
            return .none
        }
        return release()
    }

    /// Nothing holds the job back any more: on to conditions, the claim, or the ready list.
    private mutating func release() -> Action {
        if hasConditions {
            round &+= 1
            state = .evaluatingConditions(round: round)
            return .evaluateConditions(round: round)
        }
        return becomeReady()
    }

    private mutating func becomeReady() -> Action {
        state = .ready(.none)
        return .enqueueReady(claims: hasCategories)
    }

    /// The conditions of round `round` were evaluated; `failure` is the error of the first that failed.
    mutating func conditionsEvaluated(round answered: UInt32, failure: (any Error)?) -> Action {
        guard case .evaluatingConditions(let current) = state, current == answered else { return .none }
        if let failure { return enterFinishing(.failed(failure), cancelReason: nil) }
        return becomeReady()
    }

    /// Whether the job waits for the claim of round `round` (and so may submit it).
    /// Its queue started it and it waits for its categories (in any round).
    var awaitsAnyClaim: Bool { if case .ready(.waiting) = state { true } else { false } }

    func awaitsClaim(round answered: UInt32) -> Bool {
        if case .ready(.waiting(answered)) = state { true } else { false }
    }

    /// The exclusivity categories the job asked for were granted: it executes, in the slot it holds.
    mutating func claimGranted(observed: Bool) -> Action {
        guard case .ready(.waiting) = state else { return .none }  // finished (or sent back) meanwhile
        state = .executing(cancelled: nil, claimed: true)
        executeOpen = true
        guard observed else { return .run(deliver: false) }
        events.append(.start)
        return .run(deliver: claimDelivery())
    }

    /// The claim must be made anew (a group waiting for its categories was given a child that needs one
    /// its claim lacks): the job gives the claim and its slot up and goes back on the ready list.
    mutating func withdrawClaimToReady() -> Action {
        guard case .ready(.waiting) = state else { return .none }
        state = .ready(.none)
        return .enqueueReady(claims: hasCategories)
    }

    /// The exclusivity categories cannot be granted (a group's child asked for one its group does not
    /// hold): the job fails without running (it holds no category, and gives its slot back).
    mutating func claimRefused(_ error: any Error) -> Action {
        guard case .ready(.waiting) = state else { return .none }
        return enterFinishing(.failed(error), cancelReason: nil, claimed: false)
    }

    // MARK: Dependencies added later

    enum AddDependencyAction {
        /// Not in a queue yet: just remember it.
        case record
        /// Waiting in a queue (and sent back to `pending` if it had moved on): register with the
        /// dependency. `withdrawClaim`: its queue had started it and it waited for its categories: give
        /// up the claim, and the slot it held.
        case register(withdrawClaim: Bool)
        /// Too late: the job started or finished.
        case tooLate(JobState)
    }

    /// A dependency is added. Until the body starts that is always possible: a job that had moved on
    /// to its conditions or the ready list goes back to waiting.
    mutating func addDependency() -> AddDependencyAction {
        switch state {
        case .initialized:
            return .record
        case .pending(let waiting):
            state = .pending(waitingFor: waiting + 1)
            return .register(withdrawClaim: false)
        case .evaluatingConditions:
            state = .pending(waitingFor: 1)  // the answer of the round in progress will be ignored
            return .register(withdrawClaim: false)
        case .ready(let claim):
            state = .pending(waitingFor: 1)  // an entry on the ready list is skipped when it comes up
            return .register(withdrawClaim: claim != .none)
        case .executing, .finishing, .handingOver, .finished:
            return .tooLate(publicState)
        }
    }

    // MARK: Starting

    /// A worker of the job's queue picked it (the job holds a slot from now on). `.claim` means it must
    /// claim its categories first; `.none` means skip: it finished (or went back to waiting) since it
    /// was put on the ready list.
    mutating func startFromQueue(observed: Bool) -> Action {
        guard case .ready(.none) = state else { return .none }
        if hasCategories {
            round &+= 1
            state = .ready(.waiting(round: round))
            return .claim(round: round)
        }
        state = .executing(cancelled: nil, claimed: false)
        executeOpen = true
        guard observed else { return .run(deliver: false) }
        events.append(.start)
        return .run(deliver: claimDelivery())
    }

    enum ManualStart {
        /// Run the body now (after delivering `deliver` events).
        case run(deliver: Bool)
        /// Cancelled before: it finished as cancelled; carry out `action`.
        case finished(Action)
        case notStartable(JobState)
    }

    /// ``Job/start()`` on a job that is in no queue.
    mutating func startManually(observed: Bool) -> ManualStart {
        switch state {
        case .initialized(let reason?):
            if observed { events.append(.cancel(reason)) }
            return .finished(enterFinishing(.cancelled(reason), cancelReason: reason))
        case .initialized(nil):
            state = .executing(cancelled: nil, claimed: false)
            executeOpen = true
            guard observed else { return .run(deliver: false) }
            events.append(.start)
            return .run(deliver: claimDelivery())
        default:
            return .notStartable(publicState)
        }
    }

    // MARK: Cancelling

    /// Someone asks the job to cancel. Only the first request counts; a finishing or finished job is
    /// not affected.
    mutating func cancel(reason: any Error, observed: Bool) -> Action {
        switch state {
        case .initialized(nil):
            state = .initialized(cancelled: reason)  // observers hear of it when the job is added
            return .none
        case .pending, .evaluatingConditions, .ready:
            // A waiting job finishes at once: it never waits for its dependencies once cancelled.
            if observed { events.append(.cancel(reason)) }
            return enterFinishing(.cancelled(reason), cancelReason: reason)
        case .executing(nil, let claimed):
            state = .executing(cancelled: reason, claimed: claimed)
            guard observed else { return .interrupt(reason, deliver: false) }
            events.append(.cancel(reason))
            return .interrupt(reason, deliver: claimDelivery())
        case .initialized, .executing, .finishing, .handingOver, .finished:
            return .none
        }
    }

    // MARK: Finishing

    /// Why the body could not complete.
    enum CompletionRefusal: Error {
        case notExecuting(JobState)
    }

    /// The body completed, with `error` if it threw. The outcome is what the body did: a body that
    /// returned succeeded, even if a cancel request came while it ran (its work is done); a body that
    /// threw `CancellationError` was cancelled (with the request's reason, if any); any other error is
    /// a failure. `fromExecute`: it is `execute()` itself that returned (or threw).
    mutating func bodyCompleted(
        error: (any Error)?, fromExecute: Bool = false
    ) -> Result<
        Action, CompletionRefusal
    > {
        if fromExecute { executeOpen = false }
        guard case .executing(let reason, _) = state else { return .failure(.notExecuting(publicState)) }
        let outcome: JobOutcome
        switch error {
        case nil: outcome = .succeeded
        case let error? where error is CancellationError: outcome = .cancelled(reason ?? error)
        case let error?: outcome = .failed(error)
        }
        return .success(enterFinishing(outcome, cancelReason: reason))
    }

    /// The job is part of a dependency cycle: a pending job fails without running.
    mutating func failPending(_ error: any Error) -> Action {
        guard case .pending = state else { return .none }
        return enterFinishing(.failed(error), cancelReason: nil)
    }

    /// The job will never be added to a queue (its group finished first): it finishes without running,
    /// as cancelled if it was asked to cancel, otherwise with `outcome`.
    mutating func abandon(_ outcome: JobOutcome, observed: Bool) -> Action {
        switch state {
        case .initialized(let reason?):
            if observed { events.append(.cancel(reason)) }
            return enterFinishing(.cancelled(reason), cancelReason: reason)
        case .initialized(nil):
            if observed, case .cancelled(let reason) = outcome { events.append(.cancel(reason)) }
            return enterFinishing(outcome, cancelReason: outcome.isCancelled ? outcome.error : nil)
        default:
            return .none
        }
    }

    /// `claimed`: whether it must release a claim, if not what its state says.
    private mutating func enterFinishing(
        _ outcome: JobOutcome, cancelReason: (any Error)?, claimed: Bool? = nil
    )
        -> Action
    {
        let executed: Bool
        let heldSlot: Bool
        var mustRelease: Bool
        switch state {
        case .initialized, .pending, .evaluatingConditions, .ready(.none):
            (executed, heldSlot, mustRelease) = (false, false, false)
        case .ready(.waiting):
            (executed, heldSlot, mustRelease) = (false, true, true)
        case .executing(_, let held):
            (executed, heldSlot, mustRelease) = (true, true, held)
        case .finishing, .handingOver, .finished:
            preconditionFailure("Baton internal inconsistency: a job finished twice")
        }
        if let claimed { mustRelease = claimed }
        // The finish is not queued as an event: it is implied by `finishing` and comes after every
        // queued event (so a job nobody observes allocates no event list).
        state = .finishing(
            Ending(
                outcome: outcome, cancelReason: cancelReason, executed: executed, heldSlot: heldSlot,
                claimed: mustRelease))
        return claimDelivery() ? .deliver : .none
    }

    // MARK: Observer events

    /// Records an event for observers (the job has some). Returns whether the caller must deliver.
    mutating func record(_ event: ObserverEvent) -> Bool {
        events.append(event)
        return claimDelivery()
    }

    /// Whether the caller becomes the deliverer of the events recorded (nobody else is delivering).
    private mutating func claimDelivery() -> Bool {
        if delivering { return false }
        delivering = true
        return true
    }

    /// The deliverer takes the next event: the queued ones in order, then the finish once the job is
    /// finishing. `nil` means there is none and it stops delivering.
    mutating func nextEvent() -> ObserverEvent? {
        if !events.isEmpty { return events.removeFirst() }
        if case .finishing(let ending) = state { return .finish(ending.outcome) }
        delivering = false
        return nil
    }

    /// Who carries out a hand-over.
    enum HandOver {
        /// The caller, now.
        case now(Ending)
        /// The thread whose `execute()` returns (see ``executeReturned()``).
        case parked
    }

    /// The finish was delivered to every observer: the job hands over, now or once its `execute()`
    /// returns. (The finish is the last event.)
    mutating func finishDelivered() -> HandOver {
        guard case .finishing(let ending) = state, events.isEmpty else {
            preconditionFailure("Baton internal inconsistency: a finish delivered while not finishing")
        }
        delivering = false
        state = .handingOver(ending, parked: executeOpen)
        return executeOpen ? .parked : .now(ending)
    }

    /// The caller was just made the deliverer of a finish that nobody observes (no event is queued):
    /// the job hands over as ``finishDelivered()`` says. `nil` when it is not finishing.
    mutating func finishUnobserved() -> HandOver? {
        guard case .finishing = state, events.isEmpty else { return nil }
        return finishDelivered()
    }

    /// The job's `execute()` returned (for a job that does not finish when it returns). Returns the
    /// ending of a hand-over that was parked for it, which the caller carries out now.
    mutating func executeReturned() -> Ending? {
        executeOpen = false
        guard case .handingOver(let ending, parked: true) = state else { return nil }
        state = .handingOver(ending, parked: false)
        return ending
    }

    /// A waiter must block while the job hands over (or finishes), holding its queue's slot: whether
    /// the caller must give the slot back to the queue now (once). The job is finished: its slot goes
    /// back even if its `execute()` is still returning (as a finished `Operation`'s does).
    mutating func giveSlotBackEarly() -> Bool {
        switch state {
        case .finishing(let ending), .handingOver(let ending, _):
            guard ending.heldSlot, !slotGivenBack else { return false }
            slotGivenBack = true
            return true
        default:
            return false
        }
    }

    /// The hand-over is done: the job is finished. `holdsSlot`: whether the queue must still take back
    /// its slot (it was not given back early).
    mutating func handOverEnded() -> (ending: Ending, holdsSlot: Bool) {
        guard case .handingOver(let ending, parked: false) = state else {
            preconditionFailure("Baton internal inconsistency: a hand-over ended while not handing over")
        }
        state = .finished(ending)
        return (ending, ending.heldSlot && !slotGivenBack)
    }
}

extension JobLifecycle.Action {
    var isDeliver: Bool {
        if case .deliver = self { true } else { false }
    }
}

/// Something observers must be told, in lifecycle order.
enum ObserverEvent {
    case start
    case cancel(any Error)
    /// `job` was produced; the deliverer adds it to `into` once observers heard of it (a group's
    /// child, already added, has none).
    case produce(Job, into: JobQueue?)
    case progress(Double)
    case finish(JobOutcome)
}
