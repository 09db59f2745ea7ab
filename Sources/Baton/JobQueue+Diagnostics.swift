public import Dispatch
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
    public func diagnose() -> QueueDiagnosis {
        let (members, suspended, running, limit) = lockedSnapshot()
        let jobs = members.sorted { $0.id < $1.id }
            .map { $0.diagnosis(queueSuspended: suspended, running: running, limit: limit) }
            .filter { $0.state != .finished }  // finished a moment ago, not yet counted out
        return QueueDiagnosis(
            queueName: name, isSuspended: suspended, runningJobs: running, maxConcurrentJobs: limit, jobs: jobs)
    }

    /// Watches the queue: every `interval`, if it has unfinished jobs and no job was added, started or
    /// finished since the last look, logs ``diagnose()`` at warning level (and calls `onStall`, if given).
    ///
    /// Keep the returned watchdog; it stops when you call ``QueueWatchdog/stop()`` or drop it.
    public func startWatchdog(
        every interval: DispatchTimeInterval, logger: Logger = Logger(label: "baton.watchdog"),
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
        queue: JobQueue, interval: DispatchTimeInterval, logger: Logger, onStall: (@Sendable (QueueDiagnosis) -> Void)?
    ) {
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
    /// What this job waits for (reads this job, then its dependencies and scope, one lock at a time).
    func diagnosis(queueSuspended: Bool, running: Int, limit: Int) -> JobDiagnosis {
        let (state, cancelled, dependencies, evaluating, scope, name) = mutex.withLock {
            (
                machine.state, machine.isCancelled, dependencyList, conditionsEvaluating, exclusivityRequestedIn,
                storedName
            )
        }
        var blockers: [JobDiagnosis.Blocker] = []
        switch state {
        case .pending:
            let unfinished = dependencies.compactMap { dependency -> JobDiagnosis.Dependency? in
                let (state, queue) = dependency.mutex.withLock { (dependency.machine.state, dependency.owningQueue) }
                guard state != .finished else { return nil }
                return JobDiagnosis.Dependency(name: dependency.name, state: state, queue: queue?.name)
            }
            if !unfinished.isEmpty { blockers.append(.dependencies(unfinished)) }
        case .evaluatingConditions:
            blockers.append(.conditions(evaluating))
        case .ready:
            if let scope, let waits = scope.blockers(of: self) {
                for wait in waits {
                    blockers.append(
                        .exclusivity(category: wait.category, limit: wait.limit, heldBy: wait.holders.map(\.name)))
                }
            } else if queueSuspended {
                blockers.append(.suspendedQueue(self.queue?.name ?? "?"))
            } else if running >= limit {
                blockers.append(.concurrencyLimit(running: running, limit: limit))
            }
        default:
            break
        }
        return JobDiagnosis(
            jobName: name ?? "\(type(of: self))#\(id)", jobID: id, state: state, isCancelled: cancelled,
            blockers: blockers)
    }
}
