public import Foundation

/// A counted exclusivity category shared by every worker of a store: at most `limit` jobs that name it
/// run at once, across all processes and machines.
///
/// A job holds its categories from its claim until its completion, its release, or the end of its
/// lease, so a crashed holder's place is freed when its lease expires. Jobs that name the same
/// category should give it the same limit; when they don't, each job is admitted by its own limit.
public struct DurableCategory: Hashable, Codable, Sendable, CustomStringConvertible {
    public var name: String
    public var limit: Int

    /// A limit below 1 is refused when a graph naming it is submitted (it was raised to 1 in silence).
    public init(name: String, limit: Int = 1) {
        self.name = name
        self.limit = limit
    }

    /// A category `name` of which at most `limit` holders run at once (1: mutually exclusive).
    public static func named(_ name: String, limit: Int = 1) -> DurableCategory {
        DurableCategory(name: name, limit: limit)
    }

    public var description: String { limit == 1 ? "'\(name)'" : "'\(name)' (limit \(limit))" }
}

/// One job of a ``GraphSpec``: the stored, untyped form of what ``JobGraph/add(_:input:name:after:regardless:afterAll:priority:retry:timeout:categories:notBefore:)`` records.
public struct JobSpec: Hashable, Codable, Sendable {
    /// A dependency edge to another job of the same graph, by its index in ``GraphSpec/jobs``.
    public struct Dependency: Hashable, Codable, Sendable {
        public var index: Int
        /// Run even when that dependency fails or is cancelled (it must still finish first).
        public var runRegardless: Bool
        /// Wait also for every job that the dependency adds to the run when it succeeds
        /// (``DurableJobContext/add(_:after:)``), and for those that they add, transitively: the durable
        /// form of a group that grows while it runs.
        public var includingAdded: Bool

        public init(index: Int, runRegardless: Bool = false, includingAdded: Bool = false) {
            self.index = index
            self.runRegardless = runRegardless
            self.includingAdded = includingAdded
        }

        private enum CodingKeys: String, CodingKey { case index, runRegardless, includingAdded }

        /// Reads graphs encoded before `includingAdded` existed as not including added jobs.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            index = try container.decode(Int.self, forKey: .index)
            runRegardless = try container.decode(Bool.self, forKey: .runRegardless)
            includingAdded = try container.decodeIfPresent(Bool.self, forKey: .includingAdded) ?? false
        }
    }

    /// A name unique within the graph, used by `explain` and in errors.
    public var name: String
    /// The kind a worker registers code for (``DurableJob/kind``).
    public var kind: String
    /// The encoded input, or `nil` when the input is the output of ``inputFrom``.
    public var input: Data?
    /// The index of the job whose output is this job's input (it is also a dependency).
    public var inputFrom: Int?
    /// The jobs that must finish first.
    public var dependencies: [Dependency]
    /// Higher runs first among ready jobs (`JobPriority` raw values by default).
    public var priority: Int
    public var retry: RetryPolicy
    /// The time limit of one attempt, enforced by the worker.
    public var timeout: Duration?
    public var categories: [DurableCategory]
    /// The earliest time of the first attempt, or `nil` for "as soon as ready".
    public var notBefore: Date?

    public init(
        name: String, kind: String, input: Data? = nil, inputFrom: Int? = nil, dependencies: [Dependency] = [],
        priority: Int = 2, retry: RetryPolicy = .standard, timeout: Duration? = nil,
        categories: [DurableCategory] = [], notBefore: Date? = nil
    ) {
        self.name = name
        self.kind = kind
        self.input = input
        self.inputFrom = inputFrom
        self.dependencies = dependencies
        self.priority = priority
        self.retry = retry
        self.timeout = timeout
        self.categories = categories
        self.notBefore = notBefore
    }

    /// The dependencies, with ``inputFrom`` included once.
    public var allDependencies: [Dependency] {
        var result = dependencies
        if let inputFrom, !result.contains(where: { $0.index == inputFrom }) {
            result.append(Dependency(index: inputFrom))
        }
        return result
    }

    /// One edge per dependency as stores keep them: the first listing of each index, waiting also for
    /// its added jobs when any listing of it asks to.
    public var storedDependencies: [Dependency] {
        var order: [Int] = []
        var edges: [Int: Dependency] = [:]
        for dependency in allDependencies {
            if var known = edges[dependency.index] {
                known.includingAdded = known.includingAdded || dependency.includingAdded
                edges[dependency.index] = known
            } else {
                order.append(dependency.index)
                edges[dependency.index] = dependency
            }
        }
        return order.compactMap { edges[$0] }
    }
}

/// A graph in the form a ``JobStore`` stores: jobs and their edges. ``JobGraph`` builds one with types.
public struct GraphSpec: Hashable, Codable, Sendable {
    public var name: String
    public var jobs: [JobSpec]
    /// The submitter's trace context, injected by a swift-distributed-tracing `Instrument`: the store
    /// keeps it with the run and the worker that runs a job makes the attempt's span a child of it.
    /// Empty (the default): the store injects `ServiceContext.current` when it is submitted (see
    /// ``carrierToStore(instrument:)``).
    public var traceCarrier: [String: String]

    public init(name: String, jobs: [JobSpec] = [], traceCarrier: [String: String] = [:]) {
        self.name = name
        self.jobs = jobs
        self.traceCarrier = traceCarrier
    }

    private enum CodingKeys: String, CodingKey { case name, jobs, traceCarrier }

    /// Decodes a graph; one encoded before ``traceCarrier`` existed has none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        jobs = try container.decode([JobSpec].self, forKey: .jobs)
        traceCarrier = try container.decodeIfPresent([String: String].self, forKey: .traceCarrier) ?? [:]
    }
}

/// What ``JobStore/submit(_:uniqueKey:)`` returns.
public struct SubmittedRun: Hashable, Codable, Sendable {
    public var run: DurableRunID
    /// The store's identity of each job, in the order of ``GraphSpec/jobs``: the jobs the graph was
    /// submitted with, not those its jobs added to the run since (an existing run returned for a unique
    /// key may have grown; see <doc:GrowingRuns>).
    public var jobs: [DurableJobID]
    /// `true` when the unique key matched an earlier run, which is returned instead of a new one.
    public var existing: Bool

    public init(run: DurableRunID, jobs: [DurableJobID], existing: Bool) {
        self.run = run
        self.jobs = jobs
        self.existing = existing
    }
}
