import Dispatch
public import Logging

extension JobQueue {
    /// What each unfinished job waits for: dependencies (by name, with where they are), conditions
    /// still evaluating, a full exclusivity category and who holds it, a suspended queue, or a full
    /// concurrency limit.
    ///
    /// ```swift
    /// print(queue.diagnose())
    /// // queue 'import': 2 unfinished, 0 running of at most 4
    /// //   - 'save' (pending) waits for dependencies 'sign in' (initialized, in no queue: add it to one …)
    /// ```
    ///
    /// The report is a snapshot: jobs may move on while it is being taken.
    ///
    /// An executing group's entry lists its children the same way (``JobDiagnosis/children``), so a
    /// stall inside a group shows where it is.
    public func diagnose() -> QueueDiagnosis {
        diagnose(depth: 0)
    }

    /// Groups nest deeper than a person reads (and than the stack allows, at twenty thousand levels):
    /// the report stops descending here.
    static let diagnosisDepthLimit = 32

    func diagnose(depth: Int) -> QueueDiagnosis {
        let (members, suspended, running, limit, bound, waitingProducers) = lockedSnapshot()
        let jobs = members.sorted { $0.id < $1.id }
            .map { $0.diagnosis(queueSuspended: suspended, running: running, limit: limit, depth: depth) }
            .filter { $0.state != .finished }  // finished a moment ago, not yet counted out
        return QueueDiagnosis(
            queueName: name, isSuspended: suspended, runningJobs: running, maxConcurrentJobs: limit,
            maxUnfinishedJobs: bound, waitingProducers: waitingProducers, jobs: jobs)
    }

    /// A number that changes whenever a job of this queue, or of a group running in it (at any depth),
    /// is added, started or finished; and whether anything is unfinished.
    func progressMark() -> (progress: UInt64, unfinished: Int) {
        var total: UInt64 = 0
        var unfinished = 0
        var queues: [JobQueue] = [self]
        while let queue = queues.popLast() {
            let (progress, count, members) = queue.lock.withLock {
                (queue.scheduler.progress, queue.scheduler.members.count, Array(queue.scheduler.members.values))
            }
            total &+= progress
            unfinished += count
            for case let group as GroupJob in members {
                if let children = group.withGroup({ $0.childQueue }) { queues.append(children) }
            }
        }
        return (total, unfinished)
    }

    /// Watches the queue: every `interval`, if it has unfinished jobs and no job was added, started or
    /// finished since the last look, logs ``diagnose()`` at warning level (and calls `onStall`, if given).
    ///
    /// Keep the returned watchdog; it stops when you call ``QueueWatchdog/stop()`` or drop it.
    public func startWatchdog(
        every interval: Duration, logger: Logger = Logger(label: "baton.watchdog"),
        onStall: (@Sendable (QueueDiagnosis) -> Void)? = nil
    ) -> QueueWatchdog {
        QueueWatchdog(queue: self, interval: interval, logger: logger, onStall: onStall)
    }
}

/// Logs what a queue's jobs wait for when the queue stops making progress.
///
/// ## Thread safety
/// All methods may be called from any thread.
public final class QueueWatchdog: @unchecked Sendable {
    // @unchecked Sendable: `lastProgress` is guarded by `lock`; the other properties are immutable.
    private let queue: JobQueue
    private let logger: Logger
    private let onStall: (@Sendable (QueueDiagnosis) -> Void)?
    private let timer: any DispatchSourceTimer
    private let lock = Lock()
    private var lastProgress: UInt64?

    init(
        queue: JobQueue, interval: Duration, logger: Logger, onStall: (@Sendable (QueueDiagnosis) -> Void)?
    ) {
        let (seconds, attoseconds) = interval.components
        let interval = DispatchTimeInterval.nanoseconds(
            Int(
                clamping: max(
                    1, seconds.multipliedReportingOverflow(by: 1_000_000_000).partialValue + attoseconds / 1_000_000_000
                )))
        self.queue = queue
        self.logger = logger
        self.onStall = onStall
        timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { [weak self] in _ = self?.check() }
        timer.resume()
    }

    deinit {
        timer.cancel()
    }

    /// Stops watching.
    public func stop() {
        timer.cancel()
    }

    /// One look (the timer calls it; tests may too): returns and reports the diagnosis if the queue has
    /// unfinished jobs and made no progress since the previous look.
    @discardableResult
    public func check() -> QueueDiagnosis? {
        let (progress, unfinished) = queue.progressMark()
        let stalled: Bool = lock.withLock {
            defer { lastProgress = progress }
            return unfinished > 0 && lastProgress == progress
        }
        guard stalled else { return nil }
        let diagnosis = queue.diagnose()
        logger.warning("Baton: no progress on queue '\(queue.name)'.\n\(diagnosis)")
        onStall?(diagnosis)
        return diagnosis
    }
}

extension Job {
    /// What this job waits for (reads this job, then its dependencies, scope and children, one lock at
    /// a time).
    func diagnosis(queueSuspended: Bool, running: Int, limit: Int, depth: Int = 0) -> JobDiagnosis {
        let (state, cancelled, dependencies, generated, evaluating, queue, storedName, ticket) = withCore { core in
            (
                core.lifecycle.publicState, core.lifecycle.isCancelled, core.dependencies, core.extras?.generated ?? [],
                core.extras?.evaluating ?? [], core.queue, core.name, core.extras?.claim
            )
        }
        let (priority, effective, waiters, parent) = withCore { core in
            (
                core.priority, core.effectivePriority,
                core.effectivePriority > core.priority ? core.dependents : [], core.extras?.parent
            )
        }
        var escalatedBy: String?
        if effective > priority {
            // Who raised it: the unfinished waiter of the highest priority (its group for a child).
            var best: (Job, JobPriority)?
            for waiter in waiters + (parent.map { [$0] } ?? []) {
                let (level, finished) = waiter.withCore { ($0.effectivePriority, $0.lifecycle.outcome != nil) }
                if !finished, level > priority, best == nil || level > best!.1 { best = (waiter, level) }
            }
            escalatedBy = best?.0.name
        }
        var blockers: [JobDiagnosis.Blocker] = []
        var children: [JobDiagnosis] = []
        var deeper = false
        switch state {
        case .pending:
            let unfinished = Self.unfinished(dependencies)
            if !unfinished.isEmpty { blockers.append(.dependencies(unfinished)) }
            let unfinishedGenerated = Self.unfinished(generated)
            if !unfinishedGenerated.isEmpty { blockers.append(.generatedDependencies(unfinishedGenerated)) }
        case .evaluatingConditions:
            blockers.append(.conditions(evaluating))
        case .ready:
            if let scope = queue?.exclusivityScope, let ticket, let waits = scope.blockers(of: ticket) {
                for wait in waits {
                    blockers.append(
                        .exclusivity(category: wait.category, limit: wait.limit, heldBy: wait.holders.map(\.name)))
                }
            } else if queueSuspended {
                blockers.append(.suspendedQueue(queue?.name ?? "?"))
            } else if running >= limit {
                blockers.append(.concurrencyLimit(running: running, limit: limit))
            }
        case .executing:
            if let group = self as? GroupJob, let childQueue = group.withGroup({ $0.childQueue }) {
                if depth < JobQueue.diagnosisDepthLimit {
                    children = childQueue.diagnose(depth: depth + 1).jobs
                } else {
                    deeper = true
                }
            }
        default:
            break
        }
        var diagnosis = JobDiagnosis(
            jobName: storedName ?? defaultName, jobID: id, state: state, isCancelled: cancelled, blockers: blockers,
            children: children, childrenNotShown: deeper)
        diagnosis.priority = priority
        diagnosis.effectivePriority = effective
        diagnosis.escalatedBy = escalatedBy
        return diagnosis
    }

    private static func unfinished(_ jobs: [Job]) -> [JobDiagnosis.Dependency] {
        jobs.compactMap { dependency in
            let (state, queue) = dependency.withCore { ($0.lifecycle.publicState, $0.queue) }
            guard state != .finished else { return nil }
            return JobDiagnosis.Dependency(name: dependency.name, state: state, queue: queue?.name)
        }
    }
}
