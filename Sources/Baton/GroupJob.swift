/// A job made of child jobs: it finishes after every child finished, including children added while it
/// runs.
///
/// ```swift
/// let getEarthquakes = GroupJob(name: "get earthquakes", children: [download, parse, store])
/// queue.add(getEarthquakes)
/// ```
///
/// - Children run on the group's own queue (``maxConcurrentChildren`` at once) once the group
///   executes; until then they wait. They may depend on each other and on jobs outside the group.
/// - ``addChild(_:)`` works while the group runs — a child can decide the next step (a paged fetch
///   adds a request per page until the server says it is done) — and so does a child's
///   ``Job/produce(_:)``, which lands in the group. The group's observers hear of children added while
///   it runs as produced jobs.
/// - Override ``childDidFinish(_:outcome:)`` to react to each child; children added there keep the
///   group running.
/// - The group fails with ``GroupJobError`` (every failed child, by name) if any child failed.
///   Cancelling the group cancels its children.
/// - A group and its children may share an exclusivity category without deadlock: while the group
///   holds a category, its children hold it too (the group's categories are theirs).
///
/// ## Thread safety
/// All methods may be called from any thread; the group's own state is guarded by its lock.
open class GroupJob: AsynchronousJob, @unchecked Sendable {
    // @unchecked Sendable: every stored property below is guarded by the job's lock.
    @exclusivity(unchecked) private var waitingChildren: [Job] = []
    @exclusivity(unchecked) private var children: [Job] = []
    @exclusivity(unchecked) private var unfinishedChildren = 0
    @exclusivity(unchecked) private var failures: [GroupJobError.Failure] = []
    @exclusivity(unchecked) private var childQueue: JobQueue?
    @exclusivity(unchecked) private var started = false
    private let maxChildren: Int

    /// Creates a group.
    ///
    /// - Parameters:
    ///   - children: The first children; more can be added with ``addChild(_:)``.
    ///   - maxConcurrentChildren: How many children execute at once.
    public init(
        name: String? = nil, priority: JobPriority = .normal, children: [Job] = [],
        maxConcurrentChildren: Int = JobQueue.defaultMaxConcurrentJobs
    ) {
        waitingChildren = children
        maxChildren = maxConcurrentChildren
        super.init(name: name, priority: priority)
    }

    /// Every child added so far (empty once the group finished).
    public var childJobs: [Job] { mutex.withLock { children + waitingChildren } }

    /// Adds a child. Before the group executes it waits; while it executes it is added at once.
    ///
    /// - Precondition: The group has not finished. Adding to a finished group is a bug in the calling
    ///   code and stops the program with a message naming both jobs.
    public func addChild(_ child: Job) {
        addChildren([child])
    }

    /// Adds several children; see ``addChild(_:)``.
    public func addChildren(_ newChildren: [Job]) {
        let (queue, state, cancelled): (JobQueue?, JobState, Bool) = mutex.withLock {
            if !started && machine.state < .finishing { waitingChildren += newChildren }
            return (started ? childQueue : nil, machine.state, machine.isCancelled)
        }
        precondition(
            state < .finishing,
            "Baton: cannot add '\(newChildren.first?.name ?? "")' to group '\(name)': the group is already \(state)."
        )
        guard let queue else { return }
        if cancelled { newChildren.forEach { $0.cancel() } }  // a cancelled group runs no new work
        queue.add(newChildren)
        for child in newChildren { announceChild(child) }
    }

    /// Called once per child, after it finished and before the group decides whether it is done.
    /// Override it to react (and, for example, add the next child). The default does nothing.
    open func childDidFinish(_ child: Job, outcome: JobOutcome) {}

    /// The group's error once all children finished: the default fails with every failed child.
    /// Override it to decide differently (``RetryJob`` keeps only the last attempt's error).
    open func errorAfterChildren(failures: [GroupJobError.Failure]) -> (any Error)? {
        failures.isEmpty ? nil : GroupJobError(group: name, failures: failures)
    }

    public final override func execute() {
        let categories = mutex.withLock { exclusivity }
        let outer = queue?.exclusivityScope ?? .processWide
        let scope =
            categories.isEmpty
            ? outer : ExclusivityScope(childrenOf: name, parent: outer, inherited: Set(categories.map(\.key)))
        let childQueue = JobQueue(
            name: "\(name).children", maxConcurrentJobs: maxChildren, dispatchQueue: nil, exclusivityScope: scope,
            adoption: { [weak self] jobs in self?.adopt(jobs) }
        )
        let (initial, cancelled): ([Job], Bool) = mutex.withLock {
            self.childQueue = childQueue
            started = true
            defer { waitingChildren = [] }
            return (waitingChildren, machine.isCancelled)
        }
        if cancelled { initial.forEach { $0.cancel() } }
        childQueue.add(initial)
        finishIfDone()
    }

    /// Counts newly added jobs of the child queue (added by ``addChild(_:)``, by a child's `produce`,
    /// or generated by a child's condition) as children.
    private func adopt(_ jobs: [Job]) {
        mutex.withLock {
            unfinishedChildren += jobs.count
            children += jobs
        }
        for job in jobs {
            job.addObserver(
                BlockObserver(
                    onProgress: { [weak self] child, fraction in self?.childProgressed(child, fraction) },
                    onFinish: { [weak self] child, outcome in
                        self?.childProgressed(child, 1)
                        self?.childFinished(child, outcome)
                    }
                ))
        }
    }

    /// Tells the group's observers of `child` as a produced job.
    func announce(_ child: Job) {
        announceChild(child)
    }

    private func announceChild(_ child: Job) {
        let drain = mutex.withLock {
            machine.state == .executing && !observerList.isEmpty ? appendEventLocked(.produce(child)) : false
        }
        if drain { Job.release(drainEvents()) }
    }

    private func childFinished(_ child: Job, _ outcome: JobOutcome) {
        childDidFinish(child, outcome: outcome)
        mutex.withLock {
            if case .failed(let error) = outcome { failures.append(.init(child: child.name, error: error)) }
            unfinishedChildren -= 1
        }
        finishIfDone()
    }

    private func finishIfDone() {
        let failures: [GroupJobError.Failure]? = mutex.withLock {
            guard started, unfinishedChildren == 0, machine.state == .executing, !finishingGroup else { return nil }
            finishingGroup = true
            return self.failures
        }
        guard let failures else { return }
        finish(errorAfterChildren(failures: failures))
    }

    @exclusivity(unchecked) private var finishingGroup = false  // guarded by the job's lock
    /// Progress weights and last fractions of children, by child id (guarded by the job's lock).
    @exclusivity(unchecked) private var weights: [UInt64: Double] = [:]
    @exclusivity(unchecked) private var fractions: [UInt64: Double] = [:]

    /// Adds a child whose progress counts `weight` times as much as a child of weight 1 in the group's
    /// ``Job/progress`` (the group reports the weighted mean of its children's progress).
    public func addChild(_ child: Job, weight: Double) {
        mutex.withLock { weights[child.id] = max(0, weight) }
        addChild(child)
    }

    private func childProgressed(_ child: Job, _ fraction: Double) {
        let combined: Double? = mutex.withLock {
            fractions[child.id] = fraction
            var total = 0.0
            var done = 0.0
            for job in children {
                let weight = weights[job.id] ?? 1
                total += weight
                done += weight * (fractions[job.id] ?? 0)
            }
            return total > 0 ? done / total : nil
        }
        if let combined { reportProgress(combined) }
    }

    override func interruptBody() {
        let queue = mutex.withLock { childQueue }
        queue?.cancelAll()
    }

    override func dropClosures(executed: Bool) {
        // Children that never reached the child queue (the group was cancelled before it ran) must
        // still finish, or whoever waits for them would wait for ever.
        let orphans: [Job] = mutex.withLock {
            defer {
                waitingChildren = []
                children = []
                failures = []
                childQueue = nil
                weights = [:]
                fractions = [:]
            }
            return started ? [] : waitingChildren
        }
        for orphan in orphans {
            orphan.cancel()
            try? orphan.start()
        }
    }
}

/// Why a ``GroupJob`` failed: each failed child with its error.
public struct GroupJobError: Error, Sendable, CustomStringConvertible {
    public struct Failure: Sendable {
        /// The child's name.
        public let child: String
        public let error: any Error
    }

    /// The group's name.
    public let group: String
    public let failures: [Failure]

    public var description: String {
        "group '\(group)' failed: " + failures.map { "'\($0.child)' failed: \($0.error)" }.joined(separator: "; ")
    }
}
