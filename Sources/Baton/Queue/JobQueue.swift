public import Dispatch

/// Runs jobs: when their dependencies finished, by priority, at most ``maxConcurrentJobs`` at a time.
///
/// ```swift
/// let queue = JobQueue(name: "import", maxConcurrentJobs: 4)
/// queue.add([download, parse])
/// await queue.waitUntilAllJobsAreFinished()
/// ```
///
/// Synchronous bodies run on the threads of a Dispatch queue (a global concurrent queue unless you
/// pass one); ``AsyncJob`` bodies run in Swift concurrency's pool and hold their slot until they
/// finish. Ready jobs start highest priority first and first-in first-out within a priority, so a
/// queue with `maxConcurrentJobs == 1` is a serial FIFO queue.
///
/// A queue holds its jobs until they finish and none after. Dropping your last reference to a queue
/// with unfinished jobs is fine: they keep it alive until they finish.
///
/// ## Thread safety
/// Every method may be called from any thread. The queue's state is guarded by one lock, never held
/// while Baton takes another lock or calls your code.
public final class JobQueue: @unchecked Sendable {
    // @unchecked Sendable: `name`, `lock`, `dispatchQueue` are immutable; `scheduler`, `idleWaiters`,
    // `eventStreams` and `nextStreamID` are only touched while holding `streamsLock` (a lock of their
    // own, so that adding jobs does not contend with the workers for it) (here and in
    // JobQueue+Workers.swift).

    /// The queue's name, for diagnostics.
    public let name: String
    /// Where the exclusivity categories of this queue's jobs are arbitrated.
    public let exclusivityScope: ExclusivityScope
    let dispatchQueue: DispatchQueue
    let lock = Lock(adaptive: true)
    @exclusivity(unchecked) var scheduler: QueueScheduler<Job>
    @exclusivity(unchecked) var idleWaiters: [IdleWaiter] = []
    /// Consumers of ``events``, by id.
    private let streamsLock = Lock()
    @exclusivity(unchecked) private var eventStreams: [Int: AsyncStream<(Job, JobLifecycleEvent)>.Continuation] = [:]
    @exclusivity(unchecked) private var nextStreamID = 0
    /// Told of every batch of jobs added (a group's internal queue tells the group). Set at init.
    private let adoption: (@Sendable ([Job]) -> Void)?

    /// The default ``maxConcurrentJobs``.
    public static let defaultMaxConcurrentJobs = 64

    /// A worker loop runs this many jobs, then hands over to a fresh loop so that other work queued on
    /// the same Dispatch queue (the main queue, say) gets a turn.
    static let jobsPerWorkerTurn = 256

    /// Creates a queue.
    ///
    /// - Parameters:
    ///   - name: Used in diagnostics.
    ///   - maxConcurrentJobs: At most this many jobs execute at once; 1 makes a serial queue.
    ///   - dispatchQueue: Where synchronous bodies run. Defaults to the global concurrent queue.
    /// - Precondition: `maxConcurrentJobs >= 1`.
    ///   - exclusivityScope: Where exclusivity categories are arbitrated. Defaults to
    ///     ``ExclusivityScope/processWide``, shared by every queue that is not given one.
    public convenience init(
        name: String = "JobQueue",
        maxConcurrentJobs: Int = JobQueue.defaultMaxConcurrentJobs,
        dispatchQueue: DispatchQueue? = nil,
        exclusivityScope: ExclusivityScope = .processWide
    ) {
        self.init(
            name: name, maxConcurrentJobs: maxConcurrentJobs, dispatchQueue: dispatchQueue,
            exclusivityScope: exclusivityScope, adoption: nil)
    }

    init(
        name: String, maxConcurrentJobs: Int, dispatchQueue: DispatchQueue?, exclusivityScope: ExclusivityScope,
        adoption: (@Sendable ([Job]) -> Void)?
    ) {
        self.adoption = adoption
        precondition(
            maxConcurrentJobs >= 1,
            "Baton: maxConcurrentJobs of queue '\(name)' must be at least 1, not \(maxConcurrentJobs).")
        self.name = name
        self.exclusivityScope = exclusivityScope
        self.dispatchQueue = dispatchQueue ?? .global()
        self.scheduler = QueueScheduler(
            maxConcurrent: maxConcurrentJobs, workerLimit: JobQueue.defaultMaxConcurrentJobs)
    }

    /// A serial queue whose jobs run on the main thread.
    ///
    /// Its synchronous bodies run on Dispatch's main queue, so the main thread must be serving it: an
    /// app's run loop does; a command-line program must either have an `async` `main` (Swift drives
    /// the main queue while `main` awaits) or call `dispatchMain()` at the end of top-level code.
    /// Never block the main thread waiting for a job of this queue.
    public static let main = JobQueue(name: "main", maxConcurrentJobs: 1, dispatchQueue: .main)

    // MARK: Settings

    /// At most this many jobs execute at once. Raising it starts waiting jobs at once.
    ///
    /// - Precondition: At least 1.
    public var maxConcurrentJobs: Int {
        get { lock.withLock { scheduler.maxConcurrent } }
        set {
            precondition(
                newValue >= 1, "Baton: maxConcurrentJobs of queue '\(name)' must be at least 1, not \(newValue).")
            startWorkers(
                lock.withLock {
                    scheduler.maxConcurrent = newValue
                    return scheduler.workersToStart()
                })
        }
    }

    /// While `true`, no job starts; jobs already executing go on. Jobs still become ready, get
    /// cancelled and finish as usual.
    public var isSuspended: Bool {
        get { lock.withLock { scheduler.isSuspended } }
        set {
            startWorkers(
                lock.withLock {
                    scheduler.isSuspended = newValue
                    return scheduler.workersToStart()
                })
        }
    }

    /// The number of unfinished jobs in the queue. A job that is finishing at this moment may still be
    /// counted; `waitUntilAllJobsAreFinished()` waits until none is.
    public var jobCount: Int { lock.withLock { scheduler.members.count } }

    /// The unfinished jobs, in the order they were created.
    public var jobs: [Job] {
        lock.withLock { Array(scheduler.members.values) }.filter { !$0.isFinished }.sorted { $0.id < $1.id }
    }

    // MARK: Adding jobs

    /// Adds a job; see ``add(_:)-([Job])``.
    public func add(_ job: Job) {
        // The common case in one job lock and one queue lock: a job without dependencies, conditions or
        // categories, on a queue that is no group's and has no event streams. Everything else takes the
        // general way.
        guard adoption == nil, !hasEventStreams, let entry = job.joinAtOnce(self) else {
            add([job])
            return
        }
        startWorkers(
            lock.withLock {
                scheduler.insert(entry.id, job, readyWith: entry.priority)
                return scheduler.workersToStart()
            })
    }

    /// Adds a closure as a ``BlockJob`` and returns the job.
    @discardableResult
    public func add(name: String? = nil, _ block: @escaping @Sendable () throws -> Void) -> BlockJob {
        let job = BlockJob(name: name, block)
        add([job])
        return job
    }

    /// Adds jobs. Each starts once its dependencies finished, its conditions were satisfied, its
    /// exclusivity categories were granted and a slot is free.
    ///
    /// Jobs that form a dependency cycle (with each other or with jobs already waiting) finish failed
    /// with a ``JobError`` of code ``JobError/Code/dependencyCycle`` that names the cycle.
    ///
    /// - Complexity: Linear in the number of jobs and dependencies added, for graphs built in the
    ///   usual order (see ``CycleDetector``).
    /// - Precondition: Each job is in no queue, was not started by hand and has not finished, and
    ///   appears once. Breaking this is a bug in the calling code (a job runs once), so it stops the
    ///   program with a message that names the job and where it already is.
    public func add(_ jobs: [Job]) {
        guard !jobs.isEmpty else { return }
        // 1. Conditions may generate dependencies (added with the jobs) and ask for categories. User
        //    code: no lock is held.
        let (jobs, categories) = Self.expandConditions(of: jobs)
        // 2. Observers that must see every event go on before any job can move.
        adoption?(jobs)
        if hasEventStreams {
            let streams = streamsLock.withLock { Array(eventStreams.values) }
            let forwarder = EventForwarder { job, event in
                for stream in streams { stream.yield((job, event)) }
            }
            for job in jobs { job.addObserver(forwarder) }
        }
        // 3. Each job joins (its own lock); then they all become members (the queue's lock, once).
        let batch = jobs.count > 1 ? JobIdentifiers.next() : 0
        var ready: [(job: Job, entry: ReadyJob)] = []
        var waiting: [(job: Job, dependencies: [Job], index: Int)] = []
        var moved: [(job: Job, action: JobLifecycle.Action)] = []
        for (index, job) in jobs.enumerated() {
            switch job.join(self, categories: categories[index], batch: batch, index: index) {
            case .ready(let entry): ready.append((job, entry))
            case .waits(let dependencies): waiting.append((job, dependencies, index))
            case .moved(let action): moved.append((job, action))
            }
        }
        startWorkers(
            lock.withLock {
                for (job, entry) in ready { scheduler.insert(entry.id, job, readyWith: entry.priority) }
                for (job, _, _) in waiting { scheduler.insert(job.id, job, readyWith: nil) }
                for (job, _) in moved { scheduler.insert(job.id, job, readyWith: nil) }
                return ready.isEmpty ? 0 : scheduler.workersToStart()
            })
        // 4. Register waiting jobs with their unfinished dependencies, look for cycles, then drop the
        //    registration holds: a job can only move on once all of this is done.
        Propagation.run { work in
            for (job, action) in moved { job.perform(Job.Step(action: action, queue: self, priority: job.priority), &work) }
            var holds: [(job: Job, finished: Int)] = []
            for (job, dependencies, index) in waiting {
                var finished = 0
                for dependency in dependencies where !dependency.registerDependent(job, batch: batch, index: index) {
                    finished += 1
                }
                holds.append((job, finished))
            }
            if !holds.isEmpty {
                CycleDetector.failCycles(through: holds.map(\.job).filter { $0.takeMayCloseCycle() })
            }
            for (job, finished) in holds { job.dependenciesFinished(finished + 1, &work) }
        }
    }

    private var hasEventStreams: Bool { streamsLock.withLock { !eventStreams.isEmpty } }

    /// Adds the dependencies that the jobs' conditions generate (and theirs, and so on) to the batch,
    /// and collects each job's exclusivity categories. Calls user code, so no lock is held.
    ///
    /// A generated dependency waits for the guarded job's own dependencies (a "sign in" job runs after
    /// them, not alongside), and is listed in ``Job/generatedDependencies``, not ``Job/dependencies``.
    private static func expandConditions(of jobs: [Job]) -> ([Job], [[ExclusivityCategory]]) {
        var batch = jobs
        var categories: [[ExclusivityCategory]] = []
        categories.reserveCapacity(jobs.count)
        var members = Set<ObjectIdentifier>()
        var index = 0
        while index < batch.count {
            let job = batch[index]
            index += 1
            let conditions = job.conditions
            guard !conditions.isEmpty else {
                categories.append([])
                continue
            }
            if members.isEmpty { members = Set(batch.map(ObjectIdentifier.init)) }
            let ownDependencies = job.dependencies
            for condition in conditions {
                for generated in condition.dependencies(for: job) where generated !== job {
                    // A job the condition made goes with the guarded one; an existing one stays where it is.
                    if generated.state == .initialized && generated.queue == nil
                        && members.insert(ObjectIdentifier(generated)).inserted
                    {
                        generated.addDependencies(ownDependencies.filter { $0 !== generated })
                        batch.append(generated)
                    }
                    job.addGeneratedDependency(generated)
                }
            }
            categories.append(job.categoriesOfConditions)
        }
        return (batch, categories)
    }

    // MARK: Cancelling and waiting

    /// Cancels every unfinished job of the queue; see ``Job/cancel(reason:)``.
    public func cancelAll(reason: (any Error)? = nil) {
        for job in lock.withLock({ Array(scheduler.members.values) }) {
            job.cancel(reason: reason)
        }
    }

    /// Blocks the calling thread until the queue has no unfinished job.
    ///
    /// - Important: Never call it from a thread the queue needs (the main thread for ``main``).
    @available(*, noasync, message: "Use 'await queue.waitUntilAllJobsAreFinished()' instead")
    public func waitUntilAllJobsAreFinished() {
        let semaphore = DispatchSemaphore(value: 0)
        let empty = lock.withLock {
            if scheduler.members.isEmpty { return true }
            idleWaiters.append(.semaphore(semaphore))
            return false
        }
        if !empty { semaphore.wait() }
    }

    /// Waits, without blocking a thread, until the queue has no unfinished job.
    ///
    /// Cancelling the awaiting task does not cancel the queue's jobs (use ``cancelAll(reason:)``).
    public func waitUntilAllJobsAreFinished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let empty = lock.withLock {
                if scheduler.members.isEmpty { return true }
                idleWaiters.append(.continuation(continuation))
                return false
            }
            if empty { continuation.resume() }
        }
    }

    /// The lifecycle events of every job added to the queue from now on, with the job. The sequence
    /// does not end by itself; stop iterating when you have seen enough.
    public var events: AsyncStream<(Job, JobLifecycleEvent)> {
        let (stream, continuation) = AsyncStream<(Job, JobLifecycleEvent)>.makeStream()
        let id = streamsLock.withLock {
            nextStreamID += 1
            eventStreams[nextStreamID] = continuation
            return nextStreamID
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            let removed = self.streamsLock.withLock { self.eventStreams.removeValue(forKey: id) }
            _ = removed  // dropped outside the lock
        }
        return stream
    }

    // MARK: Diagnostics support

    func lockedSnapshot() -> (members: [Job], suspended: Bool, running: Int, limit: Int) {
        lock.withLock {
            (Array(scheduler.members.values), scheduler.isSuspended, scheduler.running, scheduler.maxConcurrent)
        }
    }

}

/// Someone waiting for a queue to become empty.
enum IdleWaiter {
    case continuation(CheckedContinuation<Void, Never>)
    case semaphore(DispatchSemaphore)

    func resume() {
        switch self {
        case .continuation(let continuation): continuation.resume()
        case .semaphore(let semaphore): semaphore.signal()
        }
    }
}
