public import BatonDurable
import Foundation
import Logging
import PostgresNIO

/// What operators read and repair: runs by state, name and time; a job's attempts; retries in place and
/// deletion.
extension PostgresJobStore {
    public func runs(_ filter: RunFilter) async throws -> RunPage {
        try filter.check()
        var conditions: [String] = []
        var bindings = PostgresBindings()
        if let state = filter.state { conditions.append(RunQueries.condition(state)) }
        if let name = filter.name {
            bindings.append(name)
            conditions.append("name = $\(bindings.count)")
        }
        if let since = filter.createdSince {
            bindings.append(since.storeTime)
            conditions.append("created >= $\(bindings.count)")
        }
        if let before = filter.createdBefore {
            bindings.append(before.storeTime)
            conditions.append("created < $\(bindings.count)")
        }
        if let run = filter.before {
            bindings.append(run.rawValue)
            conditions.append("id < $\(bindings.count)")
        }
        bindings.append(filter.limit + 1)
        let sql = """
            SELECT id, name, unique_key, created, finished, jobs, unfinished, failed, cancelled FROM runs
            \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
            ORDER BY id DESC LIMIT $\(bindings.count)
            """
        let rows = try await statement("runs", PostgresQuery(unsafeSQL: sql, binds: bindings), readOnly: true)
        let runs = try rows.prefix(filter.limit).map { row in
            let (id, name, uniqueKey, created, finished, jobs, unfinished, failed, cancelled) = try row.decode(
                (Int64, String, String?, Double, Double?, Int, Int, Int, Int).self)
            return RunSummary(
                id: DurableRunID(id), name: name, uniqueKey: uniqueKey, created: Date(storeTime: created),
                finished: finished.map(Date.init(storeTime:)), jobs: jobs, unfinished: unfinished, failed: failed,
                cancelled: cancelled)
        }
        return RunPage(runs: runs, next: rows.count > filter.limit ? runs.last?.id : nil)
    }

    public func runCounts() async throws -> [RunState: Int] {
        let rows = try await statement(
            "runCounts", PostgresQuery(unsafeSQL: RunQueries.countsSQL(table: "runs")), readOnly: true)
        let (running, failed, cancelled, all) = try rows.first?.decode((Int, Int, Int, Int).self) ?? (0, 0, 0, 0)
        return RunQueries.counts(running: running, failed: failed, cancelled: cancelled, all: all)
    }

    public func attempts(of job: DurableJobID) async throws -> [AttemptRecord] {
        let logger = logger
        return try await transaction("attempts") { connection in
            guard
                let row = try await connection.liveQuery(
                    "SELECT state, attempts, finished, started FROM jobs WHERE id = \(job.rawValue)", logger: logger
                ).collect().first
            else { throw RunQueries.unknownJob(job, doing: "it has no attempts to show") }
            let (state, count, finished, started) = try row.decode((String, Int, Double?, Double?).self)
            var attempts = try await connection.liveQuery(
                """
                SELECT attempt, worker, ended, outcome, result, error, started FROM attempts
                WHERE job = \(job.rawValue) ORDER BY seq
                """, logger: logger
            ).collect().map { row in
                let (attempt, worker, ended, outcome, result, error, began) = try row.decode(
                    (Int, String?, Double, String, String, String?, Double?).self)
                return AttemptRecord(
                    attempt: attempt, worker: worker, started: began.map(Date.init(storeTime:)),
                    ended: Date(storeTime: ended), outcome: AttemptRecord.Outcome(rawValue: outcome) ?? .failed,
                    result: DurableJobState(rawValue: result) ?? .failed, error: error)
            }
            if state == DurableJobState.succeeded.rawValue, let finished {
                attempts.append(
                    AttemptRecord(
                        attempt: count, worker: nil, started: started.map(Date.init(storeTime:)),
                        ended: Date(storeTime: finished), outcome: .succeeded, result: .succeeded, error: nil))
            }
            return attempts
        }
    }

    public func jobs(_ filter: JobFilter) async throws -> JobPage {
        try filter.check()
        let logger = logger
        var bindings = PostgresBindings()
        bindings.append(filter.run.rawValue)
        if let state = filter.state { bindings.append(state.rawValue) }
        if let after = filter.after { bindings.append(after.rawValue) }
        bindings.append(filter.limit + 1)
        let sql = RunQueries.jobsSQL(
            table: "jobs", state: filter.state != nil, after: filter.after != nil, placeholder: { "$\($0)" })
        let query = PostgresQuery(unsafeSQL: sql, binds: bindings)
        return try await transaction("jobs") { connection in
            let exists = try await connection.liveQuery(
                "SELECT 1 FROM runs WHERE id = \(filter.run.rawValue)", logger: logger
            ).collect()
            guard !exists.isEmpty else { throw RunQueries.unknownRun(filter.run, doing: "it has no jobs to list") }
            let rows = try await connection.liveQuery(query, logger: logger).collect()
            let jobs = try rows.prefix(filter.limit).map { row in
                let (id, name, kind, state, attempts, started, finished, lastError, addedBy) = try row.decode(
                    (Int64, String, String, String, Int, Double?, Double?, String?, Int64?).self)
                return JobSummary(
                    id: DurableJobID(id), name: name, kind: kind, state: DurableJobState(rawValue: state) ?? .failed,
                    attempts: attempts, started: started.map(Date.init(storeTime:)),
                    finished: finished.map(Date.init(storeTime:)), lastError: lastError,
                    addedBy: addedBy.map { DurableJobID($0) })
            }
            return JobPage(jobs: jobs, next: rows.count > filter.limit ? jobs.last?.id : nil)
        }
    }

    public func attempts(ofRun run: DurableRunID) async throws -> [DurableJobID: [AttemptRecord]] {
        let logger = logger
        return try await transaction("attempts") { connection in
            let exists = try await connection.liveQuery("SELECT 1 FROM runs WHERE id = \(run.rawValue)", logger: logger)
                .collect()
            guard !exists.isEmpty else { throw RunQueries.unknownRun(run, doing: "it has no attempts to show") }
            var attempts: [DurableJobID: [AttemptRecord]] = [:]
            let ended = try await connection.liveQuery(
                """
                SELECT a.job, a.attempt, a.worker, a.ended, a.outcome, a.result, a.error, a.started
                FROM jobs j JOIN attempts a ON a.job = j.id WHERE j.run = \(run.rawValue) ORDER BY a.seq
                """, logger: logger
            ).collect()
            for row in ended {
                let (job, attempt, worker, endedAt, outcome, result, error, started) = try row.decode(
                    (Int64, Int, String?, Double, String, String, String?, Double?).self)
                attempts[DurableJobID(job), default: []].append(
                    AttemptRecord(
                        attempt: attempt, worker: worker, started: started.map(Date.init(storeTime:)),
                        ended: Date(storeTime: endedAt), outcome: AttemptRecord.Outcome(rawValue: outcome) ?? .failed,
                        result: DurableJobState(rawValue: result) ?? .failed, error: error))
            }
            let succeeded = try await connection.liveQuery(
                """
                SELECT id, attempts, finished, started FROM jobs
                WHERE run = \(run.rawValue) AND state = 'succeeded' AND finished IS NOT NULL
                """, logger: logger
            ).collect()
            for row in succeeded {
                let (job, attempt, finished, started) = try row.decode((Int64, Int, Double, Double?).self)
                attempts[DurableJobID(job), default: []].append(
                    AttemptRecord(
                        attempt: attempt, worker: nil, started: started.map(Date.init(storeTime:)),
                        ended: Date(storeTime: finished), outcome: .succeeded, result: .succeeded, error: nil))
            }
            return attempts
        }
    }

    public func workers() async throws -> [WorkerSummary] {
        let logger = logger
        return try await transaction("workers") { connection in
            let now = try await self.serverTime(on: connection)
            var registered: [(id: String, kinds: [String], expires: Date)] = []
            for try await (id, kinds, expires) in try await connection.liveQuery(
                "SELECT id, kinds, expires FROM workers WHERE expires > \(now)", logger: logger
            ).decode((String, [String], Double).self) {
                registered.append((id: id, kinds: kinds, expires: Date(storeTime: expires)))
            }
            var leases: [(owner: String, lease: HeldLease)] = []
            for try await (owner, id, name, kind, run, attempt, started, expires) in try await connection.liveQuery(
                """
                SELECT lease_owner, id, name, kind, run, attempts, started, lease_expires FROM jobs
                WHERE state = 'running' AND lease_owner IS NOT NULL ORDER BY id
                """, logger: logger
            ).decode((String, Int64, String, String, Int64, Int, Double?, Double?).self) {
                leases.append(
                    (
                        owner: owner,
                        lease: HeldLease(
                            job: DurableJobID(id), name: name, kind: kind, run: DurableRunID(run), attempt: attempt,
                            started: started.map { Date(storeTime: $0) }, expires: expires.map { Date(storeTime: $0) })
                    ))
            }
            return RunQueries.workers(registered: registered, leases: leases)
        }
    }

    public func payload(of job: DurableJobID) async throws -> JobPayload {
        let logger = logger
        return try await transaction("payload") { connection in
            guard
                let row = try await connection.liveQuery(
                    "SELECT input, input_from, output FROM jobs WHERE id = \(job.rawValue)", logger: logger
                ).collect().first
            else { throw RunQueries.unknownJob(job, doing: "it has no input or output to show") }
            let (input, inputFrom, output) = try row.decode((Data?, Int64?, Data?).self)
            return JobPayload(input: input, inputFrom: inputFrom.map { DurableJobID($0) }, output: output)
        }
    }

    @discardableResult
    public func retry(job: DurableJobID) async throws -> Int {
        let logger = logger
        let notify = notifySQL()
        return try await transaction("retry") { connection in
            guard
                let run = try await connection.liveQuery(
                    "SELECT run FROM jobs WHERE id = \(job.rawValue)", logger: logger
                ).collect().first?.decode(Int64.self)
            else { throw RunQueries.unknownJob(job, doing: "nothing to retry") }
            let (jobs, edges) = try await Self.retryGraph(connection, run: run, logger: logger)
            let plan = try RetryPlan.make(targets: [job.rawValue], jobs: jobs, edges: edges)
            return try await Self.apply(plan, connection, run: run, notify: notify, logger: logger)
        }
    }

    @discardableResult
    public func retry(run: DurableRunID) async throws -> Int {
        let logger = logger
        let notify = notifySQL()
        return try await transaction("retry") { connection in
            let exists = try await connection.liveQuery("SELECT 1 FROM runs WHERE id = \(run.rawValue)", logger: logger)
                .collect()
            guard !exists.isEmpty else { throw RunQueries.unknownRun(run, doing: "nothing to retry") }
            let (jobs, edges) = try await Self.retryGraph(connection, run: run.rawValue, logger: logger)
            let plan = try RetryPlan.make(targets: RetryPlan.roots(jobs: jobs, edges: edges), jobs: jobs, edges: edges)
            return try await Self.apply(plan, connection, run: run.rawValue, notify: notify, logger: logger)
        }
    }

    public func delete(run: DurableRunID) async throws {
        let logger = logger
        try await transaction("delete") { connection in
            guard
                let unfinished = try await connection.liveQuery(
                    "SELECT unfinished FROM runs WHERE id = \(run.rawValue) FOR UPDATE", logger: logger
                ).collect().first?.decode(Int.self)
            else { throw RunQueries.unknownRun(run, doing: "nothing to delete") }
            guard unfinished == 0 else { throw RunQueries.unfinishedDelete(run, unfinished: unfinished) }
            try await Self.deleteRuns(connection, [run.rawValue], logger: logger)
        }
    }

    /// Deletes runs with their jobs, edges, categories, holders and attempts.
    static func deleteRuns(_ connection: PostgresConnection, _ runs: [Int64], logger: Logger) async throws {
        let jobs = "SELECT id FROM jobs WHERE run = ANY($1)"
        for table in ["edges WHERE job", "job_categories WHERE job", "holders WHERE job", "attempts WHERE job"] {
            var bindings = PostgresBindings()
            bindings.append(runs)
            try await connection.liveQuery(
                PostgresQuery(unsafeSQL: "DELETE FROM \(table) IN (\(jobs))", binds: bindings), logger: logger)
        }
        try await connection.liveQuery("DELETE FROM jobs WHERE run = ANY(\(runs))", logger: logger)
        try await connection.liveQuery("DELETE FROM runs WHERE id = ANY(\(runs))", logger: logger)
    }

    /// A run's jobs (locked, in identity order as `cancel(run:)` locks them) and edges, as a retry plans
    /// over them.
    static func retryGraph(
        _ connection: PostgresConnection, run: Int64, logger: Logger
    ) async throws -> ([Int64: RetryPlan.Job], [RetryPlan.Edge]) {
        // Locked until the set of rows stops growing. A job adding jobs holds its own row until its
        // addition commits, so each pass waits for the additions under way; but its rows were chosen
        // before it waited, so jobs added meanwhile are not among them (and their edges would be read
        // as edges from finished jobs), and one of those can be claimed and add jobs of its own before
        // the next pass. Once a pass finds no new job, every job of the run is locked: none can be
        // claimed or add jobs until this transaction ends.
        var jobs: [Int64: RetryPlan.Job] = [:]
        var locked: Set<Int64>?
        while true {
            jobs = [:]
            for row in try await connection.liveQuery(
                """
                SELECT id, name, state, remaining, state = 'running' AND cancel_request IS NOT NULL, retry
                FROM jobs WHERE run = \(run) ORDER BY id FOR UPDATE
                """, logger: logger
            ).collect() {
                let (id, name, state, remaining, cancelling, retry) = try row.decode(
                    (Int64, String, String, Int, Bool, String).self)
                jobs[id] = RetryPlan.Job(
                    name: name, state: DurableJobState(rawValue: state) ?? .failed, remaining: remaining,
                    isBeingCancelled: cancelling, maxAttempts: RetryPolicy.stored(retry)?.maxAttempts ?? 0)
            }
            let ids = Set(jobs.keys)
            if ids == locked { break }
            locked = ids
        }
        let edges = try await connection.liveQuery(
            """
            SELECT e.dependency, e.job, e.run_regardless FROM edges e JOIN jobs j ON j.id = e.job
            WHERE j.run = \(run)
            """, logger: logger
        ).collect().map { row in
            let (dependency, job, regardless) = try row.decode((Int64, Int64, Bool).self)
            return RetryPlan.Edge(dependency: dependency, job: job, runRegardless: regardless)
        }
        return (jobs, edges)
    }

    /// Writes a retry's plan and wakes workers; returns how many jobs run again. A job that never
    /// started keeps its `notBefore`; one that ran is due at once (see the SQLite store's `apply`).
    static func apply(
        _ plan: RetryPlan, _ connection: PostgresConnection, run: Int64, notify: String, logger: Logger
    ) async throws -> Int {
        guard !plan.restarted.isEmpty else { return 0 }
        try await connection.liveQuery(
            """
            UPDATE jobs j SET state = c.state, remaining = c.remaining,
                not_before = CASE WHEN j.attempts = 0 THEN j.not_before ELSE 0 END,
                waiting = j.attempts = 0 AND j.not_before > 0,
                lease_owner = NULL, lease_token = NULL, lease_expires = NULL, cancel_request = NULL, last_error = NULL,
                output = NULL, finished = NULL, finished_by = NULL, finished_report = NULL, finished_result = NULL,
                max_attempts = LEAST(2147483647::bigint,
                    j.attempts::bigint + CASE WHEN c.max_attempts > 0 THEN c.max_attempts ELSE 1 END)
            FROM unnest(\(plan.restarted.map(\.id)), \(plan.restarted.map(\.state.rawValue)),
                \(plan.restarted.map(\.remaining)), \(plan.restarted.map(\.maxAttempts)))
                AS c(id, state, remaining, max_attempts)
            WHERE j.id = c.id
            """, logger: logger)
        if !plan.waiting.isEmpty {
            try await connection.liveQuery(
                """
                UPDATE jobs j SET state = c.state, remaining = c.remaining
                FROM unnest(\(plan.waiting.map(\.id)), \(plan.waiting.map(\.state.rawValue)),
                    \(plan.waiting.map(\.remaining))) AS c(id, state, remaining)
                WHERE j.id = c.id
                """, logger: logger)
        }
        try await connection.liveQuery(
            """
            UPDATE runs SET unfinished = unfinished + \(plan.restarted.count), failed = failed - \(plan.failed),
                cancelled = cancelled - \(plan.cancelled), finished = NULL
            WHERE id = \(run)
            """, logger: logger)
        try await connection.liveQuery(PostgresQuery(unsafeSQL: "SELECT \(notify)"), logger: logger)
        return plan.restarted.count
    }
}
