public import Baton
import Foundation
public import Logging
public import ServiceLifecycle
public import Tracing

/// Claims durable jobs from a store and runs them as ordinary Baton jobs on a `JobQueue`.
///
/// ```swift
/// let worker = try DurableWorker(store: store, jobs: [FetchFeed(), ParseFeed(), ImportFeed(db)])
/// try await worker.run(until: run)        // or run() as a long-lived service
/// ```
///
/// The store decides *what may start* (dependencies, `notBefore`, categories); the worker's queue
/// decides *when it runs* (its concurrency limit, priorities, time limits, instruments). While a job
/// runs, the worker renews its lease every ``Configuration/renewInterval``; a cancellation asked for
/// in the store, or a lease the worker lost, reaches the job as Swift task cancellation at the next
/// renewal. When no renewal reaches the store (the server restarting, a partition), the worker cancels
/// the job an eighth of the lease (at most a second) before the lease ends, before the store may give
/// the job and its category slots to another worker, and reports the attempt failed, to be retried.
/// A job that throws is retried by the store's ``RetryPolicy``; one whose input or output does
/// not decode fails at once with an error naming it.
///
/// **Delivery**: at-least-once execution, exactly-once completion record. A job may run again when its
/// worker dies or stalls past its lease, but only one completion per job is accepted (fencing by
/// lease token).
///
/// **Timing** (defaults): leases of 8 s renewed every 2 s, so a worker that dies leaves its jobs for at
/// most 8 s, and another worker — which wakes up when the earliest lease ends, or at least every
/// ``Configuration/pollInterval`` (1 s) — claims them again within about 9 s (attempt + 1). Within one
/// process, new work wakes workers at once; across processes sharing a SQLite file, within the polling
/// interval; on PostgreSQL, at once through `LISTEN/NOTIFY`. A wake-up only wakes: the worker then
/// claims, never more than its free room. Which clock decides a lease is the store's (PostgreSQL: the
/// server's); the worker measures its own leases from the moment it asked, on its own clock, so a
/// clock set differently on the worker's machine changes nothing.
///
/// **Structure**: one task owns the worker's state and reacts to events — a job ended, the store
/// answered a claim, a report or a renewal, a wake-up, a timer, a shutdown — in order; every store call
/// runs as a child task of one task group. Nothing else changes the state, so it needs no lock.
///
/// **Shutdown**: a graceful shutdown of the `ServiceGroup` the worker runs in, or ``shutdown()``,
/// stops claiming, lets running jobs finish for up to ``Configuration/shutdownGracePeriod``, then
/// cancels the rest and gives their leases back to the store, unattempted, so other workers take them
/// at once. Cancelling the task that runs ``run()`` is the hard stop: the same without the grace
/// period, and reports that the store does not take at once are dropped (their jobs run again once
/// their leases end). A job whose body does not stop when cancelled (it ignores cancellation, blocks a
/// thread, or awaits what never comes) is left behind 10 seconds after it was
/// cancelled, so that the worker still stops: its lease is no longer renewed,
/// the job runs again once the lease ends, and an error names it. Reports that the store still refuses
/// the grace period (at least 5 seconds) after the shutdown's deadline are given up the same way — a
/// damaged store, or a lock held for minutes, does not keep the worker from stopping longer than a
/// call in flight then takes to fail (SQLite's `busyTimeout`, PostgreSQL's `operationTimeout`). A
/// report the store refuses is tried again after the poll interval, then twice as long each time, up
/// to 5 seconds (and a quarter of the lease).
///
/// **Bodies and renewals** share Swift's cooperative thread pool: bodies that keep every thread of it
/// busy (CPU-bound loops, blocking calls) delay the renewals, and a lease that runs out stops its job
/// (it runs again). Keep such work off the pool (a thread or a Dispatch queue of its own), or give the
/// worker fewer slots (``Configuration/maxConcurrentJobs``) than the machine has cores.
///
/// ## Thread safety
/// All methods may be called from any task; run one `run` at a time per worker.
public final class DurableWorker: Service, Sendable {
    public struct Configuration: Sendable {
        /// The worker's name in the store (leases, `explain`). Unique per running worker.
        public var id: String
        /// How many jobs run at once (the queue's limit).
        public var maxConcurrentJobs: Int
        /// How long a claim lasts without renewal: the longest a dead worker's jobs wait. An attempt that
        /// no renewal has extended is stopped an eighth of this (at most a second) before it ends, and
        /// retried: another worker may take the job once the lease has ended.
        public var leaseDuration: Duration
        /// How often leases are renewed (a third of `leaseDuration` is good; more than half is warned about).
        public var renewInterval: Duration
        /// How often the store is asked for work when nothing woke the worker.
        public var pollInterval: Duration
        /// How long running jobs may take to finish after a shutdown begins.
        public var shutdownGracePeriod: Duration
        /// How long finished runs are kept: the worker prunes older ones (at most once a minute, beside its
        /// lease renewals, which a long prune does not hold back). `nil` keeps them until
        /// ``JobStore/prune(finishedBefore:)`` is called.
        public var retention: Duration?
        public var logger: Logger
        /// The instruments of the worker's queue (`nil`: `JobQueue.defaultInstruments`). Those that are
        /// also ``DurableWorkerInstrument``s are told of claims, lost leases and how attempts ended.
        public var instruments: [any JobInstrument]?
        /// Makes a span of every attempt, a child of the submitter's context stored with the run.
        /// `nil`: the bootstrapped tracer (`InstrumentationSystem.tracer`); none bootstrapped, no spans.
        public var tracer: (any Tracer)?
        /// Whether ``DurableWorker/run()`` fires the store's due schedules (``JobStore/fireDueSchedules()``):
        /// at each tick, and at least every `pollInterval`. Every worker may: a tick makes one run however
        /// many fire it. `run(until:)` never does.
        public var firesSchedules: Bool = true
        /// How long `run(until:)` waits with nothing to do before it checks whether the run's jobs wait
        /// for kinds no live worker has registered (and warns); tests shorten it.
        var stallWarningDelay: Duration = .seconds(5)

        public init(
            id: String = DurableWorker.defaultID(), maxConcurrentJobs: Int = 16, leaseDuration: Duration = .seconds(8),
            renewInterval: Duration = .seconds(2), pollInterval: Duration = .seconds(1),
            shutdownGracePeriod: Duration = .seconds(10), retention: Duration? = .seconds(7 * 24 * 3600),
            logger: Logger = Logger(label: "baton.durable.worker"), instruments: [any JobInstrument]? = nil,
            tracer: (any Tracer)? = nil
        ) {
            self.id = id
            self.maxConcurrentJobs = maxConcurrentJobs
            self.leaseDuration = leaseDuration
            self.renewInterval = renewInterval
            self.pollInterval = pollInterval
            self.shutdownGracePeriod = shutdownGracePeriod
            self.retention = retention
            self.logger = logger
            self.instruments = instruments
            self.tracer = tracer
        }

        /// Throws when the settings cannot work: durations must be positive (a zero interval spins
        /// against the store). A renewal interval of more than half the lease is allowed (tests renew by
        /// hand) but warned about: one late renewal then lets the lease run out, and the worker stops
        /// the attempt before it does (the job is retried).
        func validate() throws {
            func fail(_ message: String) -> DurableError {
                DurableError(code: .invalidConfiguration, message: "DurableWorker '\(id)': \(message)")
            }
            for (name, value) in [
                ("leaseDuration", leaseDuration), ("renewInterval", renewInterval), ("pollInterval", pollInterval),
            ] where value <= .zero {
                throw fail("\(name) is \(value); it must be more than zero.")
            }
            if id.isEmpty {
                throw fail(
                    "its id is empty; give it a name unique among the store's workers (the default, DurableWorker.defaultID(), is)."
                )
            }
            if let problem = StoredText.problem(with: id, "id") {
                throw fail("its \(problem); give it another id.")
            }
            if maxConcurrentJobs < 1 {
                throw fail("maxConcurrentJobs is \(maxConcurrentJobs); give 1 or more.")
            }
            if shutdownGracePeriod < .zero {
                throw fail("shutdownGracePeriod is \(shutdownGracePeriod); use zero or more.")
            }
            if let retention, retention < .zero { throw fail("retention is \(retention); use zero or more, or nil.") }
            // The worker sleeps for these: beyond what a clock can count (`.seconds(Int64.max)`), a sleep traps.
            for (name, value) in [
                ("leaseDuration", leaseDuration), ("renewInterval", renewInterval), ("pollInterval", pollInterval),
                ("shutdownGracePeriod", shutdownGracePeriod),
            ] where value > Schedule.longestInterval {
                throw fail("\(name) is \(value); the longest is 100 years (36,500 days).")
            }
            if let retention, retention > Schedule.longestInterval {
                throw fail(
                    "retention is \(retention); the longest is 100 years (36,500 days). Give nil to keep runs for ever."
                )
            }
            if renewInterval > leaseDuration / 2 {
                logger.warning(
                    "DurableWorker '\(id)': renewInterval (\(renewInterval)) is more than half of leaseDuration (\(leaseDuration)): one late renewal lets a lease run out, and the worker then stops the attempt (an eighth of the lease, at most a second, before the lease ends) to be retried. A third of the lease is a good interval."
                )
            }
        }
    }

    public let store: any JobStore
    public let configuration: Configuration
    /// The queue the jobs run on.
    public let queue: JobQueue
    let runners: [String: JobRunner]
    /// The instruments of the queue that watch attempts, too.
    let durableInstruments: [any DurableWorkerInstrument]
    /// The tracer of attempt spans; `nil` when none was given or bootstrapped.
    let tracer: (any Tracer)?
    /// The trace contexts of runs, by run (see `traceCarriers(for:)`).
    let carriers = Protected([DurableRunID: [String: String]]())
    let kinds: [String]
    /// How `shutdown()` reaches the running worker's owner (see ``WorkerControl``).
    let control = Protected(WorkerControl())
    /// What tests watch.
    let hooks: Hooks

    /// Calls for tests to watch the worker.
    struct Hooks: Sendable {
        /// A shutdown began (no claim is made from now on).
        var shutdownBegan: (@Sendable () -> Void)?
        /// The owner decides what to do next (once per event or timer): a count that tells a worker that
        /// waits from one that spins.
        var decided: (@Sendable () -> Void)?
    }

    /// - Throws: ``DurableError`` (``DurableError/Code/noWorker``) when `jobs` is empty or names a kind twice;
    ///   (``DurableError/Code/invalidConfiguration``) when the configuration cannot work.
    public convenience init(
        store: any JobStore, jobs: [any DurableJob], configuration: Configuration = Configuration()
    ) throws {
        try self.init(store: store, jobs: jobs, configuration: configuration, hooks: Hooks())
    }

    init(store: any JobStore, jobs: [any DurableJob], configuration: Configuration, hooks: Hooks) throws {
        try configuration.validate()
        self.hooks = hooks
        var runners: [String: JobRunner] = [:]
        for job in jobs {
            let runner = JobRunner(job)
            if let problem = StoredText.problem(with: runner.kind, "kind") {
                // Every claim names the worker's kinds: PostgreSQL refused each one with a NUL, and the
                // worker claimed nothing; a graph with a longer one is refused.
                throw DurableError(
                    code: .invalidConfiguration, message: "the \(problem); give the job type another kind.")
            }
            if runner.kind.isEmpty {
                // Graphs refuse an empty kind: no job could ever be claimed for it.
                throw DurableError(
                    code: .invalidConfiguration,
                    message: "the job type \(type(of: job)) has an empty kind; give it a kind (its static let kind).")
            }
            if runners.updateValue(runner, forKey: runner.kind) != nil {
                throw DurableError(
                    code: .noWorker,
                    message: "two jobs given to the worker have the kind '\(runner.kind)'. Each kind names one type.")
            }
        }
        if runners.isEmpty {
            throw DurableError(code: .noWorker, message: "a DurableWorker needs at least one DurableJob to run.")
        }
        self.store = store
        self.configuration = configuration
        self.runners = runners
        self.kinds = runners.keys.sorted()
        queue = JobQueue(
            name: "durable \(configuration.id)", maxConcurrentJobs: configuration.maxConcurrentJobs,
            instruments: configuration.instruments)
        durableInstruments = queue.instruments.compactMap { $0 as? any DurableWorkerInstrument }
        let tracer = configuration.tracer ?? InstrumentationSystem.tracer
        self.tracer = tracer is NoOpTracer ? nil : tracer
    }

    /// A name unique enough for one worker: host, process id and a random suffix.
    public static func defaultID() -> String {
        "\(ProcessInfo.processInfo.hostName)-\(ProcessInfo.processInfo.processIdentifier)-\(UInt16.random(in: 0...UInt16.max))"
    }

    /// Runs until the task is cancelled, the service group shuts down gracefully, or ``shutdown()``.
    /// Throws when the store is closed under it (``JobStore/isClosed``), once it has stopped.
    public func run() async throws {
        try await work(until: nil)
    }

    /// Runs until every job of `run` has finished (here or on other workers), then shuts down as
    /// ``shutdown()`` does. Returns the run's explanation — of a run not finished yet when the worker
    /// was shut down first (check `explanation.run.finished`). While it has nothing to do, it warns
    /// (after 5 s, then once a minute) when jobs of the run wait for kinds no live worker has registered.
    @discardableResult
    public func run(until run: DurableRun) async throws -> RunExplanation {
        try await work(until: run.id)
        do {
            return try await store.explain(run: run.id)
        } catch let error as DurableError where error.code == .unknownRun {
            throw DurableError(
                code: .unknownRun,
                message:
                    "\(run.id) finished, and was pruned before its explanation could be read (a worker's retention, or prune(finishedBefore:)); keep finished runs longer to read them after run(until:).",
                underlying: error)
        }
    }

    /// Begins a graceful shutdown: no new claims; running jobs get ``Configuration/shutdownGracePeriod``.
    /// Called before a run begins, it is obeyed by the next one, which returns at once.
    public func shutdown() { shutdown(at: .now + configuration.shutdownGracePeriod) }

    func shutdown(at deadline: ContinuousClock.Instant) {
        let input = control.withLock { control -> AsyncStream<WorkerEvent>.Continuation? in
            if control.input == nil {
                control.pendingShutdown = min(control.pendingShutdown ?? deadline, deadline)
            }
            return control.input
        }
        input?.yield(.shutdown(deadline))
    }

    /// Whether a run is under way and takes events (tests).
    var isTakingEvents: Bool { control.withLock { $0.input != nil } }

    /// Tests: renews the held leases now (what the owner does every renew interval) and returns once
    /// that renewal has been handled. Does nothing when the worker is not running.
    func renewLeases() async {
        guard let input = control.withLock({ $0.input }) else { return }
        await withCheckedContinuation { input.yield(.renewNow($0)) }
    }

    /// Tests: runs the lease watch now; returns when it would next stop an attempt (store clock).
    func checkLeases() async -> Date? {
        guard let input = control.withLock({ $0.input }) else { return nil }
        return await withCheckedContinuation { input.yield(.checkLeases($0)) }
    }

    func work(until run: DurableRunID?) async throws {
        // One run at a time: two would share the worker's queue and registration.
        let alreadyRunning = control.withLock { control in
            defer { control.running = true }
            return control.running
        }
        if alreadyRunning {
            throw DurableError(
                code: .invalidConfiguration,
                message:
                    "DurableWorker '\(configuration.id)' is already running: run() and run(until:) run one at a time on a worker. Await the first, or make another DurableWorker (with its own id) to run beside it."
            )
        }
        defer { control.withLock { $0.running = false } }
        if let run { _ = try await store.record(of: run) }  // an unknown run: fail now, not wait forever
        try await registerSelf()
        let (events, input) = AsyncStream<WorkerEvent>.makeStream()
        let pending = control.withLock { control -> ContinuousClock.Instant? in
            control.input = input
            defer { control.pendingShutdown = nil }
            return control.pendingShutdown
        }
        if let pending { input.yield(.shutdown(pending)) }
        // The owner runs in a task of its own, awaited here, so that cancelling `run` does not cancel the
        // calls that give leases back: the cancellation becomes a hard stop (running jobs cancelled and
        // given back at once) that the owner carries out. A graceful shutdown of the service group is a
        // shutdown with the grace period.
        let owner = Task { await self.own(events, input: input, until: run) }
        let storeClosed = await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await owner.value
            } onCancel: {
                input.yield(.hardStop)
            }
        } onGracefulShutdown: {
            self.shutdown()
        }
        control.withLock { $0.input = nil }
        input.finish()
        if let (error, dropped) = storeClosed {
            throw DurableError(
                code: .storeFailure,
                message:
                    "DurableWorker '\(configuration.id)' stopped: its store was closed while it ran (\(error))"
                    + (dropped > 0
                        ? "; \(dropped) attempts' reports could not be sent, and their jobs run again once their leases end"
                        : "")
                    + ". Close a store only after the workers using it have returned from run().")
        }
    }

    /// The owner task: reacts to events until the worker has stopped, then unregisters it. Returns what
    /// the store's closing dropped, if it was closed under the worker.
    private func own(
        _ events: AsyncStream<WorkerEvent>, input: AsyncStream<WorkerEvent>.Continuation, until run: DurableRunID?
    ) async -> (error: String, dropped: Int)? {
        let storeClosed = await withDiscardingTaskGroup { group in
            let store = store
            group.addTask {
                for await _ in store.wakeups() { input.yield(.wake) }
            }
            if run == nil && configuration.firesSchedules {
                group.addTask { await self.fireSchedules() }
            }
            var owner = WorkerOwner(worker: self, input: input, until: run)
            await owner.run(events, group: &group)
            group.cancelAll()
            return owner.storeClosed
        }
        try? await store.unregister(worker: configuration.id)
        return storeClosed
    }

    /// Fires the store's due schedules until cancelled (the worker stopping): at each next tick, and at
    /// least every poll interval, for schedules that other processes store or change. A failure is
    /// logged and tried again at the next poll; its ticks are not lost (they stay due, and fire by their
    /// schedule's `catchUp`).
    private func fireSchedules() async {
        var warned: Set<String> = []
        while !Task.isCancelled {
            var wait = configuration.pollInterval
            do {
                let asked = store.clock.now()
                let fired = try await store.fireDueSchedules()
                for (name, tick, run) in fired.runs where !run.existing {
                    configuration.logger.info(
                        "schedule fired",
                        metadata: [
                            "schedule": "\(name)", "tick": "\(tick.formatted(.iso8601))", "run": "\(run.run.rawValue)",
                        ])
                }
                for (name, why) in fired.unfired.sorted(by: { $0.key < $1.key }) where warned.insert(name).inserted {
                    configuration.logger.warning(
                        "schedule is due but this worker cannot fire it; it is left for workers that can (upgrade this one, or store the schedule again with a timing and graph this version accepts)",
                        metadata: ["schedule": "\(name)", "error": "\(why)"])
                }
                // Warned again if it breaks again after being fired.
                warned.formIntersection(fired.unfired.keys)
                wait = Self.scheduleWait(after: fired, asked: asked, now: store.clock.now(), poll: wait)
            } catch {
                if store.isClosed || Task.isCancelled { return }
                configuration.logger.warning(
                    "firing the store's schedules failed; trying again at the next poll",
                    metadata: ["error": "\(error)"])
            }
            do {
                try await Task.sleep(for: max(wait, .milliseconds(1)))
            } catch {
                return
            }
        }
    }

    /// How long the schedule loop waits after a call made at `asked` that answered `fired`: until the
    /// next tick, at most `poll`. A tick that was due before a call that fired nothing is one another
    /// process is firing (or one this worker cannot fire, which the stores leave out of the next tick):
    /// the loop looks again at the next poll, not at once (which would be a loop without a pause). A
    /// tick that came due during the call is looked at once.
    static func scheduleWait(after fired: FiredSchedules, asked: Date, now: Date, poll: Duration) -> Duration {
        guard let next = fired.nextTick else { return poll }
        if fired.runs.isEmpty && next <= asked { return poll }
        let seconds = next.timeIntervalSince(now)
        return min(poll, .milliseconds(Int64((max(0, seconds) * 1000).rounded(.up))))
    }

    private func registerSelf() async throws {
        let expires = store.clock.now().adding(configuration.leaseDuration)
        try await store.register(WorkerRecord(id: configuration.id, kinds: kinds, expires: expires))
    }
}
