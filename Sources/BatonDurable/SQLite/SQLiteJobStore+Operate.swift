import Foundation
import GRDB

/// What operators read and repair: runs by state, name and time; a job's attempts; retries in place and
/// deletion.
extension SQLiteJobStore {
    public func runs(_ filter: RunFilter) async throws -> RunPage {
        try filter.check()
        return try await reading { db in
            var conditions: [String] = []
            var arguments: [any DatabaseValueConvertible] = []
            if let state = filter.state { conditions.append(RunQueries.condition(state)) }
            if let name = filter.name {
                conditions.append("name = ?")
                arguments.append(name)
            }
            if let since = filter.createdSince {
                conditions.append("created >= ?")
                arguments.append(since.storeTime)
            }
            if let before = filter.createdBefore {
                conditions.append("created < ?")
                arguments.append(before.storeTime)
            }
            if let run = filter.before {
                conditions.append("id < ?")
                arguments.append(run.rawValue)
            }
            arguments.append(filter.limit + 1)
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, name, unique_key, created, finished, jobs, unfinished, failed, cancelled
                    FROM baton_runs \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
                    ORDER BY id DESC LIMIT ?
                    """, arguments: StatementArguments(arguments))
            let runs = try rows.prefix(filter.limit).map { row in
                RunSummary(
                    id: DurableRunID(try row.value(at: 0) as Int64), name: try row.value(at: 1),
                    uniqueKey: try row.value(at: 2),
                    created: Date(storeTime: try row.value(at: 3)),
                    finished: (try row.value(at: 4) as Double?).map(Date.init(storeTime:)),
                    jobs: try row.value(at: 5), unfinished: try row.value(at: 6), failed: try row.value(at: 7),
                    cancelled: try row.value(at: 8))
            }
            return RunPage(runs: runs, next: rows.count > filter.limit ? runs.last?.id : nil)
        }
    }

    public func runCounts() async throws -> [RunState: Int] {
        try await reading { db in
            let row = try Row.fetchOne(db, sql: RunQueries.countsSQL(table: "baton_runs"))
            return RunQueries.counts(
                running: row?[0] ?? 0, failed: row?[1] ?? 0, cancelled: row?[2] ?? 0, all: row?[3] ?? 0)
        }
    }

    public func attempts(of job: DurableJobID) async throws -> [AttemptRecord] {
        try await reading { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT state, attempts, finished, started FROM baton_jobs WHERE id = ?",
                    arguments: [job.rawValue])
            else { throw RunQueries.unknownJob(job, doing: "it has no attempts to show") }
            var attempts = try Row.fetchAll(
                db,
                sql: """
                    SELECT attempt, worker, ended, outcome, result, error, started FROM baton_attempts
                    WHERE job = ? ORDER BY seq
                    """, arguments: [job.rawValue]
            ).map { row in
                AttemptRecord(
                    attempt: try row.value(at: 0), worker: try row.value(at: 1),
                    started: (try row.value(at: 6) as Double?).map(Date.init(storeTime:)),
                    ended: Date(storeTime: try row.value(at: 2)),
                    outcome: AttemptRecord.Outcome(rawValue: try row.value(at: 3)) ?? .failed,
                    result: DurableJobState(rawValue: try row.value(at: 4)) ?? .failed, error: try row.value(at: 5))
            }
            if try row.value(at: 0) as String == DurableJobState.succeeded.rawValue,
                let finished = try row.value(at: 2) as Double?
            {
                attempts.append(
                    AttemptRecord(
                        attempt: try row.value(at: 1), worker: nil,
                        started: (try row.value(at: 3) as Double?).map(Date.init(storeTime:)),
                        ended: Date(storeTime: finished), outcome: .succeeded, result: .succeeded, error: nil))
            }
            return attempts
        }
    }

    public func jobs(_ filter: JobFilter) async throws -> JobPage {
        try filter.check()
        return try await reading { db in
            guard
                try Bool.fetchOne(db, sql: "SELECT 1 FROM baton_runs WHERE id = ?", arguments: [filter.run.rawValue])
                    != nil
            else { throw RunQueries.unknownRun(filter.run, doing: "it has no jobs to list") }
            var arguments: [any DatabaseValueConvertible] = [filter.run.rawValue]
            if let state = filter.state { arguments.append(state.rawValue) }
            if let after = filter.after { arguments.append(after.rawValue) }
            arguments.append(filter.limit + 1)
            let sql = RunQueries.jobsSQL(
                table: "baton_jobs", state: filter.state != nil, after: filter.after != nil, placeholder: { "?\($0)" })
            let rows = try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments))
            let jobs: [JobSummary] = try rows.prefix(filter.limit).map { (row: Row) -> JobSummary in
                JobSummary(
                    id: DurableJobID(try row.value(at: 0) as Int64), name: try row.value(at: 1),
                    kind: try row.value(at: 2),
                    state: DurableJobState(rawValue: try row.value(at: 3) as String) ?? .failed,
                    attempts: try row.value(at: 4),
                    started: (try row.value(at: 5) as Double?).map(Date.init(storeTime:)),
                    finished: (try row.value(at: 6) as Double?).map(Date.init(storeTime:)),
                    lastError: try row.value(at: 7),
                    addedBy: (try row.value(at: 8) as Int64?).map { DurableJobID($0) })
            }
            return JobPage(jobs: jobs, next: rows.count > filter.limit ? jobs.last?.id : nil)
        }
    }

    public func attempts(ofRun run: DurableRunID) async throws -> [DurableJobID: [AttemptRecord]] {
        try await reading { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM baton_runs WHERE id = ?", arguments: [run.rawValue]) != nil
            else { throw RunQueries.unknownRun(run, doing: "it has no attempts to show") }
            var attempts: [DurableJobID: [AttemptRecord]] = [:]
            let ended = try Row.fetchAll(
                db,
                sql: """
                    SELECT a.job, a.attempt, a.worker, a.ended, a.outcome, a.result, a.error, a.started
                    FROM baton_jobs j JOIN baton_attempts a ON a.job = j.id WHERE j.run = ? ORDER BY a.seq
                    """, arguments: [run.rawValue])
            for row in ended {
                attempts[DurableJobID(try row.value(at: 0) as Int64), default: []].append(
                    AttemptRecord(
                        attempt: try row.value(at: 1), worker: try row.value(at: 2),
                        started: (try row.value(at: 7) as Double?).map(Date.init(storeTime:)),
                        ended: Date(storeTime: try row.value(at: 3)),
                        outcome: AttemptRecord.Outcome(rawValue: try row.value(at: 4)) ?? .failed,
                        result: DurableJobState(rawValue: try row.value(at: 5)) ?? .failed, error: try row.value(at: 6))
                )
            }
            let succeeded = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, attempts, finished, started FROM baton_jobs
                    WHERE run = ? AND state = 'succeeded' AND finished IS NOT NULL
                    """, arguments: [run.rawValue])
            for row in succeeded {
                attempts[DurableJobID(try row.value(at: 0) as Int64), default: []].append(
                    AttemptRecord(
                        attempt: try row.value(at: 1), worker: nil,
                        started: (try row.value(at: 3) as Double?).map(Date.init(storeTime:)),
                        ended: Date(storeTime: try row.value(at: 2)), outcome: .succeeded, result: .succeeded,
                        error: nil))
            }
            return attempts
        }
    }

    public func workers() async throws -> [WorkerSummary] {
        let now = clock.now()
        return try await reading { db in
            let decoder = JSONDecoder()
            let registered = try Row.fetchAll(
                db, sql: "SELECT id, kinds, expires FROM baton_workers WHERE expires > ?", arguments: [now.storeTime]
            ).map { row in
                (
                    id: try row.value(at: 0) as String,
                    kinds: try decoder.decode([String].self, from: Data((try row.value(at: 1) as String).utf8)),
                    expires: Date(storeTime: try row.value(at: 2))
                )
            }
            let leases = try Row.fetchAll(
                db,
                sql: """
                    SELECT lease_owner, id, name, kind, run, attempts, started, lease_expires FROM baton_jobs
                    WHERE state = 'running' AND lease_owner IS NOT NULL ORDER BY id
                    """
            ).map { (row: Row) -> (owner: String, lease: HeldLease) in
                (
                    owner: try row.value(at: 0),
                    lease: HeldLease(
                        job: DurableJobID(try row.value(at: 1) as Int64), name: try row.value(at: 2),
                        kind: try row.value(at: 3),
                        run: DurableRunID(try row.value(at: 4) as Int64),
                        attempt: try row.value(at: 5),
                        started: (try row.value(at: 6) as Double?).map { Date(storeTime: $0) },
                        expires: (try row.value(at: 7) as Double?).map { Date(storeTime: $0) })
                )
            }
            return RunQueries.workers(registered: registered, leases: leases)
        }
    }

    public func payload(of job: DurableJobID) async throws -> JobPayload {
        try await reading { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT input, input_from, output FROM baton_jobs WHERE id = ?", arguments: [job.rawValue])
            else { throw RunQueries.unknownJob(job, doing: "it has no input or output to show") }
            return JobPayload(
                input: try row.value(at: 0), inputFrom: (try row.value(at: 1) as Int64?).map { DurableJobID($0) },
                output: try row.value(at: 2))
        }
    }

    @discardableResult
    public func retry(job: DurableJobID) async throws -> Int {
        try await write(wake: true) { db in
            guard
                let run = try Int64.fetchOne(
                    db, sql: "SELECT run FROM baton_jobs WHERE id = ?", arguments: [job.rawValue])
            else { throw RunQueries.unknownJob(job, doing: "nothing to retry") }
            let (jobs, edges) = try Self.retryGraph(db, run: run)
            return try Self.apply(try RetryPlan.make(targets: [job.rawValue], jobs: jobs, edges: edges), db, run: run)
        }
    }

    @discardableResult
    public func retry(run: DurableRunID) async throws -> Int {
        try await write(wake: true) { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM baton_runs WHERE id = ?", arguments: [run.rawValue]) != nil
            else { throw RunQueries.unknownRun(run, doing: "nothing to retry") }
            let (jobs, edges) = try Self.retryGraph(db, run: run.rawValue)
            let roots = RetryPlan.roots(jobs: jobs, edges: edges)
            return try Self.apply(try RetryPlan.make(targets: roots, jobs: jobs, edges: edges), db, run: run.rawValue)
        }
    }

    public func delete(run: DurableRunID) async throws {
        try await write(wake: false) { db in
            guard
                let unfinished = try Int.fetchOne(
                    db, sql: "SELECT unfinished FROM baton_runs WHERE id = ?", arguments: [run.rawValue])
            else { throw RunQueries.unknownRun(run, doing: "nothing to delete") }
            guard unfinished == 0 else { throw RunQueries.unfinishedDelete(run, unfinished: unfinished) }
            try Self.recordIDFloors(db)
            try Self.deleteRuns(db, [run.rawValue])
        }
    }

    /// Deletes runs with their jobs, edges, categories, holders and attempts.
    static func deleteRuns(_ db: Database, _ runs: [Int64]) throws {
        // A few hundred runs at a time: six statements for them all, not six a run.
        for start in stride(from: 0, to: runs.count, by: 500) {
            let part = Array(runs[start..<min(start + 500, runs.count)])
            let list = Array(repeating: "?", count: part.count).joined(separator: ",")
            let arguments = StatementArguments(part)
            let jobs = "SELECT id FROM baton_jobs WHERE run IN (\(list))"
            for table in ["baton_edges", "baton_job_categories", "baton_holders", "baton_attempts"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE job IN (\(jobs))", arguments: arguments)
            }
            try db.execute(sql: "DELETE FROM baton_jobs WHERE run IN (\(list))", arguments: arguments)
            try db.execute(sql: "DELETE FROM baton_runs WHERE id IN (\(list))", arguments: arguments)
        }
    }

    /// A run's jobs and edges, as a retry plans over them.
    static func retryGraph(_ db: Database, run: Int64) throws -> ([Int64: RetryPlan.Job], [RetryPlan.Edge]) {
        var jobs: [Int64: RetryPlan.Job] = [:]
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT id, name, state, remaining, state = 'running' AND cancel_request IS NOT NULL, retry
                FROM baton_jobs WHERE run = ?
                """, arguments: [run])
        {
            jobs[try row.value(at: 0)] = RetryPlan.Job(
                name: try row.value(at: 1), state: DurableJobState(rawValue: try row.value(at: 2)) ?? .failed,
                remaining: try row.value(at: 3), isBeingCancelled: try row.value(at: 4),
                maxAttempts: RetryPolicy.stored(try row.value(at: 5))?.maxAttempts ?? 0)
        }
        let edges = try Row.fetchAll(
            db,
            sql: """
                SELECT e.dependency, e.job, e.run_regardless FROM baton_edges e JOIN baton_jobs j ON j.id = e.job
                WHERE j.run = ?
                """, arguments: [run]
        ).map {
            RetryPlan.Edge(
                dependency: try $0.value(at: 0), job: try $0.value(at: 1), runRegardless: try $0.value(at: 2))
        }
        return (jobs, edges)
    }

    /// Writes a retry's plan; returns how many jobs run again. A job that never started keeps its
    /// `notBefore` (a dependent cancelled before its start date waits for that date again); one that ran
    /// is due at once, its start date passed and its backoff begun afresh.
    static func apply(_ plan: RetryPlan, _ db: Database, run: Int64) throws -> Int {
        let restart = try db.cachedStatement(
            sql: """
                UPDATE baton_jobs SET state = ?, remaining = ?,
                    not_before = CASE WHEN attempts = 0 THEN not_before ELSE 0 END,
                    waiting = attempts = 0 AND not_before > 0, lease_owner = NULL,
                    lease_token = NULL, lease_expires = NULL, cancel_request = NULL, last_error = NULL, output = NULL,
                    finished = NULL, max_attempts = min(attempts + CASE WHEN ? > 0 THEN ? ELSE 1 END, 2147483647)
                WHERE id = ?
                """)
        for change in plan.restarted {
            try restart.execute(arguments: [
                change.state.rawValue, change.remaining, change.maxAttempts, change.maxAttempts, change.id,
            ])
        }
        for change in plan.waiting {
            try db.execute(
                sql: "UPDATE baton_jobs SET state = ?, remaining = ? WHERE id = ?",
                arguments: [change.state.rawValue, change.remaining, change.id])
        }
        guard !plan.restarted.isEmpty else { return 0 }
        try db.execute(
            sql: """
                UPDATE baton_runs SET unfinished = unfinished + ?, failed = failed - ?, cancelled = cancelled - ?,
                    finished = NULL
                WHERE id = ?
                """, arguments: [plan.restarted.count, plan.failed, plan.cancelled, run])
        return plan.restarted.count
    }
}
