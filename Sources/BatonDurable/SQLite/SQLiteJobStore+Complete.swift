import Baton
public import Foundation
public import GRDB

extension SQLiteJobStore {
    /// Records the success of the attempt holding `lease`, with `output`, in one transaction with the
    /// application's `writes`: both commit, or neither does. Returns false, having written nothing, when
    /// the lease is no longer the job's current one (the attempt is stale: another attempt owns the job,
    /// or it was cancelled or finished). Also false, without running `writes`, for a job asked to cancel
    /// (``JobStore/cancel(job:reason:)``) whose worker has not stopped it yet: that attempt is recorded as
    /// cancelled, and the jobs it would add are not (see <doc:GrowingRuns>). What
    /// ``DurableJobContext/complete(returning:writes:)`` calls;
    /// a worker of its own would call it in place of ``finish(_:)`` for that attempt.
    ///
    /// - Throws: `writes`' own errors (the transaction rolled back), ``DurableError`` when SQLite fails.
    public func complete(
        _ lease: Lease, output: Data, additions: RunAddition? = nil,
        writes: @escaping @Sendable (Database) throws -> Void
    ) async throws -> Bool {
        try await complete(lease, additions: additions) { db in
            try writes(db)
            return output
        }
    }

    /// ``complete(_:output:additions:writes:)`` whose `writes` also make the output: the encoded output they
    /// return is recorded as the attempt's, in the same transaction.
    func complete(
        _ lease: Lease, additions: RunAddition?, writes: @escaping @Sendable (Database) throws -> Data
    ) async throws -> Bool {
        let now = clock.now()
        do {
            return try await write(wake: true) { db in
                guard let row = try Self.currentLease(db, lease) else { return false }
                // Asked to cancel: its success is recorded as cancelled (as `finish` does), without the
                // writes and without the jobs it adds; the job sees its completion refused.
                guard try row.value(at: 0) as String? == nil else {
                    _ = try Self.finishAttempt(
                        db, AttemptReport(lease: lease, outcome: .succeeded(output: Data()), additions: additions),
                        now: now)
                    return false
                }
                // The added jobs first: ones the store refuses throw here, before the application's writes,
                // and nothing is written (the job sees the error).
                if let additions, !additions.jobs.isEmpty {
                    do {
                        try Self.addJobs(db, additions, by: lease.job.rawValue, now: now)
                    } catch let error as DurableError {
                        throw DurableError.refusingAddedJobs(error)
                    }
                }
                let output: Data
                // `writes` may not end the store's transaction: a COMMIT there would commit the added jobs
                // and the application's rows without the completion (the attempt would then be retried,
                // and do them twice). The guard turns that COMMIT into an error and a rollback of everything.
                let guarding = CommitGuard(job: lease.job)
                db.add(transactionObserver: guarding, extent: .observerLifetime)
                defer { db.remove(transactionObserver: guarding) }
                do {
                    output = try writes(db)
                } catch {
                    throw ApplicationWritesError(error)
                }
                guard db.isInsideTransaction else { throw CommitGuard.endedError(job: lease.job) }
                guarding.isArmed = false
                let result = try Self.finishAttempt(
                    db, AttemptReport(lease: lease, outcome: .succeeded(output: output)), now: now)
                guard result == .accepted(.succeeded) else {
                    // Only if `writes` changed the job's own row: roll everything back, writes included.
                    throw DurableError(
                        code: .storeFailure,
                        message:
                            "the completion of job \(lease.job.rawValue) was not recorded after its lease was checked (did the writes change the store's baton_ tables?); nothing was written"
                    )
                }
                return true
            }
        } catch let error as ApplicationWritesError {
            throw error.error
        }
    }
}

/// Refuses a commit while `complete(…writes:)` runs the application's writes inside the store's
/// transaction (SQLite's commit hook turns the COMMIT into a rollback, and the error comes out of the
/// statement that tried it). PostgreSQL's store runs `writes` in a savepoint, where a COMMIT fails too.
///
/// Used on the store's writer connection only, while it runs one write: GRDB calls it there.
private final class CommitGuard: TransactionObserver, @unchecked Sendable {
    let job: DurableJobID
    var isArmed = true

    init(job: DurableJobID) { self.job = job }

    static func endedError(job: DurableJobID) -> DurableError {
        DurableError(
            code: .misuse,
            message:
                "the writes of job \(job.rawValue)'s completion ended the store's transaction (COMMIT, ROLLBACK or END): they run inside it, and it commits with the completion. Remove the statement; nothing was written."
        )
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseWillCommit() throws { if isArmed { throw Self.endedError(job: job) } }
    func databaseDidCommit(_ db: Database) {}
    func databaseDidRollback(_ db: Database) {}
}

extension DurableJobContext {
    /// Records this attempt's success, with `output`, in one SQLite transaction with `writes`: the
    /// application's rows change if and only if the job's completion is recorded. Execution stays
    /// at least once, but effects written here happen exactly once: a stale attempt (its lease expired
    /// and another worker took the job over, or the job was cancelled) is refused before `writes` runs,
    /// and a crash before the commit leaves neither.
    ///
    /// ```swift
    /// struct CountVisit: DurableJob {
    ///     static let kind = "visits.count"
    ///     func run(_ page: String, context: DurableJobContext) async throws -> Int {
    ///         let views = try await fetchViews(page)           // the work, outside the transaction
    ///         return try await context.complete(returning: views) { db in
    ///             try db.execute(sql: "UPDATE pages SET views = views + ? WHERE name = ?", arguments: [views, page])
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// The worker's store must be a ``SQLiteJobStore`` and the application's tables must be in its file.
    /// `writes` runs inside the store's write transaction, which every worker of the file waits for:
    /// compute before, and keep `writes` to the writing. Call it once, as the attempt's last step, and
    /// return its result: once it returned, the attempt is recorded as succeeded whatever the job does
    /// after, and the worker reports nothing more. An error thrown by `writes` rolls the transaction
    /// back and is rethrown (the attempt then fails, or the job may try again). `writes` must not end
    /// the transaction (`COMMIT`, `END`, `ROLLBACK`): that is refused with
    /// ``DurableError/Code/misuse`` and everything rolls back.
    ///
    /// - Returns: `output`.
    /// - Throws: ``DurableError/Code/leaseLost`` when the lease had ended (nothing was written; return
    ///   or throw it, the store already ignores this attempt); ``DurableError/Code/misuse`` when the store
    ///   is not a SQLite store, the context was made by hand, or the attempt completed already;
    ///   `writes`' own errors; ``DurableError/Code/storeFailure`` when SQLite fails.
    public func complete<Output: Encodable & Sendable>(
        returning output: Output, writes: @escaping @Sendable (Database) throws -> Void
    ) async throws -> Output {
        try await complete(returning: output, on: SQLiteJobStore.self, storeName: "SQLite") {
            store, lease, data, additions in
            try await store.complete(lease, output: data, additions: additions, writes: writes)
        }
    }

    /// Records this attempt's success in one SQLite transaction with `writes`, which also make its
    /// output: for a job whose result is what its writes did (rows inserted, a counter's new value).
    /// Otherwise the same as ``complete(returning:writes:)``.
    ///
    /// ```swift
    /// struct ImportBatch: DurableJob {
    ///     static let kind = "shop.import-batch"
    ///     func run(_ names: [String], context: DurableJobContext) async throws -> Int {
    ///         let cleaned = names.map { $0.trimmingCharacters(in: .whitespaces) }  // outside the transaction
    ///         return try await context.complete { db in
    ///             for name in cleaned { try db.execute(sql: "INSERT OR IGNORE INTO customers (name) VALUES (?)", arguments: [name]) }
    ///             return db.changesCount  // the output: what the writes did
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// - Returns: what `writes` returned, once the transaction committed.
    /// - Throws: as ``complete(returning:writes:)``; an output that cannot be encoded rolls back like an
    ///   error of `writes`.
    public func complete<Output: Encodable & Sendable>(
        writes: @escaping @Sendable (Database) throws -> Output
    ) async throws -> Output {
        let made = Protected<Output?>(nil)
        try await complete(on: SQLiteJobStore.self, storeName: "SQLite") { store, lease, additions in
            try await store.complete(lease, additions: additions) { db in
                let output = try writes(db)
                let data = try DurableCoding.encode(output)
                made.withLock { $0 = output }
                return data
            }
        }
        guard let output = made.withLock({ $0 }) else {
            preconditionFailure("a committed completion of complete(writes:) made no output")
        }
        return output
    }
}
