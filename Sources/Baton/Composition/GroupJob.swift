/// A job made of child jobs: it finishes after every child finished, including children added while it
/// runs.
///
/// ```swift
/// let getEarthquakes = GroupJob(name: "get earthquakes", children: [download, parse, store])
/// queue.add(getEarthquakes)
/// ```
///
/// - Children run on the group's own queue (`maxConcurrentChildren` at once) once the group
///   executes; until then they wait. They may depend on each other and on jobs outside the group (a
///   child that depends on its own group, or a group on its own child, is a dependency cycle: both
///   finish failed, naming it).
/// - ``addChild(_:)`` works while the group runs — a child can decide the next step (a paged fetch
///   adds a request per page until the server says it is done) — and so does a child's
///   ``Job/produce(_:)``, which lands in the group. The group's observers hear of children added while
///   it runs as produced jobs. A child added once the group has decided to finish (a race with its
///   last child) does not run: it finishes cancelled with ``JobError/Code/groupFinished``.
/// - The group finishes after its last child *finished*: when its observers or awaiting callers hear
///   of it, every child reports ``Job/isFinished``.
/// - Override ``childDidFinish(_:outcome:)`` to react to each child; children added there keep the
///   group running.
/// - The group fails with ``GroupJobError`` (every failed child) if any child failed; it is cancelled
///   if it was asked to cancel and a child ended cancelled. Cancelling it cancels its children; the
///   children of a group that finished without running finish cancelled.
///
/// ## Exclusivity
/// A group that asks for exclusivity categories claims, at once and before it runs, its own categories
/// and those of every child (and grandchild) it has by then. It then *lends* them to its children one
/// at a time — one unit each, whatever limit the children name: two children that ask for a category
/// the group holds exclude each other, even for a category of limit 2 —, outsiders wait for the whole
/// group, and no claim ever waits while holding another, so groups cannot deadlock each other or their
/// children. A job that joins later — a child added while the group runs, or a job a child's condition
/// generates (the condition is evaluated after the group started) — and asks for a category its group
/// does not hold fails with ``JobError/Code/categoryNotHeldByGroup`` instead of waiting for it while the
/// group holds others (which could deadlock): give such a category to the group itself. A group with no
/// categories of its own claims nothing: its children claim theirs as any job does.
///
/// A cycle through a category — the group holds "db", its child depends on an outsider that wants "db"
/// — is detected like a dependency cycle: the waiting child fails with
/// ``JobError/Code/dependencyCycle`` and the outsider runs once the group let go.
///
/// - Important: A running group occupies a slot of its queue until its last child finished. If every
///   slot of a queue is held by groups whose children wait for jobs of that same queue, nothing can
///   run (the classic `NSOperationQueue` trap; `diagnose()` shows the jobs waiting for "a free slot").
///   Give such children's dependencies another queue, or the queue room for them. The same holds for
///   a job that its queue started and that waits for a category the group holds: it keeps its slot
///   meanwhile (`diagnose()` names the category and the group).
///
/// ## Thread safety
/// All methods may be called from any thread; the group's own state is part of the job's guarded state.
open class GroupJob: Job, @unchecked Sendable {
    // @unchecked Sendable: `maxChildren` is immutable; the group's state lives in the job's core.
    private let maxChildren: Int

    /// Creates a group.
    ///
    /// - Parameters:
    ///   - name: Used in diagnostics and errors; see ``Job/init(name:priority:)``.
    ///   - priority: The order among ready jobs of the same queue.
    ///   - children: The first children; more can be added with ``addChild(_:)``.
    ///   - maxConcurrentChildren: How many children execute at once.
    public init(
        name: String? = nil, priority: JobPriority = .normal, children: [Job] = [],
        maxConcurrentChildren: Int = JobQueue.defaultMaxConcurrentJobs
    ) {
        maxChildren = maxConcurrentChildren
        super.init(name: name, priority: priority)
        withGroup { _ in }  // a group always has its state
        if !children.isEmpty { addChildren(children) }
    }

    deinit {
        // Children that never ran, released without recursion (groups may nest deeply).
        Job.releaseIteratively(takeOwnedChildren())
    }

    /// The group's state, under the job's lock.
    @inline(__always)
    final func withGroup<T>(_ body: (inout GroupState) -> T) -> T {
        withCore { core in
            let extras = core.extrasForWriting()
            if extras.group == nil { extras.group = GroupState() }
            return body(&extras.group!)
        }
    }

    /// Every child added so far (empty once the group finished; a ``RepeatJob`` lists only its current
    /// iteration).
    public var childJobs: [Job] { withGroup { $0.children + $0.waiting } }

    /// Adds a child. Before the group executes it waits; while it executes it is added at once.
    public func addChild(_ child: Job) {
        addChildren([child])
    }

    /// Adds a child whose progress counts `weight` times as much as a child of weight 1 in the group's
    /// ``Job/progress`` (the group reports the weighted mean of its children's progress).
    public func addChild(_ child: Job, weight: Double) {
        withGroup { $0.progress.setWeight(max(0, weight), of: child.id) }
        addChild(child)
    }

    /// Adds several children; see ``addChild(_:)``.
    public func addChildren(_ newChildren: [Job]) {
        guard !newChildren.isEmpty else { return }
        // Misuse stops the program here, on the caller's thread, rather than when the group starts
        // (where the stack no longer shows who added the child).
        for (index, child) in newChildren.enumerated() {
            var otherGroup: GroupJob?
            var problem: String? = child.withCore { core in
                if child === self { return "a group cannot be its own child" }
                if let parent = core.extras?.parent {
                    if parent === self { return "it is already a child of this group" }
                    otherGroup = parent
                }
                if let queue = core.queue { return "it is already in queue '\(queue.name)'" }
                let state = core.lifecycle.publicState
                if state != .initialized { return "it is already \(state) (started by hand)" }
                return nil
            }
            // A child of another group that will run (a group never run leaves its children free to go).
            if problem == nil, let otherGroup, otherGroup.state != .initialized || otherGroup.queue != nil {
                problem = "it is already a child of group '\(otherGroup.name)'"
            }
            if problem == nil, newChildren[..<index].contains(where: { $0 === child }) { problem = "it is given twice" }
            if let problem {
                fatalError(
                    "Baton: cannot add job '\(child.name)' as a child of group '\(name)': \(problem). A job runs once, in one place; add a new job."
                )
            }
        }
        for child in newChildren {
            child.withCore { $0.extrasForWriting().parent = self }
        }
        enum Decision {
            case wait
            case add(JobQueue, cancelled: Bool, joining: UInt64)
            case tooLate(JobState)
        }
        // A group its queue started, waiting for its claim, claims anew when the new children (or theirs)
        // ask for categories the claim lacks. Those are read without the group's lock (each child's in
        // turn), and only for a group in that state: the walk through nested groups costs their size.
        var asked: Set<String>?
        var decision = Decision.wait
        var withdrawn: (scope: ExclusivityScope, ticket: ClaimTicket)?
        var reclaim: Step
        // The level the group counts itself at on its children, read where they join its lists.
        var childPriority: JobPriority?
        repeat {
            var readCategories = false
            reclaim = step { core in
                let state = core.lifecycle.publicState
                let group = core.extrasForWriting()
                if group.group == nil { group.group = GroupState() }
                if !group.group!.started && state < .finishing {
                    guard !core.lifecycle.awaitsAnyClaim || asked != nil else {
                        readCategories = true  // read them, then look again
                        return .none
                    }
                    group.group!.waiting += newChildren
                    childPriority = group.group!.childPriority
                    let claimed = Set(group.group!.claimed.map(\.key))
                    guard core.lifecycle.awaitsAnyClaim, let asked, !asked.isSubset(of: claimed) else { return .none }
                    let action = core.lifecycle.withdrawClaimToReady()
                    if let scope = core.queue?.exclusivityScope, let ticket = core.extras?.claim {
                        withdrawn = (scope, ticket)
                        core.extras?.claim = nil
                    }
                    return action
                }
                if state == .executing, !group.group!.decided, let queue = group.group!.childQueue {
                    let token = group.group!.beginJoining(newChildren)  // counted when adopted
                    decision = .add(queue, cancelled: core.lifecycle.isCancelled, joining: token)
                } else {
                    decision = .tooLate(state)
                }
                return .none
            }
            if readCategories { asked = Self.categoryKeys(of: newChildren) } else { break }
        } while true
        // Children of a group that runs at a raised priority run at it too.
        if let childPriority { Job.recount(newChildren, from: nil, to: childPriority) }
        switch decision {
        case .wait:
            guard case .enqueueReady = reclaim.action else { return }
            reclaim.queue?.slotReturned()
            Propagation.run { work in
                if let (scope, ticket) = withdrawn {
                    for (granted, job) in scope.release(ticket) { job.claimGranted(granted, &work) }
                }
                perform(inPlace: &reclaim, &work)
            }
            return
        case .tooLate(let state):
            let error = JobError.groupFinished(children: newChildren.map(\.name), group: name, state: state)
            Propagation.run { work in
                for child in newChildren { work.abandon(child, outcome: .cancelled(error)) }
            }
        case .add(let queue, let cancelled, let token):
            join(newChildren, to: queue, token: token, cancelled: cancelled) {
                // Observers hear of a child before it can start (as with `produce`): a child that adds
                // the next one is always reported after the child that added it.
                for child in newChildren { announce(child) }
            }
        }
    }

    /// Adds children that `GroupState.beginJoining` registered under `token` to the child queue, then
    /// counts them as joined. `cancelled`: whether the group was cancelled when they were registered
    /// (a cancelled group runs no new work). `beforeAdding` runs after that cancel, before the queue
    /// can start them.
    private func join(
        _ children: [Job], to queue: JobQueue, token: UInt64, cancelled: Bool, beforeAdding: () -> Void = {}
    ) {
        if cancelled { cancelWithGroupsReason(children) }
        beforeAdding()
        // A cancel of the group from now on reaches the children through `joining` (see
        // `interruptBody`) until they are members of the queue, even one that a child's condition makes
        // while `add` evaluates it, before the child could start.
        queue.add(children)
        // (`joining` already passed on any cancel since the check; this is the same rule, said once more.)
        if !cancelled, isCancelled { cancelWithGroupsReason(children) }
        let joined = withGroup { $0.endJoining(token) }
        _ = joined  // released here, outside the lock
        Propagation.run { finishIfDone(&$0) }
    }

    /// The group finishes when its last child did, not when ``execute()`` returns.
    override var finishesWhenExecuteReturns: Bool { false }

    /// Called once per child, after it finished and before the group decides whether it is done.
    /// Override it to react (and, for example, add the next child). The default does nothing.
    open func childDidFinish(_ child: Job, outcome: JobOutcome) {}

    /// The group's error once all children finished: the default fails with every failed child.
    /// Override it to decide differently (``RetryJob`` keeps only the last attempt's error).
    open func errorAfterChildren(failures: [GroupJobError.Failure]) -> (any Error)? {
        failures.isEmpty ? nil : GroupJobError(groupName: name, failures: failures)
    }

    public final override func execute() {
        let parentQueue = queue
        let outer = parentQueue?.exclusivityScope ?? .processWide
        let claimed = withGroup { $0.claimed }
        let scope = claimed.isEmpty ? outer : ExclusivityScope(lending: claimed, of: name, parent: outer)
        // Children run on Dispatch's global queue, or on threads of their own if the group's queue
        // gives its bodies threads of their own (``JobQueue/WorkerThreads/dedicated``).
        let dedicated = parentQueue.map { $0.dispatchQueue == nil } ?? false
        let childQueue = JobQueue(
            name: "\(name).children", maxConcurrentJobs: maxChildren,
            dispatchQueue: dedicated ? nil : JobQueue.globalDispatchQueue,
            exclusivityScope: scope,
            instruments: parentQueue?.instruments ?? JobQueue.defaultInstruments,
            adoption: { [weak self] jobs in self?.adopt(jobs) })
        let (initial, cancelled, token, counted): ([Job], Bool, UInt64, JobPriority?) = withCore { core in
            let group = core.extrasForWriting()
            group.group!.childQueue = childQueue
            group.group!.started = true
            // Joining, as in `addChildren`: a cancel while the queue adds them (a child's condition may
            // make one) reaches them before they can start.
            let initial = group.group!.waiting
            group.group!.waiting = []
            return (
                initial, core.lifecycle.isCancelled, group.group!.beginJoining(initial), group.group!.childPriority
            )
        }
        // Counted from now on when the child queue adopts them.
        if let counted { Job.recount(initial, from: counted, to: nil) }
        join(initial, to: childQueue, token: token, cancelled: cancelled)
    }

    /// Counts the jobs joining the child queue (added by ``addChild(_:)``, by a child's `produce`, or
    /// generated by a child's condition) as children.
    private func adopt(_ jobs: [Job]) {
        for job in jobs {
            // Children given with addChild know their group already; produced and generated jobs learn it.
            job.withCore { core in
                if core.extras?.parent !== self { core.extrasForWriting().parent = self }
            }
        }
        let (childPriority, cancelled): (JobPriority?, Bool) = withCore { core in
            let extras = core.extrasForWriting()
            if extras.group == nil { extras.group = GroupState() }
            extras.group!.unfinished += jobs.count
            extras.group!.children += jobs
            for job in jobs { extras.group!.progress.add(job.id) }
            return (extras.group!.childPriority, core.lifecycle.isCancelled)
        }
        // A cancelled group runs no new work: a job a child produces (or its condition makes) after the
        // cancel is cancelled before it joins, as a child added with `addChild` is. (A cancel after this
        // reaches it as one of the group's children.)
        if cancelled { cancelWithGroupsReason(jobs) }
        // Children of a group that runs at a raised priority run at it too (see `Job+Priority.swift`).
        if let childPriority { Job.recount(jobs, from: nil, to: childPriority) }
    }

    /// Tells the group's observers of `child` as a produced job.
    func announce(_ child: Job) {
        let mustDeliver = withCore { core in
            core.lifecycle.publicState == .executing && !core.observers.isEmpty
                ? core.lifecycle.record(.produce(child, into: nil)) : false
        }
        if mustDeliver { Propagation.run { deliver(&$0) } }
    }

    /// A child finished (it reports `isFinished`). Called from the work list.
    func childFinished(_ child: Job, outcome: JobOutcome, _ work: inout Propagation) {
        // A group that has finished hears no more (the children it leaves behind finish after it): a
        // hook that adds a child there would add one that is too late, which finishes and is reported
        // here again, and again. Nor does a group that never ran hear of the children it left behind.
        guard withCore({ $0.extras?.group?.started == true }) else { return }
        childDidFinish(child, outcome: outcome)
        let failure =
            outcome.didFail
            ? GroupJobError.Failure(childName: child.name, childID: child.id, error: outcome.error!) : nil
        // One locked step: count the child, update the group's progress, decide whether it is done.
        var progress: (recorded: (parent: GroupJob?, mustDeliver: Bool)?, fraction: Double)?
        var forgotten: Job?
        let keeps = keepsFinishedChildren
        let decided: (failures: [GroupJobError.Failure], cancelled: Bool)? = withCore { core in
            guard let extras = core.extras, extras.group != nil else { return nil }
            if !keeps, let index = extras.group!.children.firstIndex(where: { $0 === child }) {
                forgotten = extras.group!.children.remove(at: index)  // released after the lock
            }
            if let failure { extras.group!.failures.append(failure) }
            if outcome.isCancelled { extras.group!.anyChildCancelled = true }
            extras.group!.unfinished -= 1
            if let fraction = extras.group!.progress.finished(child.id) {
                progress = (core.recordProgress(fraction), fraction)
            }
            return core.decideToFinish()
        }
        _ = forgotten
        if let progress { Job.propagate(progress.recorded, from: self, progress.fraction) }
        finish(decided, &work)
    }

    /// Whether ``childJobs`` keeps the children that finished (a group that runs one child after
    /// another without end lets go of them: ``RepeatJob``).
    var keepsFinishedChildren: Bool { true }

    /// A child reported progress; returns the group's new progress, for the caller to report.
    func childProgressed(_ child: Job, _ fraction: Double) -> Double? {
        withGroup { $0.progress.update(child.id, to: fraction) }
    }

    private func finishIfDone(_ work: inout Propagation) {
        finish(withCore { $0.decideToFinish() }, &work)
    }

    /// Finishes the group once it decided to (all children finished, no `addChildren` in progress).
    private func finish(_ decided: (failures: [GroupJobError.Failure], cancelled: Bool)?, _ work: inout Propagation) {
        guard let decided else { return }
        let error = errorAfterChildren(failures: decided.failures) ?? (decided.cancelled ? CancellationError() : nil)
        bodyCompleted(error: error, &work)
    }

    /// Cancels jobs that join the group after it was cancelled, with the group's reason (as its children
    /// were).
    private func cancelWithGroupsReason(_ jobs: [Job]) {
        let reason = withCore { $0.lifecycle.cancelReason } ?? CancellationError()
        for job in jobs { job.cancel(reason: reason) }
    }

    override func interruptBody(reason: any Error, _ work: inout Propagation) {
        // The children are cancelled through the work list: cancelling groups nested deeply must not
        // recurse. With the group's reason: a child (and its observers) can tell the group's time limit
        // from a user's cancel.
        // Children being added, children adopted (a produced job counted before it became a member of the
        // child queue), then the child queue's members.
        let (childQueue, joining, adopted) = withGroup { ($0.childQueue, $0.joining, $0.children) }
        for children in joining.values {
            for child in children { work.cancel(child, reason: reason) }
        }
        for child in adopted where !child.isFinished { work.cancel(child, reason: reason) }
        guard let childQueue else { return }
        for child in childQueue.lock.withLock({ Array(childQueue.scheduler.members.values) }) {
            work.cancel(child, reason: reason)
        }
    }

    /// The keys of the categories `children` and their children (for groups, those waiting to start) ask
    /// for. Takes each child's lock in turn, never two at once.
    static func categoryKeys(of children: [Job]) -> Set<String> {
        var keys: Set<String> = []
        var work = children
        while let job = work.popLast() {
            keys.formUnion(job.categoriesOfConditions.map(\.key))
            if let group = job as? GroupJob { work += group.withGroup { $0.waiting } }
        }
        return keys
    }

    override func categoriesToClaim(own: [ExclusivityCategory]) -> [ExclusivityCategory] {
        // Its own categories and those of every child and grandchild it has now, claimed at once.
        var keys = Set(own.map(\.key))
        var claim = own
        var work = withGroup { $0.waiting }
        while let job = work.popLast() {
            for category in job.categoriesOfConditions where keys.insert(category.key).inserted {
                claim.append(category)
            }
            if let group = job as? GroupJob { work += group.withGroup { $0.waiting } }
        }
        withGroup { $0.claimed = claim }
        return claim
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        // The job's extras were moved out of its core when it finished: nobody else can reach them.
        guard let state = extras?.takeGroup() else { return [] }
        // Children that never reached the child queue (the group finished without running) must still
        // finish, or whoever waits for them would wait for ever.
        let orphans = state.started ? [] : state.waiting
        guard !orphans.isEmpty else { return [] }
        let error = JobError.groupFinished(children: orphans.map(\.name), group: name, outcome: outcome)
        return orphans.map { ($0, .cancelled(error)) }
    }

    override func takeOwnedChildren() -> [Job] {
        guard let state = withCore({ $0.extras?.takeGroup() }) else { return [] }
        return state.waiting + state.children
    }
}

/// A group's state, kept in the job's core (so it is guarded by the job's lock).
struct GroupState {
    /// The level the group counts itself at on its children while its effective priority is above its
    /// own (see `Job+Priority.swift`).
    var childPriority: JobPriority?
    /// Children added before the group runs.
    var waiting: [Job] = []
    /// Children that joined the child queue.
    var children: [Job] = []
    /// Children that joined and have not finished.
    var unfinished = 0
    /// `addChildren` calls between their check and their children joining: the group must not finish.
    var adding = 0
    /// The children of those calls, by call: a cancel of the group reaches them too (adding them to the
    /// queue runs their conditions, which may cancel the group before they are its queue's members).
    var joining: [UInt64: [Job]] = [:]
    var nextJoining: UInt64 = 0
    var failures: [GroupJobError.Failure] = []
    var anyChildCancelled = false
    var childQueue: JobQueue?
    var started = false
    /// The group decided to finish: children added from now on are too late.
    var decided = false
    /// The categories the group claimed for itself and its children.
    var claimed: [ExclusivityCategory] = []
    var progress = GroupProgress()

    /// Registers children about to join the child queue: the group cannot finish, and a cancel of the
    /// group reaches them, until `endJoining` with the token returned.
    mutating func beginJoining(_ children: [Job]) -> UInt64 {
        adding += 1
        let token = nextJoining
        nextJoining += 1
        joining[token] = children
        return token
    }

    /// The children registered under `token` are members of the child queue now; returns them, to be
    /// released by the caller outside the lock.
    mutating func endJoining(_ token: UInt64) -> [Job]? {
        adding -= 1
        return joining.removeValue(forKey: token)
    }
}

extension JobCore {
    /// Whether the group can finish now (it runs, every child finished, no `addChildren` is between its
    /// check and its children joining); if so it decides to, once: the failures to report, and whether
    /// it ends cancelled.
    mutating func decideToFinish() -> (failures: [GroupJobError.Failure], cancelled: Bool)? {
        guard case .executing = lifecycle.state, let extras, let group = extras.group,
            group.started, group.unfinished == 0, group.adding == 0, !group.decided
        else { return nil }
        extras.group!.decided = true
        return (group.failures, group.anyChildCancelled && lifecycle.isCancelled)
    }
}

extension JobExtras {
    /// Moves the group's state out (to be dropped after unlocking).
    func takeGroup() -> GroupState? {
        defer { group = nil }
        return group
    }
}

/// The weighted mean of the children's progress, kept up to date in constant time per report. Only
/// children with a weight or an unfinished report have an entry, so a group of many plain children
/// keeps two empty tables.
struct GroupProgress {
    private var weights: [UInt64: Double] = [:]
    /// The last fraction of children that reported one and have not finished.
    private var fractions: [UInt64: Double] = [:]
    private var totalWeight = 0.0
    private var done = 0.0

    mutating func setWeight(_ weight: Double, of child: UInt64) { weights[child] = weight }

    /// A child joined.
    mutating func add(_ child: UInt64) { totalWeight += weights[child] ?? 1 }

    /// A child reported `fraction`; returns the group's new progress.
    mutating func update(_ child: UInt64, to fraction: Double) -> Double? {
        let weight = weights[child] ?? 1
        let previous = fractions.updateValue(fraction, forKey: child) ?? 0
        done += weight * (fraction - previous)
        return current
    }

    /// A child finished: it counts as done; its entries go.
    mutating func finished(_ child: UInt64) -> Double? {
        let weight = weights.isEmpty ? 1 : weights.removeValue(forKey: child) ?? 1
        let previous = fractions.isEmpty ? 0 : fractions.removeValue(forKey: child) ?? 0
        done += weight * (1 - previous)
        return current
    }

    private var current: Double? { totalWeight > 0 ? min(max(done / totalWeight, 0), 1) : nil }
}

/// Why a ``GroupJob`` failed: each failed child with its error.
public struct GroupJobError: Error, Sendable, CustomStringConvertible {
    public struct Failure: Sendable {
        /// The child's name.
        public let childName: String
        /// The child's ``Job/id``.
        public let childID: UInt64
        public let error: any Error
    }

    /// The group's name.
    public let groupName: String
    public let failures: [Failure]

    public var description: String {
        "group '\(groupName)' failed: "
            + failures.map { "'\($0.childName)' failed: \($0.error)" }.joined(separator: "; ")
    }
}
