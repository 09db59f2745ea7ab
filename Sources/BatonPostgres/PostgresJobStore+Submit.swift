public import BatonDurable
import Foundation
import Logging
import NIOCore
public import PostgresNIO

extension PostgresJobStore {
    /// Stores the graph in one transaction, committed synchronously: an answer means a durable run.
    /// Retry-safe: the call carries a submission id of its own, so when a reply lost after the commit
    /// makes the store send it again, the run stored the first time is returned, never a second copy.
    public func submit(_ graph: GraphSpec, uniqueKey: String?) async throws -> SubmittedRun {
        try await submit(graph, uniqueKey: uniqueKey, submission: UUID().uuidString)
    }

    /// Stores the graph under `submission`, an identity of this call drawn by the caller.
    ///
    /// **Retry-safe.** A reply lost after the server committed (the connection dropped at `COMMIT`)
    /// makes the store send the statement again; the run inserted the first time has this
    /// submission, so the second insert does nothing and the first run is returned — never a
    /// second copy of the graph, with or without a unique key.
    func submit(_ graph: GraphSpec, uniqueKey: String?, submission: String) async throws -> SubmittedRun {
        let bindings = try submitBindings(graph, uniqueKey: uniqueKey, submission: submission)
        let insert = Prepared<SubmitGraph>(bindings: bindings)
        let logger = logger
        let row = try await retrying("submit") { [submitClient, faults] in
            let rows = try await submitClient.withConnection { connection in
                try await Self.discardingIfBroken(connection) {
                    let rows = try await connection.rows(of: insert, logger: logger)
                    try await Self.confirmCommitted(on: connection, logger: logger)
                    return rows
                }
            }
            try faults.afterCommit("submit")
            return rows.first
        }
        let submitted: SubmittedRun
        if let row {
            let (run, _, ids) = try row.decode((Int64, Int64, [Int64]?).self)
            submitted = SubmittedRun(
                run: DurableRunID(run), jobs: (ids ?? []).map { DurableJobID($0) }, existing: false)
        } else {
            // A run with the unique key exists, or this submission's own first try committed.
            submitted = try await existingRun(graph: graph, uniqueKey: uniqueKey, submission: submission)
        }
        if !submitted.existing && graph.jobs.count >= Self.analyzedSubmission { await refreshStatistics() }
        return submitted
    }

    /// Stores a whole graph in the caller's own transaction on `connection`: the run exists if and only
    /// if that transaction commits, and no worker sees it (or is woken: `NOTIFY` is delivered at commit)
    /// before then.
    ///
    /// ```swift
    /// try await connection.query("BEGIN", logger: logger)
    /// try await connection.query("INSERT INTO orders (id, total) VALUES (7, 12)", logger: logger)
    /// let run = try await store.submit(shipOrder(7), uniqueKey: "ship-7", on: connection)
    /// try await connection.query("COMMIT", logger: logger)
    /// ```
    ///
    /// `connection` is the application's own, to the store's database; its search path does not matter
    /// (the statement names the store's schema) and is left as it was. Outside `BEGIN`/`COMMIT` the graph
    /// is committed at once, as by ``submit(_:uniqueKey:)``. Unlike that call, this one is not retried:
    /// a connection that fails fails the caller's transaction, which the caller retries as a whole.
    /// A `uniqueKey` behaves as in ``submit(_:uniqueKey:)``; while another transaction holds an
    /// uncommitted run with the same key, this call waits for it to end (PostgreSQL's unique index).
    ///
    /// - Throws: `DurableError`: `DurableError.invalidGraph` or `DurableError.dependencyCycle`
    ///   before sending anything, `DurableError.misuse` when the connection's database has no
    ///   store in ``PostgresStoreConfiguration/schema``; PostgresNIO's errors as they happen (the caller's
    ///   transaction is then aborted and must be rolled back).
    public func submit(
        _ graph: GraphSpec, uniqueKey: String?, on connection: PostgresConnection
    ) async throws -> SubmittedRun {
        let bindings = try submitBindings(graph, uniqueKey: uniqueKey, submission: UUID().uuidString)
        let schema = configuration.schema
        let logger = logger
        do {
            let rows = try await connection.query(
                PostgresQuery(unsafeSQL: SubmitGraph.qualified(schema: schema), binds: bindings), logger: logger
            ).collect()
            if let row = rows.first {
                let (run, _, ids) = try row.decode((Int64, Int64, [Int64]?).self)
                return SubmittedRun(run: DurableRunID(run), jobs: (ids ?? []).map { DurableJobID($0) }, existing: false)
            }
            // The unique key is held: by a committed run, or one written earlier in this transaction.
            let table = "\"\(schema)\""
            let found = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        SELECT r.id, array(SELECT j.id FROM \(table).jobs j WHERE j.run = r.id AND j.added_by IS NULL ORDER BY j.idx)
                        FROM \(table).runs r WHERE r.unique_key = $1
                        """,
                    binds: {
                        var b = PostgresBindings(); b.append(uniqueKey); return b
                    }()),
                logger: logger
            ).collect()
            guard let first = found.first else {
                throw DurableError(
                    code: .storeFailure,
                    message:
                        "the run with unique key '\(uniqueKey ?? "")' was deleted while graph '\(graph.name)' was submitted; submit again"
                )
            }
            let (run, ids) = try first.decode((Int64, [Int64]).self)
            return SubmittedRun(run: DurableRunID(run), jobs: ids.map { DurableJobID($0) }, existing: true)
        } catch let error as PSQLError where ["42P01", "3F000"].contains(error.serverInfo?[.sqlState]) {
            throw DurableError(
                code: .misuse,
                message:
                    "the connection given to submit(_:uniqueKey:on:) reaches a database without this job store's tables in schema '\(schema)' (\(PostgresFailure.describe(error))). Use a connection to the store's database, opened after the store created its tables.",
                underlying: error)
        }
    }

    /// Submits a typed graph in the caller's own transaction on `connection`, as
    /// ``submit(_:uniqueKey:on:)-(GraphSpec,_,_)`` does; the submitter's trace context is stored with the run.
    ///
    /// - Throws: as ``submit(_:uniqueKey:on:)-(GraphSpec,_,_)``, and `DurableError.uniqueKeyConflict`
    ///   when the run holding `uniqueKey` has another shape than `graph`.
    public func submit(
        _ graph: JobGraph, uniqueKey: String? = nil, on connection: PostgresConnection
    ) async throws -> DurableRun {
        var spec = try graph.spec()
        spec.traceCarrier = spec.carrierToStore()
        let run = DurableRun(try await submit(spec, uniqueKey: uniqueKey, on: connection))
        guard run.existing else { return run }
        var stored: [(String, String)?] = []
        if run.jobs.count == spec.jobs.count {
            stored = try await connection.query(
                PostgresQuery(
                    unsafeSQL:
                        "SELECT name, kind FROM \"\(configuration.schema)\".jobs WHERE run = $1 AND added_by IS NULL ORDER BY idx",
                    binds: {
                        var b = PostgresBindings(); b.append(run.id.rawValue); return b
                    }()),
                logger: logger
            ).collect().map { row -> (String, String)? in try row.decode((String, String).self) }
        }
        try spec.checkShape(of: run, uniqueKey: uniqueKey, stored: stored)
        return run
    }

    /// Validates `graph` and binds the values of ``SubmitGraph``.
    private func submitBindings(
        _ graph: GraphSpec, uniqueKey: String?, submission: String
    ) throws -> PostgresBindings {
        try graph.validate()
        try StoredText.checkUniqueKey(uniqueKey)
        let jobs = graph.jobs
        let retries = try Self.storedRetries(of: jobs)
        let carrier = TraceCarrierCoding.encode(graph.carrierToStore())
        let channel = channel
        var remaining: [Int32] = []
        var inputs: [ByteBuffer] = []
        var hasInput: [Bool] = []
        var inputFrom: [Int32] = []
        var timeouts: [Double] = []
        var notBefore: [Double] = []
        // Edges and categories by job index: the statement maps indexes to identities.
        let links = LinkColumns(jobs) { Int32($0) }
        for job in jobs {
            let dependencies = job.allDependencies
            remaining.append(Int32(Set(dependencies.map(\.index)).count))
            inputs.append(ByteBuffer(bytes: job.input ?? Data()))
            hasInput.append(job.input != nil)
            inputFrom.append(job.inputFrom.map { Int32($0) } ?? -1)
            timeouts.append(job.timeout?.seconds ?? -1)
            notBefore.append(job.notBefore?.storeTime ?? 0)
        }
        let names = jobs.map(\.name)
        let kinds = jobs.map(\.kind)
        let indexes = (0..<jobs.count).map { Int32($0) }
        let priorities = jobs.map { Int32($0.priority) }
        let maxAttempts = jobs.map { Int32($0.retry.maxAttempts) }
        let hasCategories = jobs.map { !$0.categories.isEmpty }
        // One statement (one round trip): the run, its jobs (identities drawn in job order, so that
        // older means submitted first), their edges and categories by job index, and the wake-up.
        // With a unique key that an earlier run has, the run's insert does nothing, so nothing else
        // is inserted either, and the existing run is looked up.
        var bindings = PostgresBindings(capacity: 28)
        bindings.append(graph.name)
        bindings.append(uniqueKey)
        bindings.append(nowOverride)
        bindings.append(jobs.count)
        bindings.append(jobs.isEmpty)
        bindings.append(carrier)
        bindings.append(submission)
        bindings.append(indexes)
        bindings.append(names)
        bindings.append(kinds)
        bindings.append(inputs)
        bindings.append(hasInput)
        bindings.append(inputFrom)
        bindings.append(remaining)
        bindings.append(maxAttempts)
        bindings.append(retries)
        bindings.append(priorities)
        bindings.append(timeouts)
        bindings.append(hasCategories)
        bindings.append(notBefore)
        bindings.append(links.edgeFrom)
        bindings.append(links.edgeTo)
        bindings.append(links.edgeRegardless)
        bindings.append(links.categoryJob)
        bindings.append(links.categoryName)
        bindings.append(links.categoryLimit)
        bindings.append(channel)
        bindings.append(links.edgeIncludesAdded)
        return bindings
    }

    /// The jobs' retry policies as stored, each distinct policy encoded once (a graph's jobs mostly
    /// share one).
    static func storedRetries(of jobs: [JobSpec]) throws -> [String] {
        let encoder = JSONEncoder()
        var encoded: [RetryPolicy: String] = [:]
        return try jobs.map { job in
            if let text = encoded[job.retry] { return text }
            let text = String(decoding: try encoder.encode(job.retry), as: UTF8.self)
            encoded[job.retry] = text
            return text
        }
    }

    /// A submission of at least this many jobs refreshes the planner's statistics before it returns.
    static let analyzedSubmission = 1000

    /// Refreshes the planner's statistics of the tables a large submission filled (`ANALYZE`, which
    /// reads a sample of at most 30,000 rows a table: tens of milliseconds).
    ///
    /// Without it, PostgreSQL plans the steps of the new run from statistics that predate it — none
    /// at all for a new store — until autovacuum's next pass (a minute or more). It then guessed
    /// dozens of dependents per finished job and read the whole jobs table at every completion
    /// instead of looking the one dependent up: each step of a 10,000-job chain took about twice as
    /// long as in a 1,000-job chain. `SKIP_LOCKED`: when another process is analyzing a table, its
    /// statistics will do. A failure is logged, not thrown: the run is stored and durable.
    func refreshStatistics() async {
        let logger = logger
        do {
            // Bounded like any call: a connection that stops answering must not hold the submission.
            try await PostgresTimeout.run(configuration.operationTimeout) { [client] in
                _ = try await client.query("ANALYZE (SKIP_LOCKED) jobs, edges, job_categories", logger: logger)
                    .collect()
            }
        } catch {
            logger.notice("could not refresh the planner's statistics after a large submission: \(error)")
        }
    }

    /// The inserting statement of a submission (the run, its jobs with identities drawn in job order,
    /// their edges and categories, the wake-up). Values: $1 name, $2 unique key, $3 now (NULL: the
    /// server's clock), $4 job count, $5 whether the run is finished (no jobs), $6 trace context,
    /// $7 submission, $8 indexes, $9 names, $10 kinds, $11 inputs, $12 has input, $13 input from,
    /// $14 remaining, $15 maximum attempts, $16 retry policies, $17 priorities, $18 timeouts, $19 has
    /// categories, $20 not before, $21–$23 edges, $24–$26 categories, $27 channel, $28 whether each edge
    /// waits for what its dependency adds.
    enum SubmitGraph: PreparedText {
        static let name = "baton_submit_v7"
        static let sql = """
            WITH now AS MATERIALIZED (
                SELECT coalesce($3::float8, extract(epoch FROM now())::float8) AS t
            ), new_run AS (
                INSERT INTO runs (name, unique_key, created, unfinished, jobs, finished, trace_context, submission)
                SELECT $1, $2, now.t, $4, $4, CASE WHEN $5::bool THEN now.t END, $6, $7 FROM now
                ON CONFLICT DO NOTHING RETURNING id
            ), ids AS MATERIALIZED (
                SELECT g.idx, nextval(pg_get_serial_sequence('jobs', 'id')) AS id
                FROM new_run, generate_series(0, $4 - 1) AS g(idx) ORDER BY g.idx
            ), t AS (
                SELECT * FROM unnest($8, $9, $10, $11, $12, $13,
                    $14, $15, $16, $17, $18, $19,
                    $20)
                AS t(idx, name, kind, input, has_input, input_from, remaining, max_attempts, retry, priority,
                    timeout, has_categories, not_before)
            ), inserted AS (
                INSERT INTO jobs (id, run, idx, name, kind, state, input, input_from, remaining, max_attempts, retry,
                    priority, timeout, has_categories, not_before, waiting)
                SELECT i.id, new_run.id, t.idx, t.name, t.kind,
                    CASE WHEN t.remaining = 0 THEN 'ready' ELSE 'pending' END,
                    CASE WHEN t.has_input THEN t.input END, source.id, t.remaining, t.max_attempts,
                    t.retry, t.priority, NULLIF(t.timeout, -1), t.has_categories, t.not_before, t.not_before <> 0
                FROM new_run, t JOIN ids i ON i.idx = t.idx LEFT JOIN ids source ON source.idx = t.input_from
                RETURNING id
            ), new_edges AS (
                INSERT INTO edges (dependency, job, run_regardless, includes_added)
                SELECT a.id, b.id, e.regardless, e.includes_added
                FROM unnest($21, $22, $23, $28) AS e(dependency, job, regardless, includes_added)
                    JOIN ids a ON a.idx = e.dependency JOIN ids b ON b.idx = e.job
            ), new_categories AS (
                INSERT INTO job_categories (job, category, max_holders)
                SELECT i.id, c.category, c.max_holders
                FROM unnest($24, $25, $26) AS c(job, category, max_holders)
                    JOIN ids i ON i.idx = c.job
            ), woken AS (
                SELECT pg_notify($27, '') FROM new_run WHERE $4 > 0
            )
            SELECT new_run.id, (SELECT count(*) FROM woken) + (SELECT count(*) FROM inserted) AS done,
                (SELECT array_agg(id ORDER BY idx) FROM ids) AS jobs
            FROM new_run
            """
    }

    /// The run an insert did nothing for: this submission's own (a retry after a lost reply), or the
    /// one holding `uniqueKey`.
    private func existingRun(graph: GraphSpec, uniqueKey: String?, submission: String) async throws -> SubmittedRun {
        let logger = logger
        return try await transaction("submit") { connection in
            let found = try await connection.liveQuery(
                """
                SELECT id, submission IS NOT DISTINCT FROM \(submission) FROM runs
                WHERE submission = \(submission) OR unique_key = \(uniqueKey)
                ORDER BY 2 DESC LIMIT 1
                """, logger: logger
            ).collect()
            guard let first = found.first else {
                throw DurableError(
                    code: .storeFailure,
                    message: uniqueKey.map {
                        "the run with unique key '\($0)' was deleted while graph '\(graph.name)' was submitted; submit again"
                    } ?? "PostgreSQL inserted no run for graph '\(graph.name)'")
            }
            let (run, own) = try first.decode((Int64, Bool).self)
            let ids = try await connection.liveQuery(
                "SELECT id FROM jobs WHERE run = \(run) AND added_by IS NULL ORDER BY idx", logger: logger
            ).collect().map { try $0.decode(Int64.self) }
            return SubmittedRun(run: DurableRunID(run), jobs: ids.map { DurableJobID($0) }, existing: !own)
        }
    }
}

extension PostgresJobStore.SubmitGraph {
    /// ``sql`` with the store's tables named by their schema, for a connection whose search path is
    /// the application's (a submission in the caller's transaction).
    static func qualified(schema: String) -> String {
        let table = "\"\(schema)\""
        var text = sql
        for name in ["runs", "jobs", "edges", "job_categories"] {
            text = text.replacingOccurrences(of: "INSERT INTO \(name) ", with: "INSERT INTO \(table).\(name) ")
        }
        text = text.replacingOccurrences(
            of: "pg_get_serial_sequence('jobs'", with: "pg_get_serial_sequence('\(table).jobs'")
        return text
    }
}

/// A graph's edges and categories as the columns of an `unnest`, each job named by `ID` (its index in
/// a submission, its identity in an addition): one edge per stored dependency, and a category named
/// twice in a job stored once, with its first limit.
struct LinkColumns<ID> {
    var edgeFrom: [ID] = []
    var edgeTo: [ID] = []
    var edgeRegardless: [Bool] = []
    var edgeIncludesAdded: [Bool] = []
    var categoryJob: [ID] = []
    var categoryName: [String] = []
    var categoryLimit: [Int32] = []

    init(_ jobs: [JobSpec], id: (Int) -> ID) {
        for (index, job) in jobs.enumerated() {
            for dependency in job.storedDependencies {
                appendEdge(
                    from: id(dependency.index), to: id(index), regardless: dependency.runRegardless,
                    includesAdded: dependency.includingAdded)
            }
            var seen = Set<String>()
            for category in job.categories where seen.insert(category.name).inserted {
                categoryJob.append(id(index))
                categoryName.append(category.name)
                categoryLimit.append(Int32(category.limit))
            }
        }
    }

    mutating func appendEdge(from dependency: ID, to job: ID, regardless: Bool, includesAdded: Bool) {
        edgeFrom.append(dependency)
        edgeTo.append(job)
        edgeRegardless.append(regardless)
        edgeIncludesAdded.append(includesAdded)
    }
}
