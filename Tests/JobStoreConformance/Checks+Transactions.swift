public import BatonDurable
public import Foundation

/// A transaction of the application's own, on a connection that is not one of the store's: what the
/// transactional checks submit in. Each store's tests implement it with their database's client.
public protocol ApplicationTransaction: Sendable {
    /// The store's submission inside this transaction (`SQLiteJobStore.submit(_:uniqueKey:in:)`,
    /// `PostgresJobStore.submit(_:uniqueKey:on:)`).
    func submit(_ graph: GraphSpec, uniqueKey: String?) async throws -> SubmittedRun
    func commit() async throws
    func rollback() async throws
}

extension JobStoreConformance {
    /// Opens a new transaction of the application's on the store's database.
    public typealias BeginTransaction = @Sendable () async throws -> any ApplicationTransaction

    /// A check of a store's submissions in the caller's own transaction.
    public struct TransactionCheck: Sendable, CustomStringConvertible {
        public let name: String
        let body: @Sendable (any JobStore, BeginTransaction) async throws -> Void

        public var description: String { name }

        /// Runs the check on `store` (new and empty), with application transactions from `begin`.
        ///
        /// While a transaction is open the check only reads the store (a SQLite store's writes would
        /// wait for the application's write lock).
        public func run(store: any JobStore, begin: @escaping BeginTransaction) async throws {
            try await body(store, begin)
        }
    }

    /// Every transactional check, in a stable order.
    public static let transactionChecks: [TransactionCheck] = [
        TransactionCheck(name: "a graph submitted in a transaction is invisible until it commits, then runs") {
            store, begin in
            let transaction = try await begin()
            // With a category and an edge, so that every table of a submission is written in the transaction.
            let run = try await transaction.submit(
                Build.graph(
                    "tx", Build.job("a", categories: [.named("tx", limit: 1)]), Build.job("b", after: [0])),
                uniqueKey: "tx-1")
            try expectEqual(run.existing, false, "existing")
            try expectEqual(run.jobs.count, 2, "job ids")
            try await expectDurableError(.unknownRun) { _ = try await store.record(of: run.run) }
            try await transaction.commit()
            try expectEqual(try await store.record(of: run.run).name, "tx", "the committed run's name")
            let snapshot = try await store.snapshot(of: run.run)
            try expectEqual(snapshot.jobs[0].categories.map(\.name), ["tx"], "a's categories")
            try expectEqual(snapshot.jobs[1].dependencies.map(\.job), [run.jobs[0]], "b's dependency")
            let first = try await store.claimAll()
            try expectEqual(first.map(\.job), [run.jobs[0]], "claimed after the commit")
            try expectEqual(try await store.succeed(first[0]), .accepted(.succeeded), "finishing a")
            try expectEqual(try await store.claimAll().map(\.job), [run.jobs[1]], "claimed after a")
        },
        TransactionCheck(name: "a rolled-back submission stores nothing and keeps its unique key free") {
            store, begin in
            let transaction = try await begin()
            let run = try await transaction.submit(
                Build.graph("gone", Build.job("a"), Build.job("b", after: [0])), uniqueKey: "tx-2")
            try await transaction.rollback()
            try await expectDurableError(.unknownRun) { _ = try await store.record(of: run.run) }
            try expectEqual(try await store.claimAll().count, 0, "claimable jobs after the rollback")
            let again = try await store.submit(Build.graph("kept", Build.job("a")), uniqueKey: "tx-2")
            try expectEqual(again.existing, false, "existing, for the key of a rolled-back submission")
            try expectEqual(try await store.record(of: again.run).name, "kept", "the run holding the key")
        },
        TransactionCheck(name: "unique keys in a transaction behave as in submit") { store, begin in
            let stored = try await store.submit(Build.graph("first", Build.job("a")), uniqueKey: "k-stored")
            let transaction = try await begin()
            let same = try await transaction.submit(Build.graph("first", Build.job("a")), uniqueKey: "k-stored")
            try expectEqual(same.existing, true, "existing, for a key a committed run holds")
            try expectEqual(same.run, stored.run, "the run holding the key")
            try expectEqual(same.jobs, stored.jobs, "its jobs")
            let new = try await transaction.submit(
                Build.graph("second", Build.job("a"), Build.job("b")), uniqueKey: "k-new")
            let twice = try await transaction.submit(
                Build.graph("second", Build.job("a"), Build.job("b")), uniqueKey: "k-new")
            try expectEqual(new.existing, false, "existing, for a new key")
            try expectEqual(twice.existing, true, "existing, for a key taken earlier in the same transaction")
            try expectEqual(twice.run, new.run, "the run taken earlier in the transaction")
            try expectEqual(twice.jobs, new.jobs, "its jobs")
            try await transaction.commit()
            let after = try await store.submit(
                Build.graph("second", Build.job("a"), Build.job("b")), uniqueKey: "k-new")
            try expectEqual(after.existing, true, "existing, after the commit")
            try expectEqual(after.run, new.run, "the committed run")
            try expectEqual(try await store.claimAll().count, 3, "claimable jobs: one run each")
        },
        TransactionCheck(name: "a bad graph is refused before the transaction is touched") { store, begin in
            let transaction = try await begin()
            try await expectDurableError(.dependencyCycle) {
                _ = try await transaction.submit(
                    Build.graph("cyclic", Build.job("x", after: [1]), Build.job("y", after: [0])), uniqueKey: nil)
            }
            // The transaction is still usable: the refusal sent nothing.
            let run = try await transaction.submit(Build.graph("fine", Build.job("a")), uniqueKey: nil)
            try await transaction.commit()
            try expectEqual(try await store.claimAll().map(\.job), run.jobs, "claimed after the commit")
        },
        TransactionCheck(name: "a commit wakes the store's workers") { store, begin in
            let transaction = try await begin()
            let run = try await transaction.submit(Build.graph("woken", Build.job("a")), uniqueKey: nil)
            let wakeups = store.wakeups()  // registered now, so a wake-up at the commit is kept
            try await transaction.commit()
            // Bounded: a wake-up that never comes fails the check instead of hanging it.
            let woken = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    for await _ in wakeups { return true }
                    return false
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(30))  // a deadline, not a wait for the wake-up
                    return false
                }
                let first = try await group.next()!
                group.cancelAll()
                return first
            }
            try expect(woken, "no wake-up within 30 s of the commit")
            try expectEqual(try await store.claimAll().map(\.job), run.jobs, "claimed after the wake-up")
        },
    ]
}

/// The application's side of a completion transaction: each store's tests implement it with the
/// store's completion (`SQLiteJobStore.complete(_:output:writes:)`, `PostgresJobStore.complete(_:output:writes:)`)
/// and a table of their own.
public protocol ApplicationEffects: Sendable {
    /// Completes the attempt of `lease` with `output`, inserting `row` into the application's table in
    /// the same transaction, then throwing ``EffectsRefused`` when `fail` is set. Returns whether the
    /// store recorded the completion.
    func complete(_ lease: Lease, output: Data, row: String, fail: Bool, additions: RunAddition?) async throws -> Bool
    /// The application table's rows, in insertion order.
    func rows() async throws -> [String]
}

extension ApplicationEffects {
    /// ``complete(_:output:row:fail:additions:)`` adding no jobs.
    public func complete(_ lease: Lease, output: Data, row: String, fail: Bool) async throws -> Bool {
        try await complete(lease, output: output, row: row, fail: fail, additions: nil)
    }
}

/// What ``ApplicationEffects/complete(_:output:row:fail:)`` throws when told to fail.
public struct EffectsRefused: Error, Equatable {
    public init() {}
}

extension JobStoreConformance {
    /// A check of a store's completions in one transaction with the application's writes.
    public struct CompletionCheck: Sendable, CustomStringConvertible {
        public let name: String
        let body: @Sendable (any JobStore, any ApplicationEffects) async throws -> Void

        public var description: String { name }

        /// Runs the check on `store` (new and empty) and its application's `effects`.
        public func run(store: any JobStore, effects: any ApplicationEffects) async throws {
            try await body(store, effects)
        }
    }

    /// Every completion check, in a stable order.
    public static let completionChecks: [CompletionCheck] = [
        CompletionCheck(name: "a completion and the application's writes commit together") { store, effects in
            let run = try await store.submit(
                Build.graph("fx", Build.job("a"), Build.job("b", after: [0], inputFrom: 0)), uniqueKey: nil)
            let claimed = try await store.claimAll()
            try expectEqual(
                try await effects.complete(claimed[0].lease, output: Data("\"out\"".utf8), row: "a", fail: false),
                true, "recorded")
            try expectEqual(try await effects.rows(), ["a"], "the application's rows")
            try expectEqual(try await store.states(run), [.succeeded, .ready], "states after the completion")
            let next = try await store.claimAll()
            try expectEqual(next.map(\.job), [run.jobs[1]], "the dependent, claimable")
            try expectEqual(String(decoding: next[0].input, as: UTF8.self), "\"out\"", "the dependent's input")
        },
        CompletionCheck(name: "a stale attempt's completion writes nothing") { store, effects in
            let run = try await store.submit(Build.graph("fx", Build.job("a"), Build.job("b")), uniqueKey: nil)
            let claimed = try await store.claimAll()
            try expectEqual(claimed.count, 2, "claimed")
            // a: cancelled, and its attempt's cancellation reported. b: given back and claimed again, so
            // its first token is no longer current.
            try await store.cancel(job: claimed[0].job, reason: "stop")
            let cancelled = try await store.finish([
                AttemptReport(lease: claimed[0].lease, outcome: .cancelled(reason: "stop"))
            ])
            try expectEqual(cancelled, [.accepted(.cancelled)], "a's report")
            try await store.release([claimed[1].lease])
            try expectEqual(try await store.claimAll().map(\.job), [claimed[1].job], "b, claimed again")
            for attempt in claimed {
                try expectEqual(
                    try await effects.complete(attempt.lease, output: Data("1".utf8), row: attempt.name, fail: false),
                    false, "the completion of stale attempt \(attempt.name)")
            }
            try expectEqual(try await effects.rows(), [], "the application's rows")
            try expectEqual(try await store.states(run), [.cancelled, .running], "states")
        },
        CompletionCheck(name: "a job asked to cancel adds nothing: its completion makes no writes, it ends cancelled") {
            store, effects in
            let run = try await store.submit(
                Build.graph("fx", Build.job("list"), Build.job("report", kind: "report", afterAll: [0])), uniqueKey: nil
            )
            let claimed = try await store.claimAll()
            try await store.cancel(job: claimed[0].job, reason: "stop listing")
            try expectEqual(
                try await effects.complete(
                    claimed[0].lease, output: Data("1".utf8), row: "list", fail: false,
                    additions: RunAddition(jobs: [Build.job("page 2")])),
                false, "not recorded as a success")
            try expectEqual(try await effects.rows(), [], "the application's rows")
            try expectEqual(try await store.states(run), [.cancelled, .cancelled], "cancelled, and its dependent")
            try expectEqual(try await store.snapshot(of: run.run).jobs.count, 2, "nothing added")
            let attempts = try await store.attempts(of: claimed[0].job)
            try expectEqual(attempts.map(\.outcome), [.cancelled], "the attempt, in the history")
            try expectEqual(attempts.map(\.error), ["stop listing"], "with the reason")
        },
        // A probe (7 December 2026): without added jobs, the writes ran, the completion was rolled back with
        // a `storeFailure` blaming the writes, and the attempt was recorded as failed.
        CompletionCheck(name: "a job asked to cancel that adds nothing: its completion is refused, it ends cancelled") {
            store, effects in
            let run = try await store.submit(
                Build.graph("fx", Build.job("a"), Build.job("b", after: [0])), uniqueKey: nil)
            let claimed = try await store.claimAll()
            try await store.cancel(job: claimed[0].job, reason: "stop")
            try expectEqual(
                try await effects.complete(claimed[0].lease, output: Data("1".utf8), row: "a", fail: false),
                false, "not recorded as a success")
            try expectEqual(try await effects.rows(), [], "the application's rows")
            try expectEqual(try await store.states(run), [.cancelled, .cancelled], "cancelled, and its dependent")
            let attempts = try await store.attempts(of: claimed[0].job)
            try expectEqual(attempts.map(\.outcome), [.cancelled], "the attempt, in the history")
        },
        CompletionCheck(name: "writes that throw roll the completion back with them") { store, effects in
            let run = try await store.submit(Build.graph("fx", Build.job("a")), uniqueKey: nil)
            let claimed = try await store.claimAll()
            do {
                _ = try await effects.complete(claimed[0].lease, output: Data("1".utf8), row: "first", fail: true)
                throw ConformanceFailure(message: "the failing writes' error was not rethrown")
            } catch is EffectsRefused {}
            try expectEqual(try await effects.rows(), [], "the application's rows after the rollback")
            try expectEqual(try await store.states(run), [.running], "the job, still running")
            try expectEqual(
                try await effects.complete(claimed[0].lease, output: Data("2".utf8), row: "second", fail: false),
                true, "recorded the second time")
            try expectEqual(try await effects.rows(), ["second"], "the application's rows")
            try expectEqual(try await store.states(run), [.succeeded], "states")
        },
    ]
}
