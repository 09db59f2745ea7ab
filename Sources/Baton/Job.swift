import Dispatch

/// A unit of work with a lifecycle, dependencies, observers and cooperative cancellation.
///
/// Subclass `Job` and override ``execute()`` for synchronous work; the job finishes when it returns
/// (or throws). For work that completes later through a callback, subclass ``AsynchronousJob``; for
/// `async` code use ``AsyncJob``; for closures use ``BlockJob`` or ``CallbackJob``.
///
/// ```swift
/// let queue = JobQueue(name: "import", maxConcurrentJobs: 4)
/// let download = BlockJob { /* synchronous work */ }
/// let parse = AsyncJob { job in try await parseFeed(cancelled: job.isCancelled) }
/// parse.addDependency(download)
/// parse.onFinish { outcome in print(outcome) }
/// queue.add([download, parse])
/// ```
///
/// A job runs at most once and finishes exactly once with a ``JobOutcome``. Once finished it drops
/// its dependencies, observers and closures, so nothing it captured is kept alive by Baton.
///
/// ## Thread safety
/// Every method may be called from any thread. A job's mutable state is guarded by its lock, and Baton
/// never calls your code (bodies, observers, continuations) while holding a lock.
open class Job: @unchecked Sendable {
    // @unchecked Sendable: `id` and `mutex` are immutable; every other stored property below is only
    // read or written while holding `mutex`. The lock serialises every access, so the runtime's dynamic
    // exclusivity checks are redundant: `@exclusivity(unchecked)` removes them (about a fifth of the
    // instructions of a trivial job, measured with callgrind).

    /// A process-unique number, in creation order.
    public let id: UInt64
    let mutex: StripedMutex

    // MARK: Guarded by `mutex` (laid out so that small fields share words: memory per waiting job counts)
    @exclusivity(unchecked) var machine = JobStateMachine()
    @exclusivity(unchecked) var storedName: String?
    @exclusivity(unchecked) var dependencyList: [Job] = []
    @exclusivity(unchecked) var dependentList: [Job] = []
    @exclusivity(unchecked) var observerList: [any JobObserver] = []
    @exclusivity(unchecked) var pendingEvents: [ObserverEvent] = []
    @exclusivity(unchecked) var waiters: [JobWaiter] = []
    @exclusivity(unchecked) var owningQueue: JobQueue?
    /// State that most jobs never need (conditions, exclusivity, progress), allocated on first use.
    @exclusivity(unchecked) var extras: JobExtras?
    /// The `add` call that enqueued the job (a unique token, 0 for a single job) and the job's index in
    /// it, and whether a job that is not a later member of that same call waits for this one (see
    /// ``CycleDetector``).
    @exclusivity(unchecked) var batchToken: UInt64 = 0
    @exclusivity(unchecked) var batchIndex: Int32 = 0
    @exclusivity(unchecked) var storedPriority: JobPriority
    @exclusivity(unchecked) var isDelivering = false
    /// Set when the body finished the job before returning, on the thread of a queue worker.
    @exclusivity(unchecked) var finishingOnWorker = false
    @exclusivity(unchecked) var mayCloseCycle = false

    /// Creates a job.
    ///
    /// - Parameters:
    ///   - name: Used in diagnostics and errors. Defaults to the type name and ``id``, as in `BlockJob#12`.
    ///   - priority: The order among ready jobs of the same queue.
    public init(name: String? = nil, priority: JobPriority = .normal) {
        id = JobIdentifiers.next()
        mutex = LockStripes.mutex(for: id)
        storedName = name
        storedPriority = priority
    }

    deinit {
        // Release a long chain of dependencies iteratively: a recursive release of a million
        // never-run jobs that depend on each other would overflow the stack.
        var work = dependencyList
        dependencyList = []
        while var next = work.popLast() {
            if isKnownUniquelyReferenced(&next) {
                work.append(contentsOf: next.mutex.withLock { next.takeDependenciesLocked() })
            }
        }
    }

    private func takeDependenciesLocked() -> [Job] {
        defer { dependencyList = [] }
        return dependencyList
    }

    // MARK: Properties

    /// The job's name, for diagnostics and errors.
    public var name: String {
        get { mutex.withLock { storedName } ?? "\(type(of: self))#\(id)" }
        set { mutex.withLock { storedName = newValue } }
    }

    /// The order among ready jobs of the same queue. Changes after the job became ready have no effect.
    public var priority: JobPriority {
        get { mutex.withLock { storedPriority } }
        set { mutex.withLock { storedPriority = newValue } }
    }

    /// Where the job is in its lifecycle. The value may be stale as soon as it is returned.
    public var state: JobState { mutex.withLock { machine.state } }

    /// Whether someone asked the job to cancel. Bodies should check it and stop early.
    public var isCancelled: Bool { mutex.withLock { machine.isCancelled } }

    /// Whether the job finished (its observers were told, its dependents released).
    public var isFinished: Bool { mutex.withLock { machine.state == .finished } }

    /// The outcome once the job is finishing or finished; `nil` before.
    public var finishedOutcome: JobOutcome? { mutex.withLock { machine.outcome } }

    /// The queue the job was added to, until it finishes.
    public var queue: JobQueue? { mutex.withLock { owningQueue } }

    // MARK: Overridable

    /// The job's work. Override it in a subclass; the default does nothing.
    ///
    /// Return normally to succeed or throw to fail. Check ``isCancelled`` in long loops and return
    /// early (or throw `CancellationError()`) when it becomes `true`.
    ///
    /// - Important: A synchronous body occupies a Dispatch thread until it returns. Do not block it
    ///   waiting for other work (a semaphore, a network reply): Dispatch's pool is small (about one
    ///   thread per core), and on Linux it adds a thread for blocked ones only about once a second, so
    ///   everything else waits. Wait in an ``AsyncJob`` (`await`) or finish an ``AsynchronousJob`` from
    ///   a callback instead.
    open func execute() throws {}

    /// Called once, outside any lock, when a cancel request reaches the job while its body is running.
    /// Override it to interrupt the work (for example, cancel a network request). The default does nothing.
    open func didCancel(reason: any Error) {}

    /// Whether the job finishes when ``execute()`` returns. ``AsynchronousJob`` says no.
    var finishesWhenExecuteReturns: Bool { true }

    /// Drops the closures a subclass holds, once the job finished (`executed`: its body ran). Called
    /// outside the lock.
    func dropClosures(executed: Bool) {}

    /// Interrupts a running body on cancellation (``AsyncJob`` cancels its task). Called outside the lock.
    func interruptBody() {}

    // MARK: Cancellation

    /// Asks the job to cancel.
    ///
    /// - A job that has not started yet finishes as ``JobOutcome/cancelled(_:)`` without running its
    ///   body — at once if it is in a queue (it does not wait for its dependencies), or when it is
    ///   added to a queue or started.
    /// - A job whose body is running is told (``isCancelled``, ``didCancel(reason:)``, and `Task`
    ///   cancellation inside ``AsyncJob``) and finishes when its body returns; it then reports
    ///   `cancelled` unless its body failed with another error.
    /// - A job that is finishing or finished is not affected: its outcome never changes.
    ///
    /// Only the first request counts. Dependents of a cancelled job still run once it finished;
    /// use a condition if they should not.
    ///
    /// - Parameter reason: Reported in the outcome. Defaults to `CancellationError()`.
    public func cancel(reason: (any Error)? = nil) {
        let reason = reason ?? CancellationError()
        var interrupt = false
        let step: FinishStep = mutex.withLock {
            switch machine.cancel(reason: reason) {
            case .ignored, .recorded:
                return .nothing
            case .finish:
                // Tell observers of the cancel before the finish; without observers, finish directly.
                let drain = !observerList.isEmpty && appendEventLocked(.cancel(reason))
                let step = finishStepLocked()
                return drain ? .drain : step
            case .interrupt:
                interrupt = true
                return !observerList.isEmpty && appendEventLocked(.cancel(reason)) ? .drain : .nothing
            }
        }
        if interrupt {
            interruptBody()
            didCancel(reason: reason)
        }
        Job.release(perform(step))
    }

    // MARK: Running

    /// Runs the job on the calling thread, without a queue, like `Foundation.Operation.start()`.
    ///
    /// A synchronous job has finished when `start()` returns; an asynchronous one has started. A job
    /// that was cancelled before finishes as cancelled without running its body.
    ///
    /// - Throws: ``JobError`` with code ``JobError/Code/unfinishedDependencies`` if a dependency has
    ///   not finished, or ``JobError/Code/notStartable`` if the job is in a queue, already started or
    ///   finished. These are thrown rather than trapped because whether a dependency has finished can
    ///   depend on timing.
    public func start() throws(JobError) {
        while true {
            let (deps, count) = mutex.withLock { (dependencyList, dependencyList.count) }
            let unfinished = deps.filter { !$0.isFinished }
            if !unfinished.isEmpty {
                let names = unfinished.map(\.name)
                throw JobError(
                    code: .unfinishedDependencies, jobs: names,
                    message:
                        "cannot start job '\(name)': its dependencies \(names.map { "'\($0)'" }.joined(separator: ", ")) have not finished. Add it to a queue to wait for them."
                )
            }
            var stateSeen = JobState.initialized
            var queued = false
            let action: JobStateMachine.ManualStartAction? = mutex.withLock {
                guard dependencyList.count == count else { return nil }  // a dependency was added meanwhile
                if owningQueue != nil { queued = true; stateSeen = machine.state; return .notStartable(machine.state) }
                let action = machine.startManually()
                stateSeen = machine.state
                return action
            }
            switch action {
            case nil:
                continue
            case .run?:
                runBody(tellObservers: mutex.withLock { observerList.isEmpty ? false : appendEventLocked(.start) })
            case .finish?:
                Job.release(finishNow())
            case .notStartable?:
                let why = queued ? "it was added to a queue, which starts it" : "it is already \(stateSeen)"
                throw JobError(code: .notStartable, jobs: [name], message: "cannot start job '\(name)': \(why).")
            }
            return
        }
    }

    /// Called by a worker of the job's queue. Returns `false` if the job was cancelled meanwhile.
    func runFromQueue() -> Bool {
        let (run, tellObservers) = mutex.withLock {
            let run = machine.startFromQueue()
            return (run, run == .run && !observerList.isEmpty ? appendEventLocked(.start) : false)
        }
        guard run == .run else { return false }
        runBody(tellObservers: tellObservers)
        return true
    }

    private func runBody(tellObservers: Bool) {
        if tellObservers { Job.release(drainEvents()) }
        do {
            try execute()
            if finishesWhenExecuteReturns { complete(error: nil, onWorker: true) }
        } catch {
            complete(error: error, onWorker: true)
        }
    }

    /// The body completed. Finishing twice, or before starting, is a programming error.
    ///
    /// - Parameter onWorker: whether this is the thread that ran ``execute()``, still inside it (a queue
    ///   worker then looks for the next job by itself).
    func complete(error: (any Error)?, onWorker: Bool) {
        var misuse: JobState?
        let step: FinishStep = mutex.withLock {
            finishingOnWorker = onWorker
            switch machine.finish(error: error) {
            case .finish: return finishStepLocked()
            case .notExecuting(let state):
                misuse = state
                return .nothing
            }
        }
        if let misuse {
            let problem = misuse >= .finishing ? "finished twice" : "finished while \(misuse), before it started"
            preconditionFailure("Baton: job '\(name)' \(problem). Call finish exactly once, after the body started.")
        }
        Job.release(perform(step))
    }

    /// The machine just entered `finishing` (lock not held): deliver the finish.
    func finishNow() -> [Job] {
        perform(mutex.withLock { finishStepLocked() })
    }

    // MARK: Producing jobs

    /// Adds `job` to this job's queue and tells this job's observers.
    ///
    /// - Precondition: This job is executing and was started by a queue.
    public func produce(_ job: Job) {
        let (queue, state, drain): (JobQueue?, JobState, Bool) = mutex.withLock {
            let drain = machine.state == .executing && !observerList.isEmpty ? appendEventLocked(.produce(job)) : false
            return (owningQueue, machine.state, drain)
        }
        guard state == .executing, let queue else {
            preconditionFailure(
                "Baton: job '\(name)' produced '\(job.name)' while \(state)\(queue == nil ? " and in no queue" : ""). Produce jobs from the body of a job that a queue runs."
            )
        }
        queue.add(job)
        if drain { Job.release(drainEvents()) }
    }
}

/// The rarely used part of a job's state, allocated on first use. Guarded by the job's lock, like
/// every other field of the job.
final class JobExtras {
    var conditionList: [any JobCondition] = []
    /// Names of conditions still being evaluated (for diagnostics).
    var conditionsEvaluating: [String] = []
    var conditionTask: Task<Void, Never>?
    /// The categories to claim before executing, fixed when the job is added to a queue.
    var exclusivity: [ExclusivityCategory] = []
    /// Where the categories were requested, once they were (they must then be released).
    var exclusivityRequestedIn: ExclusivityScope?
    var fractionCompleted = 0.0
}

extension Job {
    // Accessors for the fields in `extras`: reading never allocates, writing a default value to a job
    // without extras does nothing. - Important: Use with the lock held.

    var conditionList: [any JobCondition] {
        get { extras?.conditionList ?? [] }
        set { if let extras = extrasForWriting(newValue.isEmpty) { extras.conditionList = newValue } }
    }
    var conditionsEvaluating: [String] {
        get { extras?.conditionsEvaluating ?? [] }
        set { if let extras = extrasForWriting(newValue.isEmpty) { extras.conditionsEvaluating = newValue } }
    }
    var conditionTask: Task<Void, Never>? {
        get { extras?.conditionTask }
        set { if let extras = extrasForWriting(newValue == nil) { extras.conditionTask = newValue } }
    }
    var exclusivity: [ExclusivityCategory] {
        get { extras?.exclusivity ?? [] }
        set { if let extras = extrasForWriting(newValue.isEmpty) { extras.exclusivity = newValue } }
    }
    var exclusivityRequestedIn: ExclusivityScope? {
        get { extras?.exclusivityRequestedIn }
        set { if let extras = extrasForWriting(newValue == nil) { extras.exclusivityRequestedIn = newValue } }
    }
    var fractionCompleted: Double {
        get { extras?.fractionCompleted ?? 0 }
        set { if let extras = extrasForWriting(newValue == 0) { extras.fractionCompleted = newValue } }
    }

    private func extrasForWriting(_ isDefault: Bool) -> JobExtras? {
        if let extras { return extras }
        if isDefault { return nil }
        let created = JobExtras()
        extras = created
        return created
    }
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
