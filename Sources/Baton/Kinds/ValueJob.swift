/// A job whose async body produces a typed value, which dependents can take as their input.
///
/// ```swift
/// let download = ValueJob<Data>(name: "download") { _ in try await fetch(url) }
/// let parse = ValueJob<Feed>(name: "parse", input: download) { data, _ in try FeedParser().parse(data) }
/// let store = ValueJob<Int>(name: "import", input: parse) { feed, _ in try db.importFeed(feed) }
/// queue.add([download, parse, store])
/// let imported = try await store.value
/// ```
///
/// Result injection is checked by the compiler: `parse`'s body receives a `Data` because `download`
/// is a `ValueJob<Data>`. The consumer depends on its input automatically. If the input failed or was
/// cancelled, the consumer's body does not run and it fails with ``InputUnavailable``, which names
/// the input and says what happened to it.
///
/// The value is kept after the job finished (the body closure is dropped).
public final class ValueJob<Output: Sendable>: AsyncJob, @unchecked Sendable {
    // @unchecked Sendable: `result` and `body` are guarded by the job's lock.
    @exclusivity(unchecked) private var result: Output?
    @exclusivity(unchecked) private var body: Body

    /// The closure, in a value of its own (see `AsyncJob.Body`).
    private struct Body {
        var run: (@Sendable (ValueJob<Output>) async throws -> Output)?
    }

    /// Creates a job that produces the value `body` returns.
    public init(
        name: String? = nil, priority: JobPriority = .normal,
        _ body: @escaping @Sendable (ValueJob<Output>) async throws -> Output
    ) {
        self.body = Body(run: body)
        super.init(name: name, priority: priority)
    }

    /// Creates a job that turns `input`'s value into its own; it depends on `input`.
    public convenience init<Input>(
        name: String? = nil, priority: JobPriority = .normal, input: ValueJob<Input>,
        _ body: @escaping @Sendable (Input, ValueJob<Output>) async throws -> Output
    ) {
        // The dependency keeps `input` alive until this job finished; the closure must not (a chain of
        // never-run jobs is released one by one only if nothing but the dependency lists holds them).
        self.init(name: name, priority: priority) { [unowned input] job in
            try await body(try input.outputForConsumer(job.name), job)
        }
        addDependency(input)
    }

    public override func perform() async throws {
        guard let body = mutex.withLock({ self.body }).run else { return }
        let value = try await body(self)
        mutex.withLock { result = value }
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        let body = mutex.withLock {
            defer { self.body = Body() }
            return self.body
        }
        _ = body  // dropped outside the lock
        return super.didComplete(outcome: outcome, executed: executed, extras: extras)
    }

    /// The value, once the job succeeded; `nil` before, or if it failed or was cancelled.
    public var output: Output? {
        withCore { core in core.lifecycle.outcome?.didSucceed == true ? result : nil }
    }

    /// Waits for the job and returns its value, or throws its error or cancellation reason.
    ///
    /// Cancelling the awaiting task cancels the job (this call waits for it, not just observes it).
    public var value: Output {
        get async throws {
            let outcome = await outcomeCancellingWithTask()
            try outcome.get()
            guard let value = output else { throw CancellationError() }
            return value
        }
    }

    /// The value for a consumer whose body is about to run, or a clear error.
    func outputForConsumer(_ consumer: String) throws -> Output {
        let (outcome, value) = withCore { core in (core.lifecycle.outcome, result) }
        if case .succeeded? = outcome, let value { return value }
        throw InputUnavailable(inputName: name, consumerName: consumer, inputOutcome: outcome)
    }
}

/// A ``ValueJob`` could not run because its input has no value.
public struct InputUnavailable: Error, Sendable, CustomStringConvertible {
    /// The producing job's name.
    public let inputName: String
    /// The consuming job's name.
    public let consumerName: String
    /// How the input ended: failed or cancelled; `nil` if it had not finished.
    public let inputOutcome: JobOutcome?

    /// The input's error or cancellation reason.
    public var underlying: (any Error)? { inputOutcome?.error }

    public var description: String {
        let why: String
        switch inputOutcome {
        case .failed(let error)?: why = "it failed: \(error)"
        case .cancelled(let reason)?: why = "it was cancelled (\(reason))"
        case .succeeded?: why = "it succeeded without a value"
        case nil: why = "it has not finished"
        }
        return "job '\(consumerName)' has no input: its input '\(inputName)' produced no value because \(why)"
    }
}

extension JobQueue {
    /// Runs `body` as a job of this queue and returns its value.
    ///
    /// Cancelling the awaiting task cancels the job; the body sees it as `Task` cancellation.
    public func run<Value: Sendable>(
        name: String? = nil, priority: JobPriority = .normal, _ body: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        let job = ValueJob<Value>(name: name, priority: priority) { _ in try await body() }
        add(job)
        return try await job.value
    }
}
