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

    /// A job of this queue finished. `onWorker`: it finished inside its body on one of this queue's
    /// worker loops, which will look for the next job itself.
    func jobDidFinish(_ job: Job, heldSlot: Bool, onWorker: Bool) {
        // A job that finished inside its body on one of our worker loops: that loop records it with
        // its next look for work, one queue lock instead of two per job.
        if onWorker, let context = WorkerContext.current, context.queue === self {
            context.finished.append((job.id, heldSlot))
            return
        }
        var waiters: [IdleWaiter] = []
        let start: Int = lock.withLock {
            if scheduler.finished(job.id, heldSlot: heldSlot) {
                waiters = idleWaiters
                idleWaiters = []
            }
            return onWorker ? 0 : scheduler.workersToStart()
        }
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
            let job: Job? = lock.withLock {
                waiters = recordFinishesLocked(context)
                return scheduler.nextJob(after: report)
            }
            for waiter in waiters { waiter.resume() }
            guard let job else { return }
            report = job.runFromQueue() ? .ran : .skipped
        }
        let waiters: [IdleWaiter] = lock.withLock {
            scheduler.handOver(after: report)
            return recordFinishesLocked(context)
        }
        for waiter in waiters { waiter.resume() }
        dispatchQueue.async { self.runWorker() }
    }
}

/// The worker loop running on the current thread, so that a job finishing inside its body can leave
/// its finish with the loop instead of taking the queue's lock (see ``JobQueue/jobDidFinish(_:heldSlot:onWorker:)``).
/// Only its own thread touches it.
final class WorkerContext {
    let queue: JobQueue
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
