public import BatonDurable
public import Foundation
import Logging
public import PostgresNIO

extension PostgresJobStore {
    /// Records the success of the attempt holding `lease`, with `output`, in one transaction with the
    /// application's `writes` on the same connection: both commit, or neither does. Returns false,
    /// having run nothing of `writes`, when the lease is no longer the job's current one (the attempt
    /// is stale: another attempt owns the job, or it was cancelled or finished). Also false, without
    /// running `writes`, for a job asked to cancel whose worker has not stopped it yet: that attempt is
    /// recorded as cancelled, and the jobs it would add are not (BatonDurable's guide *Growing a run*). What `DurableJobContext.complete(returning:writes:)` calls
    /// for this store.
    ///
    /// `writes` runs with PostgreSQL's default search path (`"$user", public`, whatever a role or database
    /// sets): name tables of other schemas in full. It must not end the transaction (`COMMIT`, `ROLLBACK`);
    /// it runs in a savepoint, whose release then fails. It counts against
    /// ``PostgresStoreConfiguration/operationTimeout`` like any call; a try abandoned after that timeout
    /// may still commit (writes and completion together), so a `storeFailure` does not always mean
    /// that nothing was written. Retry-safe: when the reply to `COMMIT` is lost and the store tries
    /// again, the completion that committed is recognised (by its lease token) and `writes` is not run
    /// a second time.
    ///
    /// - Throws: `writes`' own errors (the transaction rolled back), `DurableError` when
    ///   PostgreSQL fails.
    public func complete(
        _ lease: Lease, output: Data, additions: RunAddition? = nil,
        writes: @escaping @Sendable (PostgresConnection) async throws -> Void
    ) async throws -> Bool {
        let report = AttemptReport(lease: lease, outcome: .succeeded(output: output))
        let statement = finishSucceededStatement([report])
        let adds = !(additions?.jobs.isEmpty ?? true)
        let (id, token) = (lease.job.rawValue, lease.token)
        let storePath = "\"\(configuration.schema)\""
        let logger = logger
        do {
            return try await transaction("complete") { connection in
                let rows = try await connection.liveQuery(
                    """
                    SELECT (state = 'running' AND lease_token = \(token)) IS TRUE,
                        (finished_by = \(token) AND finished_report = 'succeeded' AND finished_result = 'succeeded')
                            IS TRUE, cancel_request
                    FROM jobs WHERE id = \(id) FOR UPDATE
                    """, logger: logger
                ).collect()
                guard let row = rows.first else { return false }
                let (current, recorded, cancelRequest) = try row.decode((Bool, Bool, String?).self)
                // This call's own earlier try, whose reply was lost after it committed (writes included).
                if recorded { return true }
                guard current else { return false }
                // Asked to cancel: its success is recorded as cancelled (as `finish` does), without the
                // writes and without the jobs it adds; the job sees its completion refused.
                guard cancelRequest == nil else {
                    let now = try await self.serverTime(on: connection)
                    _ = try await Self.finishAttempt(
                        connection, AttemptReport(lease: lease, outcome: report.outcome, additions: additions),
                        now: now, logger: logger)
                    // Its categories are free and its dependents cancelled: tell the workers.
                    try await connection.liveQuery(
                        PostgresQuery(unsafeSQL: "SELECT \(self.notifySQL())"), logger: logger)
                    return false
                }
                // The added jobs first: ones the store refuses throw here, before the application's writes,
                // and nothing is written (the job sees the error).
                if adds, let additions {
                    let now = try await self.serverTime(on: connection)
                    do {
                        try await Self.addJobs(connection, additions, by: id, now: now, logger: logger)
                    } catch let error as DurableError {
                        throw DurableError.refusingAddedJobs(error)
                    }
                }
                try await connection.liveQuery(
                    "SELECT set_config('search_path', '\"$user\", public', true)", logger: logger)
                // A savepoint around the writes: one that ends the transaction (`COMMIT`, `ROLLBACK`) makes
                // the release fail, loudly, rather than leave the completion outside it.
                try await connection.liveQuery("SAVEPOINT baton_writes", logger: logger)
                do {
                    try await writes(connection)
                } catch {
                    throw ApplicationWritesError(error)
                }
                try await connection.liveQuery("RELEASE SAVEPOINT baton_writes", logger: logger)
                try await connection.liveQuery("SELECT set_config('search_path', \(storePath), true)", logger: logger)
                if adds {
                    // Statement by statement, as a completion that adds jobs always is (they are in already).
                    let now = try await self.serverTime(on: connection)
                    let result = try await Self.finishAttempt(connection, report, now: now, logger: logger)
                    guard result != .rejected else {
                        throw DurableError(
                            code: .storeFailure,
                            message: "PostgreSQL did not record the completion of job \(id) after its lease was checked"
                        )
                    }
                    try await connection.liveQuery(
                        PostgresQuery(unsafeSQL: "SELECT \(self.notifySQL())"), logger: logger)
                    return true
                }
                let accepted = try Self.acceptedLeases(try await connection.rows(of: statement, logger: logger))
                guard accepted.contains(lease) else {
                    // Never: the row is locked and its token was current. Rolled back, writes included.
                    throw DurableError(
                        code: .storeFailure,
                        message: "PostgreSQL did not record the completion of job \(id) after its lease was checked")
                }
                return true
            }
        } catch let error as ApplicationWritesError {
            throw error.error
        }
    }
}

extension DurableJobContext {
    /// Records this attempt's success, with `output`, in one PostgreSQL transaction with `writes`: the
    /// application's rows change if and only if the job's completion is recorded. Execution stays at
    /// least once, but effects written here happen exactly once: a stale attempt (its lease expired
    /// and another worker took the job over, or the job was cancelled) is refused before `writes` runs,
    /// and a crash or a lost connection before the commit leaves neither.
    ///
    /// ```swift
    /// struct CountVisit: DurableJob {
    ///     static let kind = "visits.count"
    ///     func run(_ page: String, context: DurableJobContext) async throws -> Int {
    ///         let views = try await fetchViews(page)           // the work, outside the transaction
    ///         return try await context.complete(returning: views) { (connection: PostgresConnection) in
    ///             try await connection.query(
    ///                 "UPDATE pages SET views = views + \(views) WHERE name = \(page)", logger: context.logger)
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// The worker's store must be a ``PostgresJobStore`` and the application's tables in its database;
    /// `writes` runs on one of the store's connections with PostgreSQL's default search path. The job's
    /// row stays locked while `writes` runs: compute before, and keep `writes` to the writing. Call it
    /// once, as the attempt's last step, and return its result: once it returned, the attempt is
    /// recorded as succeeded whatever the job does after. An error thrown by `writes` rolls the
    /// transaction back and is rethrown.
    ///
    /// - Returns: `output`.
    /// - Throws: `DurableError.leaseLost` when the lease had ended (nothing was written);
    ///   `DurableError.misuse` when the store is not a PostgreSQL store, the context was
    ///   made by hand, or the attempt completed already; `writes`' own errors;
    ///   `DurableError.storeFailure` when PostgreSQL fails.
    public func complete<Output: Encodable & Sendable>(
        returning output: Output, writes: @escaping @Sendable (PostgresConnection) async throws -> Void
    ) async throws -> Output {
        try await complete(returning: output, on: PostgresJobStore.self, storeName: "PostgreSQL") {
            store, lease, data, additions in
            try await store.complete(lease, output: data, additions: additions, writes: writes)
        }
    }
}
