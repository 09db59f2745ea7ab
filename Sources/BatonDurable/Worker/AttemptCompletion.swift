import Baton
package import Foundation

/// An attempt's completion in a transaction of its job's own (`DurableJobContext.complete(returning:writes:)`):
/// the worker's store and the attempt's lease, and whether the success was committed there — in which
/// case the worker reports nothing more for the attempt.
///
/// One small machine behind one lock: `open` → `committing` → `committed` or back to `open` (the
/// transaction failed and may be tried again) or `refused` (the lease had ended: the attempt's
/// writes were rolled back, and nothing of it will be recorded). The jobs the attempt adds to its run
/// (`DurableJobContext.add(_:after:)`) are data of the same machine: collected while `open`, and
/// sent with the success that records them.
///
/// ## Thread safety
/// All methods may be called from any thread.
package final class AttemptCompletion: Sendable {
    package enum State: Sendable, Equatable {
        case open, committing, committed, refused

        /// The job's own transaction is under way or committed: the worker neither renews the lease nor
        /// stops the attempt for it (the completion ends the lease, or says it had ended).
        package var isRecording: Bool { self == .committing || self == .committed }
    }

    private struct Machine: Sendable {
        var state = State.open
        /// The jobs added so far, in order; their dependencies index into the whole list.
        var added: [JobSpec] = []
        /// For each added job, the run's existing jobs it waits for (its call's `after`, for its roots).
        var after: [[DurableJobID]] = []
    }

    package let store: any JobStore
    package let lease: Lease
    let jobName: String
    private let machine = Protected(Machine())

    init(store: any JobStore, lease: Lease, jobName: String) {
        self.store = store
        self.lease = lease
        self.jobName = jobName
    }

    package var current: State { machine.withLock { $0.state } }

    /// What the attempt adds to its run, or nil when it adds nothing.
    package var additions: RunAddition? {
        machine.withLock { machine in
            machine.added.isEmpty
                ? nil : RunAddition(jobs: machine.added, afterByJob: machine.after)
        }
    }

    /// Adds `jobs` (dependencies indexing into `jobs`) after those added before, each without a
    /// dependency among them waiting also for `after`; throws once the completion began.
    func add(_ jobs: [JobSpec], after: [DurableJobID]) throws {
        let state = machine.withLock { machine -> State in
            guard machine.state == .open else { return machine.state }
            let offset = machine.added.count
            for var job in jobs {
                job.dependencies = job.dependencies.map { dependency in
                    var moved = dependency
                    moved.index += offset
                    return moved
                }
                job.inputFrom = job.inputFrom.map { $0 + offset }
                // This call's `after` is for this call's jobs that wait for none of its others.
                machine.after.append(job.allDependencies.isEmpty ? after : [])
                machine.added.append(job)
            }
            return .open
        }
        guard state == .open else {
            throw DurableError(
                code: .misuse, jobs: [jobName],
                message:
                    "job '\(jobName)' added jobs after its completion \(state == .refused ? "was refused" : "began"); add them before calling complete(returning:writes:)."
            )
        }
    }

    /// Moves to `committing`; throws when a completion already began, succeeded or was refused.
    package func begin() throws {
        let previous = machine.withLock { machine -> State in
            defer { if machine.state == .open { machine.state = .committing } }
            return machine.state
        }
        switch previous {
        case .open: return
        case .committing, .committed:
            throw DurableError(
                code: .misuse, jobs: [jobName],
                message:
                    "job '\(jobName)' called complete(returning:writes:) twice: an attempt completes once. Make one call with all of its writes, and return its result."
            )
        case .refused:
            throw Self.lost(jobName)
        }
    }

    /// Ends the transaction begun by ``begin()``: `true` committed, `false` refused (the lease had
    /// ended), `nil` failed (rolled back; the attempt may try again or throw).
    package func end(_ committed: Bool?) {
        machine.withLock { machine in
            switch committed {
            case true?: machine.state = .committed
            case false?: machine.state = .refused
            case nil: machine.state = .open
            }
        }
    }

    /// The error of a completion the store refused.
    package static func lost(_ name: String) -> DurableError {
        DurableError(
            code: .leaseLost, jobs: [name],
            message:
                "the lease of job '\(name)' had ended before its completion was committed (it expired, or the job was cancelled or finished by another attempt); the transaction was rolled back, writes included"
        )
    }

    /// The error of a context that belongs to no attempt of a worker.
    static func noAttempt(_ name: String) -> DurableError {
        DurableError(
            code: .misuse, jobs: [name],
            message:
                "complete(returning:writes:) needs the context of an attempt run by a DurableWorker; this one was made by hand (DurableJobContext.init), so there is no lease to complete"
        )
    }

    /// Runs `body` (the store's transaction) between ``begin()`` and ``end(_:)`` and returns `output`.
    package func complete<Output>(
        _ output: Output, _ body: () async throws -> Bool
    ) async throws -> Output {
        try begin()
        let committed: Bool
        do {
            committed = try await body()
        } catch {
            end(nil)
            throw error
        }
        end(committed)
        guard committed else { throw Self.lost(jobName) }
        return output
    }
}

/// What the application's writes threw inside a store's completion transaction, carried through the
/// store's own error handling so that the job sees its own error.
package struct ApplicationWritesError: Error {
    package let error: any Error
    package init(_ error: any Error) { self.error = error }
}

extension DurableJobContext {
    /// The body of each store's `complete(returning:writes:)`: this attempt's completion, refused with
    /// ``DurableError/Code/misuse`` when the worker's store is not a `Store` (`storeName` says which the
    /// job asked for), then `record` — the store's transaction, given the store, the lease and the
    /// encoded output — between the completion's `begin()` and `end(_:)`.
    package func complete<Store: JobStore, Output: Encodable & Sendable>(
        returning output: Output, on store: Store.Type, storeName: String,
        _ record: (Store, Lease, Data, RunAddition?) async throws -> Bool
    ) async throws -> Output {
        let data = try DurableCoding.encode(output)
        try await complete(on: store, storeName: storeName) { store, lease, additions in
            try await record(store, lease, data, additions)
        }
        return output
    }

    /// ``complete(returning:on:storeName:_:)`` for a transaction that makes the output itself.
    package func complete<Store: JobStore>(
        on _: Store.Type, storeName: String, _ record: (Store, Lease, RunAddition?) async throws -> Bool
    ) async throws {
        let completion = try attemptCompletion()
        guard let store = completion.store as? Store else {
            throw DurableError(
                code: .misuse, jobs: [name],
                message:
                    "job '\(name)' asked for a \(storeName) completion transaction, but its worker's store is \(type(of: completion.store)). Use the form of complete(returning:writes:) for that store."
            )
        }
        try await completion.complete(()) {
            try await record(store, completion.lease, completion.additions)
        }
    }
}

extension DurableJobContext {
    /// Adds the jobs of `graph` to this job's run, stored with this attempt's success in the same
    /// transaction: they exist once the job has succeeded, and a failed, lost or retried attempt adds
    /// nothing, so an attempt that ran twice never adds them twice.
    ///
    /// ```swift
    /// struct ListPage: DurableJob {
    ///     static let kind = "quakes.list-page"
    ///     func run(_ page: Int, context: DurableJobContext) async throws -> Int {
    ///         let listing = try await fetchPage(page)          // the work
    ///         var more = JobGraph(name: "page \(page)")
    ///         more.add(ImportPage.self, input: listing.events, name: "import \(page)")
    ///         if listing.hasNext { more.add(ListPage.self, input: page + 1, name: "page \(page + 1)") }
    ///         try context.add(more)
    ///         return listing.events.count
    ///     }
    /// }
    /// ```
    ///
    /// Edges among the added jobs are those of `graph`; each added job without one also waits for the
    /// jobs of the run named in `after`. A dependent that waits for this job with `afterAll:` waits for
    /// the added jobs too, and for whatever they add. An added name that the run already has is stored
    /// as `name #2`, `name #3`…; `explain` shows each added job under the job that added it.
    /// Several calls add to what the earlier ones added; each call's `after` is for its own jobs. Nothing is stored when the attempt fails, or
    /// when the added jobs cannot be (a job of another run in `after`, or one that waits for this job):
    /// the job then fails, saying why.
    ///
    /// - Throws: ``DurableError/Code/invalidGraph`` or ``DurableError/Code/dependencyCycle`` for a graph
    ///   that could not be submitted either; ``DurableError/Code/misuse`` after
    ///   `complete(returning:writes:)` began, or for a context made by hand.
    public func add(_ graph: JobGraph, after existing: [DurableJobID] = []) throws {
        let spec = try graph.spec()
        try RunAddition(jobs: spec.jobs).validate()
        guard let completion else {
            throw DurableError(
                code: .misuse, jobs: [name],
                message:
                    "add(_:after:) needs the context of an attempt run by a DurableWorker; this one was made by hand (DurableJobContext.init), so there is no run to add to"
            )
        }
        try completion.add(spec.jobs, after: existing)
    }
}
