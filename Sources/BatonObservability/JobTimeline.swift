public import Baton
public import Foundation

/// Records when every job of the queues it watches was added, became ready, started and finished,
/// on which slot of its queue it ran, and what it depended on; then draws the run.
///
/// ```swift
/// let timeline = JobTimeline()
/// let queue = JobQueue(name: "import", instruments: [timeline])
/// // … add jobs, wait …
/// try timeline.chromeTraceJSON().write(to: URL(filePath: "run.json"), atomically: true, encoding: .utf8)  // Perfetto
/// try timeline.html(title: "import").write(to: URL(filePath: "run.html"), atomically: true, encoding: .utf8)
/// ```
///
/// ``chromeTraceJSON()`` writes the Chrome trace-event format: a process per queue, a thread per slot
/// (the jobs that ran on it one after another), waits as async slices and dependencies as flow
/// arrows. ``html(title:rowLimit:)`` writes a page with a Gantt chart in inline SVG (see
/// ``JobTimeline/html(title:rowLimit:)``).
///
/// Instants that happen outside a queue — a durable store's claim of a job, a lost lease, a retry
/// scheduled — are recorded with ``mark(_:of:)`` and drawn as ticks on the job's row.
///
/// Memory: about 200 bytes per job, kept until the timeline is released (or ``reset()``).
///
/// ## Thread safety
/// Called by queues from any thread; everything is behind one lock, which no other code runs under.
public final class JobTimeline: JobInstrument {
    /// One job's life, in nanoseconds since the timeline was created.
    public struct Entry: Sendable {
        public let id: UInt64
        public let name: String
        public let queue: String
        /// Which queue of that name (1, 2, …, in order of first use): groups' child queues share names.
        public let queueInstance: Int
        /// The queue's number among all queues seen (for its slots).
        let queueSerial: Int
        /// The job's type name (``JobMetrics/typeName(_:)``).
        public let kind: String
        /// The `Job.parentGroup`'s id, if any.
        public let group: UInt64?
        /// The ids of the jobs it waited for (its dependencies and the generated ones).
        public let dependencies: [UInt64]
        public let added: UInt64
        public internal(set) var ready: UInt64?
        public internal(set) var started: UInt64?
        public internal(set) var finished: UInt64?
        public internal(set) var outcome: Outcome?
        /// The queue's slot it ran on (0-based): slots are reused, a new job takes the lowest free one.
        public internal(set) var slot: Int?
        /// Instants recorded with ``JobTimeline/mark(_:of:)``.
        public internal(set) var marks: [Mark] = []
    }

    /// How a job finished.
    public enum Outcome: String, Sendable {
        case succeeded, failed, cancelled
        /// A durable attempt whose job asked to run again later (`Snooze`).
        case snoozed
    }

    /// An instant in a job's life that happened outside its queue.
    public struct Mark: Sendable {
        public let kind: Kind
        /// Nanoseconds since the timeline was created.
        public let at: UInt64

        /// What happened: one of the durable store's events, or your own.
        public struct Kind: RawRepresentable, Hashable, Sendable {
            public let rawValue: String
            public init(rawValue: String) { self.rawValue = rawValue }
            /// A worker claimed the job from a durable store.
            public static let claimed = Kind(rawValue: "claimed")
            /// The worker's lease on the job expired or was taken over.
            public static let leaseLost = Kind(rawValue: "lease lost")
            /// The job was scheduled to run again.
            public static let retried = Kind(rawValue: "retried")
            /// The job asked to run again later (a durable job's `Snooze`).
            public static let snoozed = Kind(rawValue: "snoozed")
        }
    }

    struct State {
        var entries: [Entry] = []
        var index: [UInt64: Int] = [:]
        /// Per queue (by serial number): which slots are taken.
        var slots: [Int: [Bool]] = [:]
        /// Queues seen, by identity (weak: an address may be reused by a later queue).
        var queues: [ObjectIdentifier: QueueRef] = [:]
        var queueCount = 0
        /// How many queues of each name were seen.
        var instances: [String: Int] = [:]
        /// Marks of jobs not (yet) recorded.
        var early: [UInt64: [Mark]] = [:]
    }

    struct QueueRef {
        weak var queue: JobQueue?
        let instance: Int
        let serial: Int
    }

    /// Nanoseconds of `Instant` at creation: the timeline's zero.
    let origin: UInt64
    /// For a timeline of recorded jobs (``recorded(_:now:)``): its "now", in nanoseconds past its zero.
    /// (Read back through `Instant`, the machine's time since it booted, a run older than that came out
    /// with "now" before its jobs' starts, and a running job's length wrapped to centuries.)
    private let recordedNow: UInt64?
    private let state = Protected(State())

    public init() {
        origin = Instant.now
        recordedNow = nil
    }

    private init(recordedNow: UInt64) {
        origin = 0
        self.recordedNow = recordedNow
    }

    /// Nanoseconds from the timeline's zero to now.
    var elapsed: UInt64 { recordedNow ?? (Instant.now &- origin) }

    /// A job that ran without a timeline watching it — an attempt of a durable run, read back from its
    /// store — for ``recorded(_:now:)``.
    public struct RecordedJob: Sendable {
        public var id: UInt64
        public var name: String
        /// The row group it is drawn in.
        public var queue: String
        public var kind: String
        /// The job it is drawn under (for a durable run: the job that added it).
        public var group: UInt64?
        /// The ids of the recorded jobs it waited for.
        public var dependencies: [UInt64]
        public var added: Date
        public var started: Date?
        public var finished: Date?
        public var outcome: Outcome?

        public init(
            id: UInt64, name: String, queue: String, kind: String, group: UInt64? = nil, dependencies: [UInt64] = [],
            added: Date, started: Date?, finished: Date?, outcome: Outcome?
        ) {
            self.id = id
            self.name = name
            self.queue = queue
            self.kind = kind
            self.group = group
            self.dependencies = dependencies
            self.added = added
            self.started = started
            self.finished = finished
            self.outcome = outcome
        }
    }

    /// A timeline of jobs recorded elsewhere, drawn as if it had watched them: each queue's slots are
    /// given in order of start, the lowest free one first. Jobs not finished are drawn up to `now`.
    public static func recorded(_ jobs: [RecordedJob], now: Date = Date()) -> JobTimeline {
        // The zero of the timeline's clock: the first instant recorded, read on the monotonic clock.
        let first = jobs.map(\.added).min() ?? now
        // Times are capped at 100 years past the first: one far out of range (a hand-edited store, a
        // worker's wrong clock) is drawn at the end instead of trapping as it is converted.
        func nanoseconds(_ date: Date) -> UInt64 {
            let seconds = date.timeIntervalSince(first)
            guard seconds > 0 else { return 0 }  // (and NaN)
            return UInt64(min(seconds, 100 * 365.25 * 86_400) * 1e9)
        }
        let sinceFirst = nanoseconds(now)
        let timeline = JobTimeline(recordedNow: sinceFirst)
        timeline.state.withLock { state in
            var serials: [String: Int] = [:]
            var slotEnds: [Int: [UInt64]] = [:]
            for job in jobs.sorted(by: { ($0.started ?? .distantFuture, $0.id) < ($1.started ?? .distantFuture, $1.id) }
            ) {
                let serial: Int
                if let known = serials[job.queue] {
                    serial = known
                } else {
                    state.queueCount += 1
                    serial = state.queueCount
                    serials[job.queue] = serial
                }
                // Times recorded by several machines' clocks may disagree: each is kept at or after the one
                // before it (added ≤ started ≤ finished), as the chart's arithmetic needs.
                let added = min(nanoseconds(job.added), job.started.map(nanoseconds) ?? .max)
                var entry = Entry(
                    id: job.id, name: job.name, queue: job.queue, queueInstance: 1, queueSerial: serial, kind: job.kind,
                    group: job.group, dependencies: job.dependencies, added: added)
                var finished = job.finished.map(nanoseconds).map { max($0, added) }
                if let started = job.started {
                    let start = max(nanoseconds(started), added)
                    finished = finished.map { max($0, start) }
                    let end = finished ?? UInt64.max
                    var ends = slotEnds[serial] ?? []
                    let slot = ends.firstIndex { $0 <= start } ?? ends.count
                    if slot == ends.count { ends.append(end) } else { ends[slot] = end }
                    slotEnds[serial] = ends
                    entry.ready = start
                    entry.started = start
                    entry.slot = slot
                }
                entry.finished = finished
                entry.outcome = job.outcome
                state.index[job.id] = state.entries.count
                state.entries.append(entry)
            }
        }
        return timeline
    }

    /// The jobs recorded so far, in the order they were added.
    public var entries: [Entry] { state.withLock { $0.entries } }

    /// Forgets everything recorded.
    public func reset() {
        let dropped = state.withLock { state in
            defer { state = State() }
            return state
        }
        _ = dropped  // released outside the lock
    }

    /// Records that `kind` happened to `job` now: a durable store's claim, a lost lease, a retry.
    public func mark(_ kind: Mark.Kind, of job: Job) {
        mark(kind, jobID: job.id)
    }

    /// Records that `kind` happened now to the job with id `jobID` (which may be recorded later).
    public func mark(_ kind: Mark.Kind, jobID: UInt64) {
        state.withLock { state in
            let mark = Mark(kind: kind, at: now)
            if let index = state.index[jobID] {
                state.entries[index].marks.append(mark)
            } else {
                state.early[jobID, default: []].append(mark)
            }
        }
    }

    private var now: UInt64 { elapsed }

    // MARK: JobInstrument

    public func jobWasAdded(_ job: Job, to queue: JobQueue) {
        let (name, kind, group) = (job.name, JobMetrics.typeName(job), job.parentGroup?.id)
        let dependencies = (job.dependencies + job.generatedDependencies).map(\.id)
        let queueName = queue.name
        state.withLock { state in
            let at = now
            let key = ObjectIdentifier(queue)
            let instance: Int
            let serial: Int
            if let known = state.queues[key], known.queue === queue {
                (instance, serial) = (known.instance, known.serial)
            } else {
                instance = state.instances[queueName, default: 0] + 1
                state.instances[queueName] = instance
                state.queueCount += 1
                serial = state.queueCount
                state.queues[key] = QueueRef(queue: queue, instance: instance, serial: serial)
            }
            state.index[job.id] = state.entries.count
            state.entries.append(
                Entry(
                    id: job.id, name: name, queue: queueName, queueInstance: instance, queueSerial: serial, kind: kind,
                    group: group,
                    dependencies: dependencies, added: at))
            if let marks = state.early.removeValue(forKey: job.id) {
                state.entries[state.entries.count - 1].marks = marks
            }
        }
    }

    public func jobBecameReady(_ job: Job, in queue: JobQueue) {
        // The instant is read under the lock, so that the order of instants is the order of the
        // records (a slot is taken after it was given back).
        state.withLock { state in
            let at = now
            // (A job cancelled as it was added finishes before the queue says it is ready.)
            guard let index = state.index[job.id], state.entries[index].ready == nil,
                state.entries[index].finished == nil
            else { return }
            state.entries[index].ready = at
        }
    }

    public func jobWillStart(_ job: Job, in queue: JobQueue) {
        // The instant is read under the lock, so that the order of instants is the order of the
        // records (a slot is taken after it was given back).
        state.withLock { state in
            let at = now
            guard let index = state.index[job.id] else { return }
            let key = state.entries[index].queueSerial
            var taken = state.slots[key] ?? []
            let slot = taken.firstIndex(of: false) ?? taken.count
            if slot == taken.count { taken.append(true) } else { taken[slot] = true }
            state.slots[key] = taken
            state.entries[index].started = at
            state.entries[index].slot = slot
        }
    }

    public func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) {
        // The instant is read under the lock, so that the order of instants is the order of the
        // records (a slot is taken after it was given back).
        state.withLock { state in
            let at = now
            guard let index = state.index[job.id] else { return }
            let key = state.entries[index].queueSerial
            state.entries[index].finished = at
            state.entries[index].outcome =
                switch outcome {
                case .succeeded: .succeeded
                case .failed: .failed
                case .cancelled: .cancelled
                }
            if let slot = state.entries[index].slot, var taken = state.slots[key] {
                taken[slot] = false
                state.slots[key] = taken
            }
        }
    }
}
