/// A unit of work with a lifecycle, dependencies, observers and cooperative cancellation.
///
/// Subclass `Job` and override ``execute()`` for synchronous work; the job finishes when it returns
/// (or throws). For work that completes later through a callback, use ``CallbackJob``; for `async`
/// code use ``AsyncJob``; for closures use ``BlockJob``, ``AsyncJob`` or ``CallbackJob``.
///
/// ```swift
/// let queue = JobQueue(name: "import", maxConcurrentJobs: 4)
/// let download = BlockJob { /* synchronous work */ }
/// let parse = AsyncJob { job in try await parseFeed() }
/// parse.addDependency(download)
/// parse.onFinish { outcome in print(outcome) }
/// queue.add([download, parse])
/// ```
///
/// A job runs at most once and finishes exactly once with a ``JobOutcome``. Once finished it drops
/// its dependencies, observers and closures, so nothing it captured is kept alive by Baton.
///
/// ## Subclassing
/// Swift makes a subclass restate `@unchecked Sendable`. Keep the subclass's own state in `let`
/// properties of `Sendable` types — ``Protected`` for anything that changes — and the restatement is
/// true without a lock of your own.
///
/// ## Thread safety
/// Every method may be called from any thread. A job's state lives in one value (`JobCore`) that
/// only its lock gives access to, and Baton never calls your code (bodies, observers, conditions,
/// continuations) or releases an object while holding a lock.
open class Job: @unchecked Sendable {
    // @unchecked Sendable: `id` and `mutex` are immutable; `core` is only read or written inside
    // `withCore`, which holds `mutex`. The lock serialises every access, so the runtime's dynamic
    // exclusivity check on `core` is redundant: `@exclusivity(unchecked)` removes it (about a fifth of
    // the instructions of a trivial job, measured with callgrind). If a path ever touched `core` without
    // the lock, ThreadSanitizer (CI runs the whole suite under it) reports the race.

    /// A process-unique number, in creation order.
    public let id: UInt64
    let mutex: StripedMutex
    /// Everything about the job that changes. Private to this file: the rest of Baton reaches it only
    /// through ``withCore(_:)``, so reading it unlocked does not compile.
    @exclusivity(unchecked) private var core: JobCore

    /// Creates a job. It does nothing until it is added to a queue (or started by hand).
    ///
    /// - Parameters:
    ///   - name: Used in diagnostics and errors. Defaults to the type name and ``id``, as in `BlockJob#12`.
    ///   - priority: The order among ready jobs of the same queue.
    public init(name: String? = nil, priority: JobPriority = .normal) {
        id = JobIdentifiers.next()
        mutex = LockStripes.mutex(for: id)
        core = JobCore(name: name, priority: priority)
    }

    deinit {
        LockDiscipline.checkNoLockHeld("job #\(id) was released")
        // Release long chains iteratively: a recursive release of a million never-run jobs that depend
        // on each other (or of groups nested ten thousand deep) would overflow the stack.
        Job.releaseIteratively(core.takeOwnedJobs())
    }

    /// Runs `body` with the job's lock held and exclusive access to its ``JobCore``.
    ///
    /// - Important: `body` must not call user code, take another lock, or let go of a reference
    ///   (move it out and drop it after unlocking): see ``LockDiscipline``.
    @inline(__always)
    final func withCore<T>(_ body: (inout JobCore) throws -> T) rethrows -> T {
        try mutex.withLock { try body(&core) }
    }

    // MARK: Properties

    /// The job's name, for diagnostics and errors.
    public var name: String {
        get { withCore { $0.name } ?? defaultName }
        set { withCore { $0.name = newValue } }
    }

    var defaultName: String { "\(type(of: self))#\(id)" }

    /// The order among ready jobs of the same queue. Changes after the job became ready have no effect.
    /// A change while it waits reaches the jobs it waits for (see ``effectivePriority``).
    public var priority: JobPriority {
        get { withCore { $0.priority } }
        set {
            let reachesOthers = withCore { core -> Bool in
                core.priority = newValue
                guard let counted = core.countedPriority, counted != core.effectivePriority else { return false }
                return core.lifecycle.waitingFor != nil || core.lifecycle.publicState == .evaluatingConditions
            }
            if reachesOthers { Job.propagatePriority(from: [self]) }
        }
    }

    /// Where the job is in its lifecycle. The value may be stale as soon as it is returned.
    public var state: JobState { withCore { $0.lifecycle.publicState } }

    /// Whether someone asked the job to cancel. Bodies should check it and stop early, throwing
    /// `CancellationError()` to report that they did.
    public var isCancelled: Bool { withCore { $0.lifecycle.isCancelled } }

    /// Whether the job finished: its observers were told of the finish. (Waiting for it — ``outcome``,
    /// ``waitUntilFinished()`` — returns a moment later, once it also handed back its categories and
    /// its queue's slot and let go of what its closures and observers captured: a job that takes one of
    /// its categories next already sees it finished.)
    public var isFinished: Bool { withCore { $0.lifecycle.isFinished } }

    /// The outcome once it is decided (the job is finishing or finished), without waiting; `nil` before.
    /// To wait for it, use `await job.outcome` or ``waitUntilFinished()``.
    public var outcomeIfDecided: JobOutcome? { withCore { $0.lifecycle.outcome } }

    /// The queue the job was added to, until it finishes.
    public var queue: JobQueue? { withCore { $0.queue } }

    /// The group the job is a child of: given to ``GroupJob/addChild(_:)``, or produced or generated
    /// inside the group. `nil` for a top-level job, and once the group was released. Instruments use it
    /// to nest a child's span or timeline row under its group's.
    public var parentGroup: GroupJob? { withCore { $0.extras?.parent } }

    // MARK: Overridable

    /// The job's work. Override it in a subclass; the default does nothing.
    ///
    /// Return normally to succeed, throw to fail. Check ``Job/isCancelled`` in long loops and throw
    /// `CancellationError()` when it becomes `true`: the job then finishes cancelled. (A body that
    /// returns normally succeeded, even if a cancel request came while it ran: its work is done.)
    ///
    /// - Important: A synchronous body occupies a Dispatch thread until it returns. Do not block it
    ///   waiting for other work (a semaphore, a network reply): Dispatch's pool is small (about one
    ///   thread per core), and on Linux it adds a thread for blocked ones only about once a second, so
    ///   everything else waits. Wait in an ``AsyncJob`` (`await`) or finish a ``CallbackJob`` from a
    ///   callback instead.
    open func execute() throws {}

    /// Called once, outside any lock, when a cancel request reaches the job while its body is running
    /// (before the job's observers hear of the cancel). Override it to interrupt the work (for example,
    /// cancel a network request). The body may be returning at the same moment: keep it idempotent. The
    /// default does nothing.
    open func didCancel(reason: any Error) {}

    /// Whether the job finishes when ``execute()`` returns. ``CallbackJob`` and ``AsyncJob`` say no.
    var finishesWhenExecuteReturns: Bool { true }

    /// For a job that does not finish when ``execute()`` returns: whether a finish that comes while
    /// `execute()` runs hands over only once it returned (``CallbackJob``: the call holds its closure).
    var handsOverAfterExecute: Bool { false }

    /// Drops the closures a subclass holds once the job finished with `outcome` (`executed`: its body
    /// ran), and returns jobs that must now finish without running, with their outcomes (a group's
    /// children that never started). `extras` were moved out of the job's core as it finished. Called
    /// outside the lock.
    func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] { [] }

    /// Raises the priority of a running body whose job's effective priority rose (``AsyncJob`` raises
    /// its task's). Called outside the lock.
    func escalateBody(to priority: JobPriority) {}

    /// Interrupts a running body on cancellation for `reason` (``AsyncJob`` cancels its task; a group
    /// cancels its children with the same reason through `work`, never by recursion). Called outside the
    /// lock.
    func interruptBody(reason: any Error, _ work: inout Propagation) {}

    /// The exclusivity categories to claim before running: the job's own (a group adds its children's).
    /// Called outside the lock.
    func categoriesToClaim(own: [ExclusivityCategory]) -> [ExclusivityCategory] { own }

    /// The jobs this job keeps alive besides its dependencies (a group's children), taken out so that
    /// ``releaseIteratively(_:)`` can release them without recursion. Called when nothing else
    /// references the job.
    func takeOwnedChildren() -> [Job] { [] }
}

/// Hands out ``Job/id``s.
enum JobIdentifiers {
    private static let lock = Lock()
    nonisolated(unsafe) private static var last: UInt64 = 0  // guarded by `lock`

    static func next() -> UInt64 {
        lock.withLock {
            last &+= 1
            return last
        }
    }
}

extension Job {
    // MARK: Cancelling, starting by hand, producing

    /// Asks the job to cancel.
    ///
    /// - A job that has not started yet finishes as ``JobOutcome/cancelled(_:)`` without running its
    ///   body — at once if it is in a queue (it does not wait for its dependencies), or when it is
    ///   added to a queue or started. Its observers hear of the cancel, then of the finish.
    /// - A job whose body is running is told (``isCancelled``, ``didCancel(reason:)``, and `Task`
    ///   cancellation inside ``AsyncJob``) and finishes when its body returns: cancelled if the body
    ///   throws `CancellationError`, succeeded if it completed its work anyway.
    /// - A job that is finishing or finished is not affected: its outcome never changes.
    ///
    /// Only the first request counts. Dependents of a cancelled job still run once it finished;
    /// use a condition (``NoCancelledDependencies``) if they should not.
    ///
    /// - Parameter reason: Reported in the outcome. Defaults to `CancellationError()`.
    public func cancel(reason: (any Error)? = nil) {
        Propagation.run { cancel(reason: reason ?? CancellationError(), &$0) }
    }

    func cancel(reason: any Error, _ work: inout Propagation) {
        perform(step { $0.lifecycle.cancel(reason: reason, observed: $0.wantsEvents) }, &work)
    }

    /// Runs the job on the calling thread, without a queue, like `Foundation.Operation.start()`.
    ///
    /// A synchronous job has finished when `start()` returns; an asynchronous one has started. A job
    /// that was cancelled before finishes as cancelled without running its body, whether or not its
    /// dependencies finished.
    ///
    /// - Throws: ``JobError`` with code ``JobError/Code/unfinishedDependencies`` if a dependency has
    ///   not finished, or ``JobError/Code/notStartable`` if the job is in a queue, already started or
    ///   finished, or has conditions (only a queue evaluates them and claims their categories). These are thrown rather than trapped because whether a dependency has finished can
    ///   depend on timing.
    public func start() throws(JobError) {
        while true {
            let dependencies = withCore { $0.allDependencies }
            // A cancelled job finishes at once, as in a queue: it runs nothing, so it waits for nothing.
            let unfinished = isCancelled ? [] : dependencies.filter { !$0.isFinished }
            if !unfinished.isEmpty {
                let names = unfinished.map(\.name)
                throw JobError(
                    code: .unfinishedDependencies, jobs: names,
                    message:
                        "cannot start job '\(name)': its dependencies \(names.map { "'\($0)'" }.joined(separator: ", ")) have not finished. Add it to a queue to wait for them."
                )
            }
            var outcome: JobLifecycle.ManualStart?
            var queued = false
            var hasConditions = false
            let step = step { core -> JobLifecycle.Action in
                guard core.allDependencies.count == dependencies.count else { return .none }  // one was added
                if core.queue != nil {
                    queued = true
                    outcome = .notStartable(core.lifecycle.publicState)
                    return .none
                }
                if core.extras?.conditions.isEmpty == false, case .initialized(nil) = core.lifecycle.state {
                    hasConditions = true
                    outcome = .notStartable(.initialized)
                    return .none
                }
                let start = core.lifecycle.startManually(observed: core.wantsEvents)
                outcome = start
                if case .finished(let action) = start { return action }
                return .none
            }
            switch outcome {
            case nil:
                continue
            case .run(let deliver):
                runBody(deliverFirst: deliver, in: nil)
            case .finished:
                var work = Propagation()
                perform(consume step, &work)
                work.run()
            case .notStartable(let state):
                let why =
                    queued
                    ? "it was added to a queue, which starts it"
                    : hasConditions
                        ? "it has conditions, which only a queue evaluates (and claims their exclusivity categories); add it to a queue"
                        : "it is already \(state)"
                throw JobError(code: .notStartable, jobs: [name], message: "cannot start job '\(name)': \(why).")
            }
            return
        }
    }

    /// Adds `job` to this job's queue and tells this job's observers.
    ///
    /// Observers hear of `job` before it can start: it joins the queue once they were told, also when
    /// it is produced from an observer (of the start, say), which the other observers hear of after
    /// the event they are being told of.
    ///
    /// A job may also produce from an observer of its finish (``onFinish(_:)``), like ProcedureKit's
    /// `produce` before finishing: `job` joins the queue at once, and the observers, which are being
    /// told of the finish, are not told of it.
    ///
    /// - Precondition: This job was started by a queue and is executing, or finishing (its observers
    ///   are being told of its finish).
    public func produce(_ job: Job) {
        let (queue, state, recorded, mustDeliver): (JobQueue?, JobState, Bool, Bool) = withCore { core in
            let state = core.lifecycle.publicState
            guard state == .executing, let queue = core.queue, !core.observers.isEmpty else {
                return (core.queue, state, false, false)
            }
            return (queue, state, true, core.lifecycle.record(.produce(job, into: queue)))
        }
        guard state == .executing || state == .finishing, let queue else {
            fatalError(
                "Baton: job '\(name)' produced '\(job.name)' while \(state)\(queue == nil ? " and in no queue" : ""). Produce jobs from the body of a job that a queue runs, or from an observer of its start or finish."
            )
        }
        // Observers hear of the job before it can start (as with a group's children): the deliverer
        // adds it once they were told.
        if recorded {
            if mustDeliver { Propagation.run { deliver(&$0) } }
            return
        }
        queue.add(job)
    }
}
