public import Baton
public import CoreMetrics

/// Counts and times the jobs of the queues it watches, through swift-metrics.
///
/// ```swift
/// MetricsSystem.bootstrap(PrometheusMetricsFactory())  // any swift-metrics backend
/// JobQueue.defaultInstruments = [JobMetrics()]
/// ```
///
/// | metric | type | dimensions |
/// |---|---|---|
/// | `baton_jobs_started_total` | counter | `queue`, `kind` |
/// | `baton_jobs_succeeded_total` | counter | `queue`, `kind` |
/// | `baton_jobs_failed_total` | counter | `queue`, `kind` |
/// | `baton_jobs_cancelled_total` | counter | `queue`, `kind` |
/// | `baton_jobs_retried_total` | counter | `queue`, `kind` (the `RetryJob`'s queue and kind) |
/// | `baton_jobs_ready` | meter (gauge) | `queue` |
/// | `baton_jobs_running` | meter (gauge) | `queue` |
/// | `baton_job_wait_duration` | timer | `queue`, `kind`: from ready to started |
/// | `baton_job_run_duration` | timer | `queue`, `kind`: from started to finished |
/// | `baton_durable_leases_lost_total` | counter | `queue`, `kind` (a durable worker's queue, the durable kind) |
///
/// Every job that finishes counts once as succeeded, failed or cancelled, whether its body ran or
/// not (cancelled while waiting, say); `started` counts bodies that ran. A retry is an attempt of a
/// `RetryJob` after the first, or, on a `DurableWorker`'s queue, an attempt of a durable job after
/// its first (labelled with its durable kind; see `DurableWorkerInstrument`). The `kind` is the job's type name (`BlockJob`, `AsyncJob`, your
/// subclass) unless you give a `kind` function. The children of a `GroupJob` are counted on the
/// group's child queue, named `"<group>.children"`. By default a queue's label is its name without the
/// instance numbers of default job names (`GroupJob#123.children` is labelled `GroupJob.children`), so
/// that unnamed groups and retries share one set of metrics instead of making new ones each; give a
/// `queueName` function to fold other queues with generated names (a group named after a URL, say)
/// into fewer label values.
///
/// The instrument keeps the metric handles it made, one set per label value, and a shortcut per live
/// queue; the shortcuts of queues that were released are dropped as new queues come, so a
/// long-running process that makes queues without end (a group per request) keeps a bounded amount.
///
/// With no backend bootstrapped (swift-metrics' `NOOPMetricsHandler`) when it is created, and no
/// `factory` given, the instrument is not enabled (``isEnabled``): queues leave it out, and cost
/// what they cost without it. Bootstrap the backend first.
///
/// ## Thread safety
/// Called by queues from any thread; the per-job bookkeeping is behind one lock, and metric handles
/// are created (by the backend, your code) outside it.
public final class JobMetrics: JobInstrument {
    /// The metric names, for dashboards and tests.
    public enum Name {
        public static let started = "baton_jobs_started_total"
        public static let succeeded = "baton_jobs_succeeded_total"
        public static let failed = "baton_jobs_failed_total"
        public static let cancelled = "baton_jobs_cancelled_total"
        public static let retried = "baton_jobs_retried_total"
        public static let ready = "baton_jobs_ready"
        public static let running = "baton_jobs_running"
        public static let waitDuration = "baton_job_wait_duration"
        public static let runDuration = "baton_job_run_duration"
        /// Attempts of durable jobs whose worker lost the lease (see `DurableWorkerInstrument`).
        public static let leasesLost = "baton_durable_leases_lost_total"
    }

    package let factory: (any MetricsFactory)?
    private let kind: (@Sendable (Job) -> String)?
    let queueName: (@Sendable (JobQueue) -> String)?
    /// Jobs between added and finished, striped by id so that threads rarely meet on a lock.
    private let stripes = (0..<16).map { _ in Protected([UInt64: InFlight]()) }
    private let cache = Protected(Cache())
    /// The counters of durable workers' attempts, by (queue, durable kind).
    private let durableCounters = Protected([Cache.Labels: DurableCounters]())

    /// - Parameters:
    ///   - factory: The backend. Defaults to the bootstrapped one (`MetricsSystem.factory`); if none
    ///     is bootstrapped yet, the instrument records nothing.
    ///   - kind: The `kind` dimension of a job. Defaults to its type name (``typeName(_:)``).
    ///   - queueName: The `queue` dimension of a queue. Defaults to its name without instance numbers
    ///     (``stableQueueName(_:)``).
    public init(
        factory: (any MetricsFactory)? = nil,
        kind: (@Sendable (Job) -> String)? = nil,
        queueName: (@Sendable (JobQueue) -> String)? = nil
    ) {
        let chosen = factory ?? MetricsSystem.factory
        self.factory = chosen is NOOPMetricsHandler ? nil : chosen
        self.kind = kind
        self.queueName = queueName
    }

    /// Whether the instrument records anything (a backend was given or bootstrapped). Queues leave out
    /// an instrument that does not, so it costs nothing.
    public var isEnabled: Bool { factory != nil }

    /// The type name of a job, without generic arguments: `BlockJob`, `ValueJob`.
    @Sendable public static func typeName(_ job: Job) -> String {
        let type = ObjectIdentifier(Swift.type(of: job))
        if let known = typeNames.withLock({ $0[type] }) { return known }
        let name = String(describing: Swift.type(of: job))
        let trimmed = name.firstIndex(of: "<").map { String(name[..<$0]) } ?? name
        typeNames.withLock { $0[type] = trimmed }
        return trimmed
    }

    /// `name` without the instance numbers of default job names: `GroupJob#123.children` becomes
    /// `GroupJob.children` (a `#` followed by digits up to a `.` or the end is left out).
    public static func stableQueueName(_ name: String) -> String {
        guard name.contains("#") else { return name }
        var result = ""
        var rest = Substring(name)
        while let hash = rest.firstIndex(of: "#") {
            result += rest[..<hash]
            let after = rest[rest.index(after: hash)...]
            let digits = after.prefix { $0.isASCII && $0.isNumber }
            let end = after[digits.endIndex...]
            if !digits.isEmpty, end.isEmpty || end.first == "." {
                rest = end
            } else {
                result.append("#")
                rest = after
            }
        }
        return result + rest
    }

    /// The `queue` label of `queue`.
    private func queueLabel(_ queue: JobQueue) -> String {
        queueName?(queue) ?? Self.stableQueueName(queue.name)
    }

    /// Type names by type: describing a type is slow, and there are few job types.
    private static let typeNames = Protected([ObjectIdentifier: String]())

    // MARK: JobInstrument

    public func jobWasAdded(_ job: Job, to queue: JobQueue) {
        guard factory != nil else { return }
        let handles = handles(for: job, in: queue)
        let previous = stripe(job).withLock { $0.updateValue(InFlight(handles: handles), forKey: job.id) }
        _ = previous  // re-added (cannot happen): dropped outside the lock
        if let retry = job.parentGroup as? RetryJob, retry.attempts > 1, let retryQueue = retry.queue {
            self.handles(for: retry, in: retryQueue).retried.increment()
        }
    }

    public func jobBecameReady(_ job: Job, in queue: JobQueue) {
        guard factory != nil else { return }
        let now = Instant.now
        // Ready again after a late dependency sent it back to waiting: one ready job, the first instant.
        let handles: Handles? = stripe(job).withLock { inFlight in
            guard inFlight[job.id]?.ready == 0 else { return nil }
            inFlight[job.id]!.ready = now
            return inFlight[job.id]!.handles
        }
        handles?.ready.increment()
    }

    public func jobWillStart(_ job: Job, in queue: JobQueue) {
        guard factory != nil else { return }
        let now = Instant.now
        let found: (Handles, UInt64)? = stripe(job).withLock { inFlight in
            guard let entry = inFlight[job.id] else { return nil }
            inFlight[job.id]!.started = now
            return (entry.handles, entry.ready)
        }
        guard let (handles, ready) = found else { return }
        handles.started.increment()
        if ready != 0 {
            handles.ready.decrement()
            handles.wait.recordNanoseconds(Int64(clamping: now &- ready))
        }
        handles.running.increment()
    }

    public func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) {
        guard factory != nil else { return }
        let now = Instant.now
        guard let entry = stripe(job).withLock({ $0.removeValue(forKey: job.id) }) else { return }
        let handles = entry.handles
        if entry.started != 0 {
            handles.running.decrement()
            handles.run.recordNanoseconds(Int64(clamping: now &- entry.started))
        } else if entry.ready != 0 {
            handles.ready.decrement()  // ready, then cancelled before it started
        }
        switch outcome {
        case .succeeded: handles.succeeded.increment()
        case .failed: handles.failed.increment()
        case .cancelled: handles.cancelled.increment()
        }
    }

    // MARK: Handles

    /// The metrics of one (queue, kind), and the gauges of the queue.
    final class Handles: Sendable {
        let started, succeeded, failed, cancelled, retried: Counter
        let wait, run: Timer
        let ready, running: Meter

        init(queue: String, kind: String, gauges: (ready: Meter, running: Meter), factory: any MetricsFactory) {
            let dimensions = [("queue", queue), ("kind", kind)]
            func counter(_ label: String) -> Counter { Counter(label: label, dimensions: dimensions, factory: factory) }
            started = counter(Name.started)
            succeeded = counter(Name.succeeded)
            failed = counter(Name.failed)
            cancelled = counter(Name.cancelled)
            retried = counter(Name.retried)
            wait = Timer(label: Name.waitDuration, dimensions: dimensions, factory: factory)
            run = Timer(label: Name.runDuration, dimensions: dimensions, factory: factory)
            (ready, running) = gauges
        }
    }

    /// A job between added and finished. Instants are nanoseconds of `Instant`; 0: not yet.
    struct InFlight {
        let handles: Handles
        var ready: UInt64 = 0
        var started: UInt64 = 0
    }

    /// Handles by labels; with the default label functions also by queue and job type, which are
    /// cheaper to look up than the labels are to compute.
    struct Cache {
        struct Fast: Hashable {
            let queue: ObjectIdentifier
            let type: ObjectIdentifier
        }
        struct Labels: Hashable {
            let queue: String
            let kind: String
        }
        struct Shortcut {
            /// Weak: the entry must not keep the queue alive, and tells a queue from a later one at the
            /// same address (and a released one, whose entry is swept). Read only outside the lock: a
            /// read holds the queue for a moment, and letting go of it there could release it.
            weak var queue: JobQueue?
            let name: String
            let handles: Handles
            /// Tells this entry from a later one for the same key.
            let serial: UInt64
        }
        var fast: [Fast: Shortcut] = [:]
        var nextSerial: UInt64 = 0
        /// `fast` is swept of released queues when it reaches this size (then twice what is left, at
        /// least `minimumSweepSize`): amortised constant time per insertion, bounded memory.
        var sweepAt = Cache.minimumSweepSize
        var sweeping = false
        var byLabels: [Labels: Handles] = [:]
        var gauges: [String: (ready: Meter, running: Meter)] = [:]

        static let minimumSweepSize = 256
    }

    /// Drops the shortcuts of released queues when there are many: the entries are looked at outside
    /// the lock (reading a weak reference holds its queue for a moment), then removed under it unless
    /// replaced meanwhile, and let go of after it.
    private func sweepIfDue() {
        // The snapshot shares the dictionary's storage; it is let go of before the removals, which would
        // otherwise copy the whole dictionary under the lock.
        func deadEntries() -> [(Cache.Fast, UInt64)]? {
            let snapshot: [Cache.Fast: Cache.Shortcut]? = cache.withLock { cache in
                guard cache.fast.count >= cache.sweepAt, !cache.sweeping else { return nil }
                cache.sweeping = true
                return cache.fast
            }
            return snapshot?.compactMap { key, entry in entry.queue == nil ? (key, entry.serial) : nil }
        }
        guard let dead = deadEntries() else { return }
        let removed: [Cache.Shortcut] = cache.withLock { cache in
            var removed: [Cache.Shortcut] = []
            for (key, serial) in dead where cache.fast[key]?.serial == serial {
                removed.append(cache.fast.removeValue(forKey: key)!)
            }
            cache.sweepAt = max(Cache.minimumSweepSize, 2 * cache.fast.count)
            cache.sweeping = false
            return removed
        }
        _ = removed  // dropped outside the lock
    }

    /// How many shortcuts (by queue and job type) and label sets the instrument keeps (tests).
    package var cachedEntries: (shortcuts: Int, labels: Int, gauges: Int) {
        cache.withLock { ($0.fast.count, $0.byLabels.count, $0.gauges.count) }
    }

    private func stripe(_ job: Job) -> Protected<[UInt64: InFlight]> {
        stripes[Int(truncatingIfNeeded: job.id & 15)]
    }

    private func handles(for job: Job, in queue: JobQueue) -> Handles {
        let fast =
            kind == nil && queueName == nil
            ? Cache.Fast(queue: ObjectIdentifier(queue), type: ObjectIdentifier(type(of: job))) : nil
        let name = queue.name
        // (The weak reference is read after unlocking: see `Cache.Shortcut`.)
        if let fast, let found = cache.withLock({ $0.fast[fast] }), found.queue === queue, found.name == name {
            return found.handles
        }
        let labels = Cache.Labels(queue: queueLabel(queue), kind: kind?(job) ?? Self.typeName(job))
        var found = cache.withLock { $0.byLabels[labels] }
        if found == nil {
            // The backend makes handles outside the lock (it is user code); a racing twin is dropped after.
            let factory = factory!
            let gauges =
                cache.withLock { $0.gauges[labels.queue] }
                ?? (
                    ready: Meter(label: Name.ready, dimensions: [("queue", labels.queue)], factory: factory),
                    running: Meter(label: Name.running, dimensions: [("queue", labels.queue)], factory: factory)
                )
            let made = Handles(queue: labels.queue, kind: labels.kind, gauges: gauges, factory: factory)
            found = cache.withLock { cache in
                if cache.gauges[labels.queue] == nil { cache.gauges[labels.queue] = gauges }
                if let existing = cache.byLabels[labels] { return existing }
                cache.byLabels[labels] = made
                return made
            }
        }
        if let fast {
            let (replaced, due) = cache.withLock { cache in
                cache.nextSerial += 1
                let entry = Cache.Shortcut(queue: queue, name: name, handles: found!, serial: cache.nextSerial)
                return (cache.fast.updateValue(entry, forKey: fast), cache.fast.count >= cache.sweepAt)
            }
            _ = replaced  // dropped outside the lock
            if due { sweepIfDue() }
        }
        return found!
    }

    /// The counters of a durable worker's attempts (BatonDurable's adapter counts retries and lost leases).
    package final class DurableCounters: Sendable {
        package let retried, leasesLost: Counter

        init(queue: String, kind: String, factory: any MetricsFactory) {
            let dimensions = [("queue", queue), ("kind", kind)]
            retried = Counter(label: Name.retried, dimensions: dimensions, factory: factory)
            leasesLost = Counter(label: Name.leasesLost, dimensions: dimensions, factory: factory)
        }
    }

    /// The durable counters of `queue` and a durable `kind`, made once. Call only when `factory` is set.
    package func durableCounters(queue: JobQueue, kind: String) -> DurableCounters {
        let labels = Cache.Labels(queue: queueLabel(queue), kind: kind)
        if let known = durableCounters.withLock({ $0[labels] }) { return known }
        // The backend makes the handles outside the lock (it is user code); a racing twin is dropped after.
        let made = DurableCounters(queue: labels.queue, kind: labels.kind, factory: factory!)
        return durableCounters.withLock { counters in
            if let existing = counters[labels] { return existing }
            counters[labels] = made
            return made
        }
    }
}
