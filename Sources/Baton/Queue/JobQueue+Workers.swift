import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The queue's scheduling facet: ready jobs, finishes, and the worker loops that run jobs.
extension JobQueue {
    // MARK: Scheduling (called by jobs)

    /// A job of this queue is ready to run.
    struct ReadyJob {
        let id: UInt64
        let priority: JobPriority
    }

    func jobsBecameReady(_ ready: [ReadyJob]) {
        guard !ready.isEmpty else { return }
        startWorkers(
            lock.withLock {
                for job in ready { scheduler.markReady(job.id, priority: job.priority) }
                return scheduler.workersToStart()
            })
    }

    /// A job of this queue finished (`heldSlot`: its body ran, so it held a slot).
    ///
    /// When the job finished inside its own body, on the worker loop that runs it (a synchronous body
    /// returning), that loop records the finish with its next look for work: one queue lock instead of
    /// two per job. Any other thread (an asynchronous body, a cancel, an observer that delivered the
    /// finish) records it here and starts workers if the freed slot lets a ready job run.
    func jobDidFinish(_ job: Job, heldSlot: Bool) {
        if let context = WorkerContext.current, context.queue === self, context.running === job {
            context.finished.append((job.id, heldSlot))
            return
        }
        var waiters: [IdleWaiter] = []
        let (start, departed): (Int, [Job]) = lock.withLock {
            if scheduler.finished(job.id, heldSlot: heldSlot) {
                waiters = idleWaiters
                idleWaiters = []
            }
            return (scheduler.workersToStart(), scheduler.takeDeparted())
        }
        _ = departed  // dropped here, outside the lock
        startWorkers(start)
        for waiter in waiters { waiter.resume() }
    }

    /// Records the finishes a worker loop collected; returns the waiters to resume if the queue is now
    /// empty. - Important: Call with the lock held.
    func recordFinishesLocked(_ context: WorkerContext) -> [IdleWaiter] {
        guard !context.finished.isEmpty else { return [] }
        var empty = false
        for (id, heldSlot) in context.finished { empty = scheduler.finished(id, heldSlot: heldSlot) }
        context.finished.removeAll(keepingCapacity: true)
        guard empty else { return [] }
        defer { idleWaiters = [] }
        return idleWaiters
    }

    func startWorkers(_ count: Int) {
        for _ in 0..<count {
            dispatchQueue.async { self.runWorker() }
        }
    }

    func runWorker() {
        let context = WorkerContext(queue: self)
        let previous = WorkerContext.current
        WorkerContext.current = context
        defer { WorkerContext.current = previous }
        var report = QueueScheduler<Job>.WorkerReport.starting
        for _ in 0..<JobQueue.jobsPerWorkerTurn {
            var waiters: [IdleWaiter] = []
            var departed: [Job] = []
            let job: Job? = lock.withLock {
                waiters = recordFinishesLocked(context)
                departed = scheduler.takeDeparted()
                return scheduler.nextJob(after: report)
            }
            departed = []  // the finished jobs are let go of here, outside the lock
            for waiter in waiters { waiter.resume() }
            guard let job else { return }
            context.running = job
            report = job.runFromQueue() ? .ran : .skipped
            context.running = nil
        }
        let (waiters, departed): ([IdleWaiter], [Job]) = lock.withLock {
            scheduler.handOver(after: report)
            return (recordFinishesLocked(context), scheduler.takeDeparted())
        }
        _ = departed  // dropped outside the lock
        for waiter in waiters { waiter.resume() }
        dispatchQueue.async { self.runWorker() }
    }
}

/// The worker loop running on the current thread, so that a job finishing inside its body can leave
/// its finish with the loop instead of taking the queue's lock (see ``JobQueue/jobDidFinish(_:heldSlot:)``).
/// Only its own thread touches it.
final class WorkerContext {
    let queue: JobQueue
    /// The job whose body this loop is running, if any.
    var running: Job?
    var finished: [(id: UInt64, heldSlot: Bool)] = []

    init(queue: JobQueue) {
        self.queue = queue
        finished.reserveCapacity(4)
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key, nil)
        precondition(rc == 0, "Baton: pthread_key_create failed with \(rc)")
        return key
    }()

    /// The context of the worker loop on this thread (not retained: the loop keeps it alive).
    static var current: WorkerContext? {
        get { pthread_getspecific(key).map { Unmanaged<WorkerContext>.fromOpaque($0).takeUnretainedValue() } }
        set { pthread_setspecific(key, newValue.map { Unmanaged.passUnretained($0).toOpaque() }) }
    }
}
