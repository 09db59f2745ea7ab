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
/// ``AsyncJob``'s task (raised, never lowered: Swift tasks only escalate), and its own dependencies'
/// and children's counts. A job on a ready list keeps its place when its priority is lowered back.
struct PriorityCounts {
    private var counts: [Int32] = []

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

    /// One waiter less at `old` and one more at `new` (either may be absent). Returns whether the
    /// effective priority changed. A job that finished keeps no counts.
    mutating func recount(remove old: JobPriority?, add new: JobPriority?) -> Bool {
        guard lifecycle.outcome == nil else { return false }
        let before = effectivePriority
        if let old, old > priority { extrasForWriting().escalation.add(old, -1) }
        if let new, new > priority { extrasForWriting().escalation.add(new, 1) }
        return effectivePriority != before
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

    /// Counts `waiter`, which counts itself at `level`, on this job (registered as its dependent).
    /// Returns whether this job's effective priority changed.
    func countWaiter(at level: JobPriority) -> Bool {
        withCore { $0.recount(remove: nil, add: level) }
    }

    /// A waiter that counted itself on `dependencies` at `level` made a count on at least one of them.
    func markCounting() {
        withCore { $0.countsOnOthers = true }
    }

    /// Moves each job's count of a waiter from `old` to `new`, then carries every resulting change on.
    static func recount(_ jobs: [Job], from old: JobPriority?, to new: JobPriority?) {
        guard old != new else { return }
        var changed: [Job] = []
        for job in jobs where job.withCore({ $0.recount(remove: old, add: new) }) { changed.append(job) }
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
                    let level: JobPriority? = effective > core.priority ? effective : nil
                    if extras.group!.childPriority != level {
                        let group = extras.group!
                        moves.append(
                            (group.waiting + group.children + group.joining.values.joined(), group.childPriority, level)
                        )
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
                default:
                    break
                }
            }
            for (targets, old, new) in moves {
                for target in targets where target.withCore({ $0.recount(remove: old, add: new) }) {
                    work.append(target)
                }
            }
            if let (queue, priority, claims) = requeue { queue.reprioritize(job.id, priority, claims: claims) }
            if let raiseTask { job.escalateBody(to: raiseTask) }
        }
    }
}

extension JobQueue {
    /// A ready job's effective priority rose: it goes on that priority's ready list too (the entry that
    /// comes up first starts it; the other is skipped as stale).
    func reprioritize(_ id: UInt64, _ priority: JobPriority, claims: Bool) {
        startWorkers(
            lock.withLock {
                guard scheduler.members[id] != nil else { return 0 }
                scheduler.markReady(id, priority: priority, claims: claims)
                return scheduler.workersToStart()
            })
    }
}
