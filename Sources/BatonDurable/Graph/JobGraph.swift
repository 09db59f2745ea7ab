public import Baton
public import Foundation
public import Tracing

/// A job of a ``JobGraph``, for use as a dependency. ``JobGraph/Handle`` is the typed one.
public protocol DurableHandle: Sendable {
    /// The job's position in its graph.
    var index: Int { get }
}

/// A handle that knows its job's name, so that a graph can tell a handle of another graph.
protocol NamedDurableHandle: DurableHandle {
    var name: String { get }
}

/// A graph of durable jobs, built as a value and submitted in one transaction.
///
/// ```swift
/// var graph = JobGraph(name: "refresh")
/// let fetch = graph.add(FetchFeed.self, input: url, retry: .exponential(maxAttempts: 5))
/// let parse = graph.add(ParseFeed.self, inputFrom: fetch)        // typed: FeedFile → …
/// graph.add(ImportFeed.self, inputFrom: parse, categories: [.named("import", limit: 1)])
/// let run = try await store.submit(graph, uniqueKey: "refresh-2.5_day")
/// ```
///
/// `inputFrom:` makes the job depend on another and take that job's output as its input; the types
/// must match at compile time. `after:` adds ordering without passing data, and `regardless:` adds a
/// dependency that the job waits for but runs after even when it fails or is cancelled. `afterAll:`
/// waits for a job and for every job it adds to the run while it runs (``DurableJobContext/add(_:after:)``),
/// transitively: the durable form of a group that grows.
///
/// ## Thread safety
/// A value type; copies are independent.
public struct JobGraph: Sendable {
    /// A job added to a graph, typed by its output.
    public struct Handle<Output: Codable & Sendable>: DurableHandle, NamedDurableHandle, Hashable {
        public let index: Int
        public let name: String
    }

    public let name: String
    private var jobs: [JobSpec] = []
    private var encodingErrors: [String] = []
    /// The jobs' names, and the next number to try for a default name per kind: adding N unnamed jobs
    /// of one kind took time quadratic in N (each looked through every name taken before it).
    private var names: Set<String> = []
    private var nextNumber: [String: Int] = [:]

    public init(name: String) { self.name = name }

    /// The number of jobs.
    public var count: Int { jobs.count }

    /// Adds a job of type `J` with a literal input.
    @discardableResult
    public mutating func add<J: DurableJob>(
        _ type: J.Type, input: J.Input, name: String? = nil, after: [any DurableHandle] = [],
        regardless: [any DurableHandle] = [], afterAll: [any DurableHandle] = [], priority: JobPriority = .normal,
        retry: RetryPolicy = .standard, timeout: Duration? = nil, categories: [DurableCategory] = [],
        notBefore: Date? = nil
    ) -> Handle<J.Output> {
        let name = name ?? defaultName(J.kind)
        var data: Data?
        do {
            data = try DurableCoding.encode(input)
        } catch {
            encodingErrors.append("the input of job '\(name)' (kind '\(J.kind)') does not encode as JSON: \(error)")
            data = Data()
        }
        return append(
            JobSpec(
                name: name, kind: J.kind, input: data, dependencies: edges(after, regardless, afterAll),
                priority: priority.rawValue, retry: retry, timeout: timeout, categories: categories,
                notBefore: notBefore))
    }

    /// Adds a job of type `J` whose input is the output of `source`, which it depends on.
    @discardableResult
    public mutating func add<J: DurableJob>(
        _ type: J.Type, inputFrom source: Handle<J.Input>, name: String? = nil, after: [any DurableHandle] = [],
        regardless: [any DurableHandle] = [], afterAll: [any DurableHandle] = [], priority: JobPriority = .normal,
        retry: RetryPolicy = .standard, timeout: Duration? = nil, categories: [DurableCategory] = [],
        notBefore: Date? = nil
    ) -> Handle<J.Output> {
        checkOwn(source)
        return append(
            JobSpec(
                name: name ?? defaultName(J.kind), kind: J.kind, inputFrom: source.index,
                dependencies: edges(after, regardless, afterAll), priority: priority.rawValue, retry: retry,
                timeout: timeout,
                categories: categories, notBefore: notBefore))
    }

    /// The stored form of the graph.
    /// - Throws: ``DurableError`` (``DurableError/Code/invalidGraph``) when an input could not be encoded.
    public func spec() throws(DurableError) -> GraphSpec {
        if let first = encodingErrors.first {
            throw DurableError(code: .invalidGraph, message: first + ". Nothing was submitted.")
        }
        return GraphSpec(name: name, jobs: jobs)
    }

    private mutating func append<Output>(_ job: JobSpec) -> Handle<Output> {
        jobs.append(job)
        names.insert(job.name)
        return Handle(index: jobs.count - 1, name: job.name)
    }

    private mutating func edges(
        _ after: [any DurableHandle], _ regardless: [any DurableHandle], _ afterAll: [any DurableHandle]
    )
        -> [JobSpec.Dependency]
    {
        for handle in after + regardless + afterAll { checkOwn(handle) }
        return after.map { JobSpec.Dependency(index: $0.index) }
            + regardless.map { JobSpec.Dependency(index: $0.index, runRegardless: true) }
            + afterAll.map { JobSpec.Dependency(index: $0.index, includingAdded: true) }
    }

    /// Records an error (thrown by ``spec()``) when `handle` is not of this graph: a handle of another
    /// graph would otherwise make the job depend on whichever job of this one has its index.
    private mutating func checkOwn(_ handle: any DurableHandle) {
        let index = handle.index
        if !jobs.indices.contains(index) {
            encodingErrors.append(
                "job \(jobs.count) of graph '\(name)' depends on a handle (index \(index)) that is not of this graph (it has \(jobs.count) jobs so far); use the handles this graph's add(_:) returned"
            )
        } else if let named = handle as? any NamedDurableHandle, jobs[index].name != named.name {
            encodingErrors.append(
                "job \(jobs.count) of graph '\(name)' depends on the handle of job '\(named.name)', which is not of this graph (its job \(index) is '\(jobs[index].name)'); use the handles this graph's add(_:) returned"
            )
        }
    }

    private mutating func defaultName(_ kind: String) -> String {
        if !names.contains(kind) { return kind }
        var number = nextNumber[kind] ?? 2
        while names.contains("\(kind) #\(number)") { number += 1 }
        nextNumber[kind] = number + 1
        return "\(kind) #\(number)"
    }
}

/// A submitted graph: its run and the store's identity of each job.
public struct DurableRun: Hashable, Codable, Sendable, CustomStringConvertible {
    public let id: DurableRunID
    public let jobs: [DurableJobID]
    /// `true` when the unique key matched an earlier run, which this is.
    public let existing: Bool

    public init(_ submitted: SubmittedRun) {
        id = submitted.run
        jobs = submitted.jobs
        existing = submitted.existing
    }

    /// The store's identity of a job of the graph. A handle of another graph (an index beyond this
    /// run's jobs) stops the program with a message saying so.
    public subscript(handle: some DurableHandle) -> DurableJobID {
        precondition(
            jobs.indices.contains(handle.index),
            "DurableRun \(id): the handle of job index \(handle.index) is not of this run's graph (it has \(jobs.count) jobs); use the handles of the graph this run was submitted from"
        )
        return jobs[handle.index]
    }

    public var description: String { id.description }
}

extension JobStore {
    /// Submits a typed graph in one transaction. With a `uniqueKey` that an earlier run has, returns that run.
    ///
    /// The submitter's `ServiceContext.current` is stored with the run (injected by `instrument`, the
    /// bootstrapped one by default): the span of each attempt of its jobs, on any worker, is its child.
    public func submit(
        _ graph: JobGraph, uniqueKey: String? = nil, instrument: (any Instrument)? = nil
    ) async throws -> DurableRun {
        var spec = try graph.spec()
        spec.traceCarrier = spec.carrierToStore(instrument: instrument)
        let run = DurableRun(try await submit(spec, uniqueKey: uniqueKey))
        guard run.existing else { return run }
        var stored: [(String, String)?] = []
        if run.jobs.count == spec.jobs.count {
            let jobs = Dictionary(
                try await snapshot(of: run.id).jobs.map { ($0.id, ($0.name, $0.kind)) },
                uniquingKeysWith: { first, _ in first })
            stored = run.jobs.map { jobs[$0] }
        }
        try spec.checkShape(of: run, uniqueKey: uniqueKey, stored: stored)
        return run
    }

    /// Per job of the run: state, attempts, last error, and what it waits for.
    public func explain(_ run: DurableRun) async throws -> RunExplanation { try await explain(run: run.id) }

    /// Cancels every unfinished job of the run.
    public func cancel(_ run: DurableRun, reason: String = "cancelled") async throws {
        try await cancel(run: run.id, reason: reason)
    }

    /// The output of a job of the run, decoded, or `nil` while it has not succeeded.
    /// - Throws: ``DurableError`` (``DurableError/Code/decoding``) naming the job when the stored output no
    ///   longer decodes as `Output`.
    public func output<Output>(of handle: JobGraph.Handle<Output>, in run: DurableRun) async throws -> Output? {
        guard run.jobs.indices.contains(handle.index) else {
            throw DurableError(
                code: .unknownJob,
                message:
                    "\(run.id) has \(run.jobs.count) jobs; this handle is of job \(handle.index + 1) of another graph. Use the handles of the graph submitted as this run."
            )
        }
        let record = try await record(of: run[handle])
        guard record.state == .succeeded, let data = record.output else { return nil }
        return try DurableCoding.decode(Output.self, from: data, what: "output", job: record.name, kind: record.kind)
    }
}

extension GraphSpec {
    /// Throws ``DurableError/Code/uniqueKeyConflict`` when `run`, the run that already holds `uniqueKey`,
    /// has another shape than this graph: its handles would not name that run's jobs. `stored` reads the
    /// name and kind of each of the run's jobs, in order (nil for one it cannot find); it is not read
    /// when the counts of jobs differ.
    package func checkShape(of run: DurableRun, uniqueKey: String?, stored: [(String, String)?]) throws {
        if run.jobs.count != jobs.count {
            throw DurableError(
                code: .uniqueKeyConflict,
                message:
                    "the unique key '\(uniqueKey ?? "")' is taken by \(run.id), a run of \(run.jobs.count) jobs; graph '\(name)' has \(jobs.count), so its handles would not name that run's jobs. Use a key of its own for each shape of graph, or wait until that run is pruned."
            )
        }
        // As many jobs is not yet the same shape: each handle must name a job of that name and kind.
        for (index, (job, found)) in zip(jobs, stored).enumerated() {
            guard let (storedName, kind) = found, storedName != job.name || kind != job.kind else { continue }
            throw DurableError(
                code: .uniqueKeyConflict,
                message:
                    "the unique key '\(uniqueKey ?? "")' is taken by \(run.id), whose job \(index) is '\(storedName)' (kind '\(kind)'); graph '\(name)' has '\(job.name)' (kind '\(job.kind)') there, so its handles would not name that run's jobs. Use a key of its own for each shape of graph, or wait until that run is pruned."
            )
        }
    }
}
