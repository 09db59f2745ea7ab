import Dispatch

/// Everything about a job that changes, in one value that only the job's lock gives access to (see
/// ``Job/withCore(_:)``): the lifecycle machine and the references the job holds.
///
/// Methods here run under the lock, so they never call out. Whatever a step gives up (dependents to
/// release, observers, closures) is *moved out* and returned, and dropped by the caller after unlocking.
struct JobCore {
    var lifecycle = JobLifecycle()
    var name: String?
    /// The job's own priority (see `effectivePriority` in `Job+Priority.swift`).
    var priority: JobPriority
    /// The level this job counts itself at on the jobs it waits for, once it registered with them
    /// (see `Job+Priority.swift`).
    var countedPriority: JobPriority?
    /// Whether that count raised a count on one of them: if the job finishes without running, it takes
    /// its count back.
    var countsOnOthers = false
    /// The jobs this job waits for, as the caller added them.
    var dependencies: [Job] = []
    /// The jobs waiting for this one.
    var dependents: [Job] = []
    var observers: [any JobObserver] = []
    /// How many of `observers` hear only the finish (``Job/onFinish(_:)``'s): a job observed by nothing
    /// else records no start, cancel or progress events for them.
    var finishObservers = 0
    /// Resumed when the hand-over ends (see `JobLifecycle.State.handingOver`), with the dependents.
    var waiters: [JobWaiter] = []
    /// The queue the job was added to, until it finishes.
    var queue: JobQueue?
    /// For cycle detection (see ``CycleDetector``): the `add` call that enqueued the job and its index
    /// in it, and whether it must be searched once that call registered everything.
    var cycleMark = CycleMark()
    /// What most jobs never need, allocated on first use.
    var extras: JobExtras?

    init(name: String?, priority: JobPriority) {
        self.name = name
        self.priority = priority
    }

    var displayName: String? { name }

    /// Whether an observer wants the job's events before its finish (start, cancel, progress).
    var wantsEvents: Bool { observers.count > finishObservers }

    /// The extras, created if needed.
    mutating func extrasForWriting() -> JobExtras {
        if let extras { return extras }
        let created = JobExtras()
        extras = created
        return created
    }

    /// Everything the job waits for: its own dependencies, then those its conditions generated.
    var allDependencies: [Job] {
        guard let generated = extras?.generated, !generated.isEmpty else { return dependencies }
        return dependencies + generated
    }

    /// What a job that has just decided to finish without running leaves behind (empty otherwise):
    /// - `orphans`: a group's children it never started, which must finish before it;
    /// - `made`: if it was cancelled, the dependencies its conditions made, which must not run for it
    ///   now (they are cancelled with the reason `reason`).
    mutating func takeLeftBehind() -> LeftBehind {
        guard let extras, extras.group != nil || !extras.made.isEmpty, case .finishing(let ending) = lifecycle.state,
            !ending.executed
        else { return LeftBehind() }
        var left = LeftBehind()
        if let group = extras.group, !group.started, !group.waiting.isEmpty {
            left.orphans = group.waiting
            extras.group!.waiting = []
        }
        if case .cancelled(let reason) = ending.outcome, !extras.made.isEmpty {
            left.made = extras.made
            left.reason = reason
            extras.made = []
        }
        return left
    }

    /// See `takeLeftBehind()`.
    struct LeftBehind {
        var orphans: [Job] = []
        var made: [Job] = []
        var reason: (any Error)? = nil
        var isEmpty: Bool { orphans.isEmpty && made.isEmpty }
    }

    /// The jobs a job that nothing references any more keeps alive: taken out so that they can be
    /// released iteratively.
    mutating func takeOwnedJobs() -> [Job] {
        var owned = dependencies
        dependencies = []
        if let extras {
            owned += extras.generated
            extras.generated = []
            extras.generatedBy = []
            extras.generatedPaths = []
            extras.made = []
        }
        return owned
    }

    /// The job hands over now (`.now`) or once its `execute()` returns (`.parked`): takes what it
    /// must hand over and everything it lets go of, or nothing while parked. Waiters and dependents stay
    /// until `endHandOver()`.
    mutating func handOver(_ start: JobLifecycle.HandOver) -> JobCompletion? {
        guard case .now(let ending) = start else { return nil }
        return takeCompletion(ending)
    }

    /// Takes what the job must hand over (`ending`) and everything it lets go of.
    mutating func takeCompletion(_ ending: JobLifecycle.Ending) -> JobCompletion {
        defer {
            queue = nil
            dependencies = []
            observers = []
            finishObservers = 0
            extras = nil
        }
        var uncount: (JobPriority, [Job])?
        if countsOnOthers, !ending.executed, let counted = countedPriority { uncount = (counted, allDependencies) }
        return JobCompletion(
            ending: ending, queue: queue, uncount: uncount,
            released: Released(dependencies: dependencies, observers: observers, extras: extras))
    }

    /// The hand-over is done: the job is finished. Takes the waiters and dependents to release.
    mutating func endHandOver() -> HandOverEnd {
        let (_, holdsSlot) = lifecycle.handOverEnded()
        defer {
            waiters = []
            dependents = []
        }
        return HandOverEnd(waiters: waiters, dependents: dependents, holdsSlot: holdsSlot)
    }

    /// What a job gave up when it finished; dropped once the lock is released.
    struct Released {
        let dependencies: [Job]
        let observers: [any JobObserver]
        let extras: JobExtras?
    }
}

/// What a finished job hands over, to be carried out outside its lock.
struct JobCompletion {
    let ending: JobLifecycle.Ending
    let queue: JobQueue?
    /// A job that finished without running takes back the count it made on what it waited for (see
    /// `Job+Priority.swift`): at this level, on these jobs.
    let uncount: (JobPriority, [Job])?
    /// Dropped when the completion is (outside the lock).
    let released: JobCore.Released
}

/// What the end of a hand-over releases, outside the job's lock.
struct HandOverEnd {
    let waiters: [JobWaiter]
    let dependents: [Job]
    /// Whether the queue must still take back the job's slot (it was not given back early).
    let holdsSlot: Bool
}

/// The rarely used part of a job's state. A reference, so that jobs without it pay one word; guarded by
/// the job's lock like the rest of ``JobCore``.
final class JobExtras {
    // Every field is guarded by the job's lock (ThreadSanitizer would report an unlocked access), so
    // the run-time exclusivity checks are redundant.
    @exclusivity(unchecked) var conditions: [any JobCondition] = []
    /// How many of the conditions must be evaluated (the others only add categories or dependencies).
    @exclusivity(unchecked) var evaluatedConditions = 0
    /// Dependencies the conditions generated (see ``JobCondition/dependencies(for:)``): the job waits for
    /// them too, but ``Job/dependencies`` lists only the ones the caller added.
    @exclusivity(unchecked) var generated: [Job] = []
    /// The name of the condition that generated each of `generated`.
    @exclusivity(unchecked) var generatedBy: [String] = []
    /// The paths of the conditions that generated each of `generated` (see ``ConditionTree``): a path is
    /// the condition's index among the job's, then, for one inside a composite, among the composite's.
    @exclusivity(unchecked) var generatedPaths: [[[Int]]] = []
    /// Those of `generated` that its conditions made (they joined the queue with the job): cancelled if
    /// the job is cancelled before it runs.
    @exclusivity(unchecked) var made: [Job] = []
    /// Names of conditions still being evaluated (for diagnostics).
    @exclusivity(unchecked) var evaluating: [String] = []
    @exclusivity(unchecked) var conditionTask: Task<Void, Never>?
    /// The categories its conditions ask for (each key once), claimed before the job executes.
    @exclusivity(unchecked) var categories: [ExclusivityCategory] = []
    /// The claim made for them, once its queue started the job.
    @exclusivity(unchecked) var claim: ClaimTicket?
    @exclusivity(unchecked) var fractionCompleted = 0.0
    /// The group the job is a child of (weak: a group that never ran must not be kept alive by the
    /// children it keeps).
    @exclusivity(unchecked) weak var parent: GroupJob?
    /// For a ``GroupJob``: its children and their accounting.
    @exclusivity(unchecked) var group: GroupState?
    /// How many jobs of each priority above this job's own wait for it (see `Job+Priority.swift`).
    @exclusivity(unchecked) var escalation = PriorityCounts()
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

/// What cycle detection needs to know about a job (see ``CycleDetector``).
struct CycleMark {
    /// The `add` call that enqueued the job (0 for a single job) and the job's index in it.
    var batch: UInt64 = 0
    var index: Int32 = 0
    /// Whether something other than a later job of the same `add` call waits for this job.
    var mayCloseCycle = false
}

extension Job {
    /// Releases jobs (and what they own) with a work list instead of recursion: for each job that
    /// nothing else references, takes what it owns before letting it go.
    ///
    /// `jobs` is taken over (`consuming`): a copy left with the caller would keep each job referenced
    /// once more, so none would look unreferenced here, and the caller's copy would then release them
    /// recursively after all.
    static func releaseIteratively(_ jobs: consuming [Job]) {
        var work = consume jobs
        while var next = work.popLast() {
            if isKnownUniquelyReferenced(&next) {
                work.append(contentsOf: next.withCore { $0.takeOwnedJobs() })
                work.append(contentsOf: next.takeOwnedChildren())
            }
        }
    }
}
