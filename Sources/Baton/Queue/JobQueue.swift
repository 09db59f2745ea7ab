import DequeModule
public import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

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
    // @unchecked Sendable: `name`, `lock`, `dispatchQueue`, `streamsLock` and the instruments are
    // immutable; `scheduler`, `idleWaiters`, `claimsToSubmit`, `claimsDraining` and `admission` are only touched
    // while holding `lock` (here and in JobQueue+Settings.swift); `eventStreams` and `nextStreamID`
    // only while holding `streamsLock`, a lock of their own so that subscribing does not contend with
    // the workers. The two are never held together.

    /// The queue's name, for diagnostics.
    public let name: String
    /// Where the exclusivity categories of this queue's jobs are arbitrated.
    public let exclusivityScope: ExclusivityScope
    /// Where worker loops run; `nil`: each loop on a serial Dispatch queue of its own
    /// (``WorkerThreads/dedicated``).
    let dispatchQueue: DispatchQueue?
    let lock = Lock(adaptive: true)
    @exclusivity(unchecked) var scheduler: QueueScheduler<Job>
    @exclusivity(unchecked) var idleWaiters: [IdleWaiter] = []
    /// Jobs started that must claim exclusivity categories first, in the order they were started
    /// (guarded by `lock`); one thread at a time submits their claims (`claimsDraining`), so that they
    /// reach the arbiter in that order.
    @exclusivity(unchecked) var claimsToSubmit: Deque<Job> = []
    @exclusivity(unchecked) var claimsDraining = false
    /// Producers waiting for room under ``maxUnfinishedJobs`` (guarded by `lock`).
    @exclusivity(unchecked) var admission = Admission()
    /// Consumers of ``events``, by id.
    let streamsLock = Lock()
    @exclusivity(unchecked) var eventStreams: [Int: AsyncStream<(Job, JobLifecycleEvent)>.Continuation] = [:]
    @exclusivity(unchecked) var nextStreamID = 0
    /// Told of every batch of jobs added (a group's internal queue tells the group). Set at init.
    private let adoption: (@Sendable ([Job]) -> Void)?
    /// The queue of a group's children (which only the group adds to).
    var runsChildrenOfAGroup: Bool { adoption != nil }
    /// What watches the queue's jobs (see ``JobInstrument``); fixed at init. Instruments given that were
    /// not enabled (``JobInstrument/isEnabled``) are not listed.
    public let instruments: [any JobInstrument]

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
    ///   - dispatchQueue: Where synchronous bodies run. Defaults to the global concurrent queue (see
    ///     `workerThreads`).
    ///   - exclusivityScope: Where exclusivity categories are arbitrated. Defaults to
    ///     ``ExclusivityScope/processWide``, shared by every queue that is not given one.
    ///   - instruments: What watches the queue's jobs (metrics, traces, a timeline); see
    ///     ``JobInstrument``. Defaults to ``defaultInstruments``.
    ///   - workerThreads: ``WorkerThreads/shared`` (the default) runs synchronous bodies on
    ///     `dispatchQueue`; ``WorkerThreads/dedicated`` gives each running body a thread of its own, for
    ///     bodies that block. Give `dedicated` without a `dispatchQueue`.
    ///   - maxUnfinishedJobs: The bound on unfinished jobs that ``addWhenRoom(_:)-([Job])`` waits under
    ///     and ``tryAdd(_:)-([Job])`` refuses over; `nil` (the default) for none. See
    ///     ``maxUnfinishedJobs``.
    /// - Precondition: `maxConcurrentJobs >= 1`, `maxUnfinishedJobs` nil or at least 1, and no
    ///   `dispatchQueue` with `.dedicated` threads.
    public convenience init(
        name: String = "JobQueue",
        maxConcurrentJobs: Int = JobQueue.defaultMaxConcurrentJobs,
        dispatchQueue: DispatchQueue? = nil,
        exclusivityScope: ExclusivityScope = .processWide,
        instruments: [any JobInstrument]? = nil,
        workerThreads: WorkerThreads = .shared,
        maxUnfinishedJobs: Int? = nil
    ) {
        if workerThreads == .dedicated, dispatchQueue != nil {
            fatalError(
                "Baton: queue '\(name)' was given both a dispatchQueue and workerThreads: .dedicated; its bodies "
                    + "can run on one or the other. Leave out the dispatchQueue to give each body a thread of "
                    + "its own, or leave out workerThreads to run them on the dispatchQueue.")
        }
        self.init(
            name: name, maxConcurrentJobs: maxConcurrentJobs,
            dispatchQueue: workerThreads == .dedicated ? nil : (dispatchQueue ?? JobQueue.globalDispatchQueue),
            exclusivityScope: exclusivityScope, instruments: instruments ?? JobQueue.defaultInstruments,
            adoption: nil)
        if let maxUnfinishedJobs { self.maxUnfinishedJobs = maxUnfinishedJobs }
    }

    /// Which threads run a queue's synchronous bodies (asynchronous bodies always run on Swift
    /// concurrency's pool, or their own executor).
    public enum WorkerThreads: Sendable {
        /// Dispatch's global concurrent queue, or the `dispatchQueue` given: the fastest for bodies that
        /// compute and return. Not for bodies that block (wait for I/O, a lock, another job, a child
        /// process) on Linux: there that queue is also Swift concurrency's pool, runs one block per core,
        /// and adds a thread for blocked ones only about once a second, so a few blocked bodies delay
        /// every job and every task of the process by seconds.
        case shared
        /// A thread for each worker loop (a serial Dispatch queue made for it, which Dispatch's
        /// overcommitting pool serves at once): up to `maxConcurrentJobs` bodies (at most 64 per queue,
        /// and beyond that only the jobs whose exclusivity categories were granted while every loop
        /// was busy) block at the same time without holding up anything else. Each start of a loop may wake or
        /// make a thread, so jobs that only compute run slower than on ``shared``.
        case dedicated
    }

    init(
        name: String, maxConcurrentJobs: Int, dispatchQueue: DispatchQueue?, exclusivityScope: ExclusivityScope,
        instruments: [any JobInstrument], adoption: (@Sendable ([Job]) -> Void)?
    ) {
        self.adoption = adoption
        // Instruments with nothing to do (metrics without a backend) are left out: such a queue pays nothing.
        self.instruments = instruments.filter(\.isEnabled)
        if maxConcurrentJobs < 1 {
            fatalError("Baton: maxConcurrentJobs of queue '\(name)' must be at least 1, not \(maxConcurrentJobs).")
        }
        self.name = name
        self.exclusivityScope = exclusivityScope
        self.dispatchQueue = dispatchQueue
        self.scheduler = QueueScheduler(
            maxConcurrent: maxConcurrentJobs, workerLimit: JobQueue.defaultMaxConcurrentJobs)
    }

    /// Its event streams end with it (an iterator would otherwise wait for ever).
    deinit {
        for continuation in eventStreams.values { continuation.finish() }
    }

    /// A serial queue whose jobs run on the main thread.
    ///
    /// Its synchronous bodies run on Dispatch's main queue, so the main thread must be serving it: an
    /// app's run loop does; a command-line program must either have an `async` `main` (Swift drives
    /// the main queue while `main` awaits) or call `dispatchMain()` at the end of top-level code.
    /// Never block the main thread waiting for a job of this queue.
    public static let main = JobQueue(name: "main", maxConcurrentJobs: 1, dispatchQueue: .main)

    // MARK: Adding jobs

    /// Adds a job; see ``add(_:)-([Job])``.
    public func add(_ job: Job) {
        guard adoption == nil, instruments.isEmpty, !hasEventStreams else {
            add([job])
            return
        }
        // The common case in one job lock and one queue lock: a job without dependencies, conditions or
        // categories, on a queue that is no group's and has no event streams.
        if let entry = job.joinAtOnce(self) {
            startWorkers(
                lock.withLock {
                    scheduler.insert(entry.id, job, readyWith: entry.priority)
                    return scheduler.workersToStart()
                })
            return
        }
        // One job alone (its conditions generated none): the general way, without the batch's lists.
        if let jobs = Self.expandConditions(ofOne: job) {
            add(expanded: jobs)
            return
        }
        switch job.join(self, batch: 0, index: 0) {
        case .ready(let entry):
            startWorkers(
                lock.withLock {
                    scheduler.insert(entry.id, job, readyWith: entry.priority, claims: entry.claims)
                    return scheduler.workersToStart()
                })
        case .moved(var step):
            lock.withLock { scheduler.insert(job.id, job, readyWith: nil) }
            Propagation.run { work in job.perform(inPlace: &step, &work) }
        case .waits(let dependencies, let priority):
            lock.withLock { scheduler.insert(job.id, job, readyWith: nil) }
            register([(job, dependencies, priority, 0)], batch: 0)
        }
    }

    /// Adds jobs. Each starts once its dependencies finished, its conditions were satisfied, its
    /// exclusivity categories were granted and a slot is free.
    ///
    /// Jobs that form a dependency cycle (with each other or with jobs already waiting) finish failed
    /// with a ``JobError`` of code ``JobError/Code/dependencyCycle`` that names the cycle.
    ///
    /// - Complexity: Linear in the number of jobs and dependencies added, for graphs built in the
    ///   usual order (see `CycleDetector` in the sources).
    /// - Precondition: Each job is in no queue, was not started by hand and has not finished, and
    ///   appears once. Breaking this is a bug in the calling code (a job runs once), so it stops the
    ///   program with a message that names the job and where it already is.
    public func add(_ jobs: [Job]) {
        guard !jobs.isEmpty else { return }
        // 1. Conditions may generate dependencies (added with the jobs) and ask for categories. User
        //    code: no lock is held.
        add(expanded: Self.expandConditions(of: jobs))
    }

    /// Adds jobs whose conditions' dependencies were added to them (`expandConditions(of:)`).
    private func add(expanded jobs: [Job]) {
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
        var waiting: [(job: Job, dependencies: [Job], priority: JobPriority, index: Int)] = []
        var moved: [(job: Job, step: Job.Step)] = []
        for (index, job) in jobs.enumerated() {
            // Told before the job joins: once it has joined, a cancel on another thread (a group's,
            // reaching children it is adding) can finish it at once, and instruments heard of its finish
            // before its addition (a span never ended, a gauge never brought back).
            for instrument in instruments { instrument.jobWasAdded(job, to: self) }
            let joined = job.join(self, batch: batch, index: index)
            switch joined {
            case .ready(let entry):
                for instrument in instruments { instrument.jobBecameReady(job, in: self) }
                ready.append((job, entry))
            case .waits(let dependencies, let priority): waiting.append((job, dependencies, priority, index))
            case .moved(let step): moved.append((job, step))
            }
        }
        // A batch whose jobs all start at once goes on the ready lists now. In one where some must first
        // wait for dependencies, conditions or categories, those that are ready at once wait for the
        // others' first steps: the jobs that are ready by the end of this call become ready in the
        // batch's order (a serial queue runs `add([a, b])` as a, then b, though a's finished dependency
        // is only seen below).
        let ordered = !ready.isEmpty && (!waiting.isEmpty || !moved.isEmpty)
        startWorkers(
            lock.withLock {
                for (job, entry) in ready {
                    scheduler.insert(entry.id, job, readyWith: ordered ? nil : entry.priority, claims: entry.claims)
                }
                for (job, _, _, _) in waiting { scheduler.insert(job.id, job, readyWith: nil) }
                for (job, _) in moved { scheduler.insert(job.id, job, readyWith: nil) }
                return ready.isEmpty || ordered ? 0 : scheduler.workersToStart()
            })
        // 4. Register waiting jobs with their unfinished dependencies, look for cycles, then drop the
        //    registration holds: a job can only move on once all of this is done.
        if !ordered && moved.isEmpty {
            register(waiting, batch: batch)
            return
        }
        Propagation.run { work in
            if ordered {
                work.orderReady(on: self, of: jobs)
                for (_, entry) in ready { work.enqueueReady(entry, on: self) }
            }
            for index in moved.indices { moved[index].job.perform(inPlace: &moved[index].step, &work) }
            register(waiting, batch: batch, &work)
        }
    }

    /// Registers jobs that joined waiting with their unfinished dependencies, looks for cycles, then drops
    /// the registration holds: a job can only move on once all of this is done.
    private func register(
        _ waiting: [(job: Job, dependencies: [Job], priority: JobPriority, index: Int)], batch: UInt64
    ) {
        guard !waiting.isEmpty else { return }
        Propagation.run { work in register(waiting, batch: batch, &work) }
    }

    private func register(
        _ waiting: [(job: Job, dependencies: [Job], priority: JobPriority, index: Int)], batch: UInt64,
        _ work: inout Propagation
    ) {
        var holds: [(job: Job, finished: Int)] = []
        var behindClaims: [Job] = []
        var raised: [Job] = []
        for (job, dependencies, priority, index) in waiting {
            var finished = 0
            var counted = false
            for dependency in dependencies {
                var rose = false
                switch dependency.registerDependent(
                    job, batch: batch, index: index, priority: priority, counted: &counted, raised: &rose)
                {
                case .finished: finished += 1
                case .waits: break
                case .waitsForAClaim: behindClaims.append(job)
                }
                if rose { raised.append(dependency) }
            }
            if counted { job.countedOn(dependencies, at: priority) }
            holds.append((job, finished))
        }
        // Dependencies waited for by jobs of higher priority run at that priority (before the holds
        // drop: a job whose dependency finished meanwhile is counted nowhere).
        if !raised.isEmpty { Job.propagatePriority(from: raised) }
        if !holds.isEmpty {
            CycleDetector.failCycles(through: holds.map(\.job).filter { $0.takeMayCloseCycle() })
            CycleDetector.failCycles(through: behindClaims, throughClaims: true)
        }
        for (job, finished) in holds { job.dependenciesFinished(finished + 1, &work) }
    }

    private var hasEventStreams: Bool { streamsLock.withLock { !eventStreams.isEmpty } }

    /// Adds the dependencies that the jobs' conditions generate (and theirs, and so on) to the batch.
    /// Calls user code, so no lock is held.
    ///
    /// A generated dependency that the condition made (in no queue yet) joins the batch and waits for the
    /// guarded job's own dependencies (a "sign in" job runs after them, not alongside) — except those it
    /// is itself a dependency of, which would make a cycle. It is listed in ``Job/generatedDependencies``,
    /// not ``Job/dependencies``, and cancelled with the guarded job if that is cancelled before it runs.
    ///
    /// `resuming`: the first job's conditions, of which those before `at` generated nothing and the one
    /// at `at` generated `generated` (see ``expandConditions(ofOne:)``).
    private static func expandConditions(
        of jobs: [Job],
        resuming first: (
            conditions: [any JobCondition], at: Int, generated: (jobs: [Job], paths: [ObjectIdentifier: [[Int]]])
        )? = nil
    ) -> [Job] {
        var batch = jobs
        var members: Set<ObjectIdentifier>?  // made when a condition first generates a job
        var index = 0
        while index < batch.count {
            let job = batch[index]
            var conditions: [any JobCondition]
            var start = 0
            // What the condition at `start` generated, when asked already.
            var asked: (jobs: [Job], paths: [ObjectIdentifier: [[Int]]])?
            if index == 0, let first {
                (conditions, start, asked) = (first.conditions, first.at, first.generated)
            } else {
                conditions = job.conditions
            }
            index += 1
            guard !conditions.isEmpty else { continue }
            var ownDependencies: [Job]?
            for (position, condition) in conditions[start...].enumerated() {
                let (generatedJobs, paths) = asked.take() ?? ConditionTree.generate(condition, for: job)
                guard !generatedJobs.isEmpty else { continue }
                let conditionName = condition.name
                for generated in generatedJobs where generated !== job {
                    if members == nil { members = Set(batch.map(ObjectIdentifier.init)) }
                    // A job the condition made goes with the guarded one; an existing one stays where it is
                    // (a child of a group that has not started is the group's to run).
                    let made =
                        generated.state == .initialized && generated.queue == nil && generated.parentGroup == nil
                        && members!.insert(ObjectIdentifier(generated)).inserted
                    if made {
                        if ownDependencies == nil { ownDependencies = job.dependencies }
                        generated.addDependencies(
                            ownDependencies!.filter { $0 !== generated && !Self.isReachable(generated, from: $0) })
                        // A job cancelled before it was added runs nothing for its conditions either.
                        if job.isCancelled { generated.cancel() }
                        batch.append(generated)
                    }
                    let below = paths[ObjectIdentifier(generated)] ?? []
                    job.addGeneratedDependency(
                        generated, made: made, by: conditionName,
                        paths: below.isEmpty ? [[start + position]] : below.map { [start + position] + $0 })
                }
            }
        }
        return batch
    }

    /// `expandConditions(of: [job])`, or `nil` when the job's conditions generate no dependency (the
    /// common case, which needs no batch).
    private static func expandConditions(ofOne job: Job) -> [Job]? {
        let conditions = job.conditions
        for (index, condition) in conditions.enumerated() {
            let generated = ConditionTree.generate(condition, for: job)
            if !generated.jobs.isEmpty { return expandConditions(of: [job], resuming: (conditions, index, generated)) }
        }
        return nil
    }

    /// Whether `target` is `start` or one of its dependencies, direct or not (one job's lock at a time).
    private static func isReachable(_ target: Job, from start: Job) -> Bool {
        var seen: Set<ObjectIdentifier> = []
        var work = [start]
        while let job = work.popLast() {
            if job === target { return true }
            guard seen.insert(ObjectIdentifier(job)).inserted else { continue }
            work += job.withCore { $0.allDependencies }
        }
        return false
    }

    // MARK: Running jobs (worker loops)

    /// A job of this queue is ready to run.
    struct ReadyJob {
        let id: UInt64
        let priority: JobPriority
        /// It claims exclusivity categories when started.
        var claims = false
    }

    /// Jobs of this queue became ready. `last`: they were made ready, last, by the work list of a job
    /// whose body returned on a worker loop's thread (`Propagation.handsOffLast`): nothing but Baton's
    /// own code runs on this thread before its loop looks for work again.
    func jobsBecameReady(_ first: ReadyJob, _ more: [ReadyJob], last: Bool = false) {
        var start = lock.withLock {
            scheduler.markReady(first.id, priority: first.priority, claims: first.claims)
            for job in more { scheduler.markReady(job.id, priority: job.priority, claims: job.claims) }
            return scheduler.workersToStart()
        }
        // Made ready, last, by the hand-over of a job that a loop of another queue on the same threads
        // ran: that loop's thread runs this queue's new loop if it has nothing more to do itself, instead
        // of waking another thread (see `WorkerContext.nextLoop`).
        // Not from a queue with instruments: the end of their `withStart` runs on this thread after
        // the body, and might wait for the job left to it.
        if start > 0, last, let context = WorkerContext.current, context.bodyReturned, context.nextLoop == nil,
            context.queue !== self, context.queue.instruments.isEmpty, context.queue.sharesThreads(with: self)
        {
            context.nextLoop = self
            start -= 1
        }
        startWorkers(start)
    }

    /// Dispatch's global queue: one wrapper for every queue that runs on it, so that two such queues
    /// can tell that they share threads (`sharesThreads(with:)`).
    static let globalDispatchQueue = DispatchQueue.global()

    /// Whether a loop of `other` may run on a thread of this queue's loops: both run on the same
    /// Dispatch queue, or both on threads of their own (``WorkerThreads/dedicated``).
    func sharesThreads(with other: JobQueue) -> Bool {
        guard let mine = dispatchQueue else { return other.dispatchQueue == nil }
        return mine === other.dispatchQueue
    }

    /// A job of this queue finished (`heldSlot`: its body ran, so it held a slot).
    ///
    /// When the job finished inside its own body, on the worker loop that runs it (a synchronous body
    /// returning), and nobody waits for it (`waited`), that loop records the finish with its next look
    /// for work: one queue lock instead of two per job (serial queues ran 23–34 % slower without it).
    /// Any other thread (an asynchronous body, a cancel, an observer that delivered the finish), or a
    /// job with waiters, records it here and starts workers if the freed slot lets a ready job run: a
    /// wait that waits when the job finishes returns once the slot is given back (`tryAdd` after
    /// `waitUntilFinished()` on a full bounded queue was refused 936 times in 1,000). A wait that begins
    /// after the finish may see the loop's count a moment later (stated in *Using Baton*).
    /// Returns the waiters for the queue to drain, if it is now empty: the caller resumes them once the
    /// job's hand-over is done (with its own waiters).
    func jobDidFinish(_ job: Job, heldSlot: Bool, waited: Bool) -> [IdleWaiter] {
        if !waited, let context = WorkerContext.current, context.queue === self, context.running === job {
            context.finished.append((job.id, heldSlot))
            return []
        }
        var waiters: [IdleWaiter] = []
        var producers: [CheckedContinuation<Void, any Error>] = []
        let (start, departed): (Int, Job?) = lock.withLock {
            let (departed, isEmpty) = scheduler.finished(job.id, heldSlot: heldSlot)
            if isEmpty {
                waiters = idleWaiters
                idleWaiters = []
            }
            if admission.hasWaiting { producers = admission.admitWaiting(unfinished: scheduler.members.count) }
            return (scheduler.workersToStart(), departed)
        }
        withExtendedLifetime(departed) {}  // let go of outside the lock
        for producer in producers { producer.resume() }
        startWorkers(start)
        return waiters
    }

    /// Records the finishes a worker loop collected; returns the waiters to resume if the queue is now
    /// empty. - Important: Call with the lock held.
    func recordFinishesLocked(_ context: WorkerContext) -> [IdleWaiter] {
        guard !context.finished.isEmpty else { return [] }
        var empty = false
        for (id, heldSlot) in context.finished {
            empty = scheduler.finished(id, heldSlot: heldSlot, departed: &context.departed)
        }
        context.finished.removeAll(keepingCapacity: true)
        var waiters: [IdleWaiter] = []
        if admission.hasWaiting {
            waiters = admission.admitWaiting(unfinished: scheduler.members.count).map(IdleWaiter.producer)
        }
        guard empty else { return waiters }
        defer { idleWaiters = [] }
        return waiters.isEmpty ? idleWaiters : waiters + idleWaiters
    }

    /// Submits the claims of the jobs started that must claim categories, in the order they were started,
    /// until there are none left (this thread was made the one that submits them).
    private func submitClaims() {
        while true {
            let next: Job? = lock.withLock {
                if let job = claimsToSubmit.popFirst() { return job }
                claimsDraining = false
                return nil
            }
            guard let job = next else { return }
            job.claimFromQueue(self)
        }
    }

    /// A started job's categories were granted: it runs on the next worker loop that looks (it holds its
    /// slot already). A loop is started for it unless one is looking: the loop whose job's finish
    /// granted it may be held up by that finish's code, so it is never counted on.
    func startGranted(_ job: Job, deliverFirst: Bool) {
        startWorkers(
            lock.withLock {
                scheduler.markGranted(job, deliverFirst: deliverFirst)
                return scheduler.workersToStart()
            })
    }

    /// A started job gave its slot back without running (it went back to waiting, or had finished).
    func slotReturned() {
        startWorkers(
            lock.withLock {
                scheduler.slotReturned()
                return scheduler.workersToStart()
            })
    }

    func startWorkers(_ count: Int) {
        for _ in 0..<count { dispatchWorker() }
    }

    /// Starts a worker loop on the queue's Dispatch queue, or, for ``WorkerThreads/dedicated``, on a
    /// serial queue made for it: such a queue targets Dispatch's overcommitting pool, which gives it a
    /// thread at once (an idle one, or a new one).
    func dispatchWorker() {
        if let dispatchQueue {
            dispatchQueue.async { self.runWorker() }
        } else {
            DispatchQueue(label: "Baton.JobQueue.worker").async { self.runWorker() }
        }
    }

    /// Runs worker loops on this thread: this queue's, then each queue that a job finished here made
    /// ready and that this thread can serve (`WorkerContext.nextLoop`). A loop, not recursion. The
    /// loops share one turn of `jobsPerWorkerTurn` jobs: a chain hopping between two queues gives its
    /// Dispatch queue back as often as one queue's loop does.
    func runWorker() {
        var budget = JobQueue.jobsPerWorkerTurn
        var queue: JobQueue? = self
        while let current = queue {
            queue = current.runWorkerTurn(budget: &budget)
            if budget == 0, let next = queue {
                next.dispatchWorker()
                queue = nil
            }
        }
    }

    /// This queue's worker loop, for at most `budget` jobs (counted down). Returns the queue whose loop
    /// this thread runs next, if any: one that became ready while this loop ran and was left to this
    /// thread.
    private func runWorkerTurn(budget: inout Int) -> JobQueue? {
        let context = WorkerContext(queue: self)
        let previous = WorkerContext.current
        WorkerContext.current = context
        defer { WorkerContext.current = previous }
        var report = QueueScheduler<Job>.WorkerReport.starting
        while budget > 0 {
            budget -= 1
            let (next, waiters, drain): (QueueScheduler<Job>.Next?, [IdleWaiter], Bool) = lock.withLock {
                let waiters = recordFinishesLocked(context)
                let next = scheduler.next(after: report)
                guard case .claim(let job) = next else { return (next, waiters, false) }
                claimsToSubmit.append(job)
                defer { claimsDraining = true }
                return (next, waiters, !claimsDraining)
            }
            context.releaseDeparted()
            for waiter in waiters { waiter.resume() }
            guard let next else {
                // Nothing more here: this thread goes on with the loop left to it.
                defer { context.nextLoop = nil }
                return context.nextLoop
            }
            // More here: the loop left to this thread starts on another one now.
            if let other = context.nextLoop {
                context.nextLoop = nil
                other.dispatchWorker()
            }
            switch next {
            case .claim:
                // The job holds its slot while it claims its categories (it runs once they are granted, on
                // the next loop that looks): a job waiting for a slot never holds a category.
                if drain { submitClaims() }
                report = .ran
            case .run(let job):
                context.running = job
                report = job.runFromQueue(self) ? .ran : .skipped
            case .runGranted(let job, let deliverFirst):
                context.running = job
                job.runStarted(in: self, deliverFirst: deliverFirst)
                report = .ran
            }
            context.running = nil
            context.bodyReturned = false
        }
        let waiters: [IdleWaiter] = lock.withLock {
            scheduler.handOver(after: report)
            return recordFinishesLocked(context)
        }
        if let other = context.nextLoop {
            context.nextLoop = nil
            other.dispatchWorker()
        }
        // The fresh loop first: this one counts as looking already, and the deinits `releaseDeparted()`
        // may run could wait for a job that only a loop of this queue can start.
        dispatchWorker()
        context.releaseDeparted()
        for waiter in waiters { waiter.resume() }
        return nil
    }
}

/// The worker loop running on the current thread, so that a job finishing inside its body can leave
/// its finish with the loop instead of taking the queue's lock (see ``JobQueue/jobDidFinish(_:heldSlot:waited:)``).
/// Only its own thread touches it.
final class WorkerContext {
    // Only its own thread touches a context, so the run-time exclusivity checks are redundant.
    let queue: JobQueue
    /// The job whose body this loop is running, if any.
    @exclusivity(unchecked) var running: Job?
    @exclusivity(unchecked) var finished: [(id: UInt64, heldSlot: Bool)] = []
    /// Finished jobs the queue let go of, released by the loop after it unlocks.
    @exclusivity(unchecked) var departed: [Job] = []
    /// The running job's body returned: this thread is handing the job over (its observers were told,
    /// its dependents are being released).
    @exclusivity(unchecked) var bodyReturned = false
    /// A queue on the same threads whose job the hand-over made ready, last, and that wanted a new
    /// worker loop: this thread runs that loop when its own has nothing left, instead of waking another
    /// thread for it (a chain whose jobs alternate between two queues paid a thread wake-up a hop), or
    /// starts it elsewhere as soon as its own loop takes another job, or before it runs a `deinit`.
    /// Between the two, no user code runs on this thread: the hand-over's work list has ended, the
    /// queue has no instruments (whose `withStart` ends after the body), and `releaseDeparted()` checks
    /// for deinits.
    @exclusivity(unchecked) var nextLoop: JobQueue?

    init(queue: JobQueue) {
        self.queue = queue
        finished.reserveCapacity(4)
        departed.reserveCapacity(4)
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key, nil)
        precondition(rc == 0, "Baton: pthread_key_create failed with \(rc)")
        return key
    }()

    /// Lets go of the finished jobs (outside the queue's lock). A job this releases for good runs its
    /// `deinit`, which is user code and might wait for the job whose loop was left to this thread: that
    /// loop is started elsewhere first. (A job that made another queue's job ready is usually still
    /// held by it, as its dependency.)
    func releaseDeparted() {
        guard !departed.isEmpty else { return }
        if let other = nextLoop, departed.indices.contains(where: { isKnownUniquelyReferenced(&departed[$0]) }) {
            nextLoop = nil
            other.dispatchWorker()
        }
        departed.removeAll(keepingCapacity: true)
    }

    /// Marks that `job`'s body returned, if this thread's loop is running it; returns whether it is.
    static func bodyReturned(_ job: Job) -> Bool {
        guard let context = current, context.running === job else { return false }
        context.bodyReturned = true
        return true
    }

    /// The context of the worker loop on this thread (not retained: the loop keeps it alive).
    static var current: WorkerContext? {
        get { pthread_getspecific(key).map { Unmanaged<WorkerContext>.fromOpaque($0).takeUnretainedValue() } }
        set { pthread_setspecific(key, newValue.map { Unmanaged.passUnretained($0).toOpaque() }) }
    }
}
