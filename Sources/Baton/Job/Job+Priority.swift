/// Priority that flows through dependencies: a job waited for by a job of higher priority runs at that
/// priority until it finishes (the pattern of Swift's own task priority escalation), transitively,
/// across queues, through the dependencies conditions generate and into a group's children.
///
/// Each job counts, by priority, the jobs that wait for it with a priority above its own (the
/// *escalation counts*, in ``JobExtras``); its effective priority is the higher of its own and the
/// highest counted. A waiter counts itself on what it waits for at one level, `countedPriority`, fixed
/// under its lock together with the list of what it waits for: when its own effective priority
/// changes it moves its count there (one less at the old level, one more at the new one, on each), and
/// a waiter that finishes without running takes its count back. Counts change by increments only, so
/// the order in which two threads apply theirs does not matter.
///
/// What the effective priority changes: the ready list a job joins (a job already on one is put on the
/// higher one too; the entry that comes up first starts it, the other is skipped), the priority of an
/// ``AsyncJob``'s task and of the task evaluating its asynchronous conditions (raised, never lowered:
/// Swift tasks only escalate), and its own dependencies' and children's counts. A job on a ready list
/// keeps its place when its priority is lowered back.
struct PriorityCounts {
    private var counts: [Int32] = []
    /// The job's own priority when counting began: what a waiter must exceed to be counted. Fixed, so
    /// that a count and its taking back agree even if the job's priority is changed in between.
    var floor: JobPriority?

    mutating func add(_ priority: JobPriority, _ delta: Int32) {
        if counts.isEmpty { counts = Array(repeating: 0, count: JobPriority.allCases.count) }
        counts[priority.rawValue] += delta
    }

    /// The highest priority counted (a count can be below zero for a moment: increments from two
    /// threads may arrive in either order).
    var highest: JobPriority? {
        guard !counts.isEmpty else { return nil }
        for priority in JobPriority.allCases.reversed() where counts[priority.rawValue] > 0 { return priority }
        return nil
    }
}

extension JobCore {
    /// The job's priority as its queue uses it: its own, or higher while a job of higher priority waits
    /// for it.
    var effectivePriority: JobPriority {
        guard let counted = extras?.escalation.highest, counted > priority else { return priority }
        return counted
    }

    /// One waiter less at `old` and one more at `new` (either may be absent; only levels above the
    /// job's own priority are counted). Returns whether anything was counted and whether the effective
    /// priority changed. A job that finished keeps no counts.
    mutating func recount(remove old: JobPriority?, add new: JobPriority?) -> (counted: Bool, changed: Bool) {
        guard lifecycle.outcome == nil else { return (false, false) }
        let floor = extras?.escalation.floor ?? priority
        let removes = old.map { $0 > floor } ?? false
        let adds = new.map { $0 > floor } ?? false
        guard removes || adds else { return (false, false) }
        let before = effectivePriority
        let extras = extrasForWriting()
        if extras.escalation.floor == nil { extras.escalation.floor = floor }
        if removes, let old { extras.escalation.add(old, -1) }
        if adds, let new { extras.escalation.add(new, 1) }
        return (true, effectivePriority != before)
    }

    /// The level this job counts itself at on what it waits for, fixed now if it was not yet.
    mutating func countingPriority() -> JobPriority {
        if let counted = countedPriority { return counted }
        let counted = effectivePriority
        countedPriority = counted
        return counted
    }
}

extension Job {
    /// The priority the job runs at: its own ``priority``, or higher while a job of higher priority
    /// waits for it (directly or through others, in any queue, or as its group's child). It goes back
    /// down when such a waiter is cancelled before it runs.
    public var effectivePriority: JobPriority { withCore { $0.effectivePriority } }

    /// This waiter made a count on at least one of `dependencies` at `level` (registering with them):
    /// it takes its counts back when it finishes without running — or now, if it already did (it was
    /// cancelled while it registered).
    func countedOn(_ dependencies: [Job], at level: JobPriority) {
        let finishedWithoutRunning: Bool = withCore { core in
            switch core.lifecycle.state {
            case .handingOver(let ending, parked: false), .finished(let ending):
                return !ending.executed  // its completion was taken: it cannot take the counts back
            default:
                core.countsOnOthers = true
                return false
            }
        }
        if finishedWithoutRunning { Job.recount(dependencies, from: level, to: nil) }
    }

    /// Moves each job's count of a waiter from `old` to `new`, then carries every resulting change on.
    static func recount(_ jobs: [Job], from old: JobPriority?, to new: JobPriority?) {
        guard old != new else { return }
        var changed: [Job] = []
        for job in jobs where job.withCore({ $0.recount(remove: old, add: new) }).changed { changed.append(job) }
        if !changed.isEmpty { propagatePriority(from: changed) }
    }

    /// Carries changes of effective priority on, with a work list (no recursion): each job moves its
    /// counts on what it waits for and its children, goes on a higher ready list, or raises its task.
    static func propagatePriority(from jobs: [Job]) {
        var work = jobs
        while let job = work.popLast() {
            var requeue: (queue: JobQueue, priority: JobPriority, claims: Bool)?
            var moves: [(jobs: [Job], old: JobPriority?, new: JobPriority?)] = []
            var raiseTask: JobPriority?
            var raiseCondition: (Task<Void, Never>, JobPriority)?
            job.withCore { core in
                let effective = core.effectivePriority
                if let counted = core.countedPriority, counted != effective {
                    core.countedPriority = effective
                    if core.lifecycle.waitingFor != nil || core.lifecycle.publicState == .evaluatingConditions {
                        moves.append((core.allDependencies, counted, effective))
                        core.countsOnOthers = true
                    }
                }
                if let extras = core.extras, extras.group != nil {
                    // Children are counted while they wait for the group to run, and from when they are
                    // adopted by its child queue (see `GroupJob.adopt`); not while they join it.
                    let level: JobPriority? = effective > core.priority ? effective : nil
                    if extras.group!.childPriority != level {
                        let group = extras.group!
                        moves.append((group.waiting + group.children, group.childPriority, level))
                        extras.group!.childPriority = level
                    }
                }
                switch core.lifecycle.state {
                case .ready(.none):
                    if let queue = core.queue, effective > core.priority {
                        requeue = (queue, effective, core.extras?.categories.isEmpty == false)
                    }
                case .executing:
                    raiseTask = effective
                case .evaluatingConditions:
                    // Its asynchronous conditions run in a task: it starts only once they answered.
                    if let task = core.extras?.conditionTask { raiseCondition = (task, effective) }
                default:
                    break
                }
            }
            for (targets, old, new) in moves {
                for target in targets where target.withCore({ $0.recount(remove: old, add: new) }).changed {
                    work.append(target)
                }
            }
            if let (queue, priority, claims) = requeue { queue.reprioritize(job.id, priority, claims: claims) }
            if let raiseTask { job.escalateBody(to: raiseTask) }
            if let (task, priority) = raiseCondition { escalate(task, to: priority) }
        }
    }

    /// Raises a task's priority where Swift can (`Task.escalatePriority(to:)`, Swift 6.2 and, on Apple
    /// platforms, their 26 releases); elsewhere the task keeps the priority it started with.
    static func escalate(_ task: Task<Void, Never>, to priority: JobPriority) {
        #if compiler(>=6.2)
        if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, *) {
            task.escalatePriority(to: priority.taskPriority)
        }
        #endif
    }
}

extension JobQueue {
    /// A ready job's effective priority rose: it goes on that priority's ready list too (the entry that
    /// comes up first starts it; the other is skipped as stale).
    func reprioritize(_ id: UInt64, _ priority: JobPriority, claims: Bool) {
        startWorkers(
            lock.withLock {
                scheduler.raise(id, to: priority, claims: claims)
                return scheduler.workersToStart()
            })
    }
}
