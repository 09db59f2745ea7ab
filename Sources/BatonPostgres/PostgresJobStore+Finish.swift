public import BatonDurable
import Foundation
import Logging
import NIOCore
import PostgresNIO

extension PostgresJobStore {
    /// Retry-safe: a report that finished its attempt is recognised when it comes again — same
    /// token, same kind of outcome (and the same output for a success) — and answered as the first
    /// time, changing nothing. That is the store's own retry after a reply lost at `COMMIT` (the
    /// connection dropped after the server committed), or a worker's. Any other report with a token
    /// that is no longer current is rejected.
    public func finish(_ reports: [AttemptReport]) async throws -> [FinishResult] {
        guard !reports.isEmpty else { return [] }
        var results = [FinishResult](repeating: .rejected, count: reports.count)
        var successes: [Int] = []
        var others: [Int] = []
        for index in Self.firstReports(reports) {
            // A success that adds jobs goes the way of the others: statement by statement, in a transaction.
            if case .succeeded = reports[index].outcome, reports[index].additions?.jobs.isEmpty ?? true {
                successes.append(index)
            } else {
                others.append(index)
            }
        }
        if !successes.isEmpty {
            let accepted = try await finishSucceeded(successes.map { reports[$0] })
            for index in successes {
                if accepted.contains(reports[index].lease) {
                    results[index] = .accepted(.succeeded)
                } else {
                    // Asked to cancel (the common statement leaves those), or not current: told apart, and
                    // recorded, report by report.
                    others.append(index)
                }
            }
        }
        if !others.isEmpty {
            let reports = others.map { reports[$0] }
            let logger = logger
            let notify = notifySQL()
            let outcomes = try await transaction("finish") { connection in
                let now = try await self.serverTime(on: connection)
                var outcomes: [FinishResult] = []
                for report in reports {
                    outcomes.append(try await Self.finishAttempt(connection, report, now: now, logger: logger))
                }
                if outcomes.contains(where: { $0 != .rejected }) {
                    try await connection.liveQuery(PostgresQuery(unsafeSQL: "SELECT \(notify)"), logger: logger)
                }
                return outcomes
            }
            for (index, outcome) in zip(others, outcomes) { results[index] = outcome }
        }
        return results
    }

    /// The indices of the reports that are the first in `reports` with their lease. A lease reported
    /// again in the same call is rejected, as the SQLite store does (its first report ended the attempt);
    /// only a report sent again in a later call is recognised as already recorded.
    static func firstReports(_ reports: [AttemptReport]) -> [Int] {
        var seen = Set<Lease>()
        return reports.indices.filter { seen.insert(reports[$0].lease).inserted }
    }

    /// The common case in one statement: record the outputs of the attempts whose token is current and
    /// whose job was not asked to cancel (such a job ends cancelled: ``finishAttempt(_:_:now:logger:)``),
    /// free their categories, count their runs down, and make ready the dependents whose last
    /// dependency they were; notify listeners when that freed or readied anything.
    func finishSucceeded(_ reports: [AttemptReport]) async throws -> Set<Lease> {
        let accepted = try Self.acceptedLeases(try await prepared("finish", finishSucceededStatement(reports)))
        return try await recheck(reports, accepted: accepted)
    }

    /// `accepted`, with those of the other reports that an earlier send of the same call recorded after
    /// all. The statement's own look for them (`again`) reads its snapshot, taken before it waited for the
    /// row locks of a first send still in flight (abandoned after the operation timeout on a slow server,
    /// not yet committed): that first send's commit is seen only by a statement started after it.
    /// One more round trip, only when some report was not accepted.
    func recheck(_ reports: [AttemptReport], accepted: Set<Lease>) async throws -> Set<Lease> {
        let others = reports.filter { !accepted.contains($0.lease) }
        guard !others.isEmpty else { return accepted }
        let ids = others.map(\.lease.job.rawValue)
        let tokens = others.map(\.lease.token)
        let outputs = others.map { report -> ByteBuffer in
            if case .succeeded(let output) = report.outcome { return ByteBuffer(bytes: output) }
            return ByteBuffer()
        }
        let rows = try await statement(
            "finish",
            """
            SELECT j.id, r.token FROM unnest(\(ids), \(tokens), \(outputs)) AS r(id, token, output)
                JOIN jobs j ON j.id = r.id
            WHERE j.finished_by = r.token AND j.finished_report = 'succeeded' AND j.output = r.output
            """, readOnly: true)
        var result = accepted
        for row in rows {
            let (id, token) = try row.decode((Int64, Int64).self)
            result.insert(Lease(job: DurableJobID(id), token: token))
        }
        return result
    }

    /// The leases of the reports that the statement of ``finishSucceededStatement(_:)`` accepted.
    static func acceptedLeases(_ rows: [PostgresRow]) throws -> Set<Lease> {
        var accepted = Set<Lease>()
        for row in rows {
            let (id, token, _) = try row.decode((Int64, Int64, Int64).self)
            accepted.insert(Lease(job: DurableJobID(id), token: token))
        }
        return accepted
    }

    /// The statement of ``finishSucceeded(_:)``: one row (id, token, _) per accepted report.
    func finishSucceededStatement(_ reports: [AttemptReport]) -> Prepared<FinishSucceeded> {
        let ids = reports.map(\.lease.job.rawValue)
        let tokens = reports.map(\.lease.token)
        let outputs = reports.map { report -> ByteBuffer in
            if case .succeeded(let output) = report.outcome { return ByteBuffer(bytes: output) }
            return ByteBuffer()
        }
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(ids)
        bindings.append(tokens)
        bindings.append(outputs)
        bindings.append(nowOverride)
        bindings.append(channel)
        return Prepared<FinishSucceeded>(bindings: bindings)
    }

    /// The completing statement: $1 job ids, $2 lease tokens, $3 outputs, $4 now (NULL: the server's
    /// clock), $5 the wake-up channel.
    ///
    /// Written so that every table is reached from the reports by key (``PostgresPlanTests``): the
    /// reported jobs by id, their dependents through `edges` by dependency. `(state = 'running') IS TRUE`
    /// says `state = 'running'` in a form the planner does not match to the partial index of running
    /// jobs (`jobs_running`): a bitmap scan of that index reads every entry in it, and the entries of
    /// jobs that ran and finished stay there until the table is vacuumed — a 100,000-job burn-down
    /// leaves 100,000 of them.
    ///
    /// The arrays are read through sub-selects (`(SELECT $1::bigint[])`) so that the planner does not
    /// count them: planning for a call's values (the first executions of a prepared statement, and
    /// whenever the server judges its generic plan costlier), it saw 500 reports, expected one running
    /// job from statistics taken when every job was ready, and read the whole jobs table once instead of
    /// looking 500 jobs up by key — then matched every running job against every report (1.4–1.7 s a
    /// statement on 20,000 jobs). Not counted, the reports are planned as a few, as in the generic plan.
    enum FinishSucceeded: PreparedText {
        static let name = "baton_finish_succeeded_v6"
        static let sql = """
            WITH now AS MATERIALIZED (
                SELECT coalesce($4::float8, extract(epoch FROM now())::float8) AS t
            ), r AS (
                SELECT * FROM unnest((SELECT $1::bigint[]), (SELECT $2::bigint[]), (SELECT $3::bytea[]))
                    AS r(id, token, output)
            ), done AS (
                UPDATE jobs j SET state = 'succeeded', output = r.output, finished = (SELECT t FROM now), lease_owner = NULL,
                    lease_token = NULL, lease_expires = NULL, finished_by = r.token, finished_report = 'succeeded',
                    finished_result = 'succeeded'
                FROM r WHERE j.id = r.id AND j.lease_token = r.token AND (j.state = 'running') IS TRUE
                    AND j.cancel_request IS NULL
                RETURNING j.id, j.run, j.has_categories, r.token
            ), again AS (
                -- Reports that already finished their attempt (the statement's snapshot predates `done`).
                SELECT j.id, r.token FROM jobs j JOIN r ON j.id = r.id
                WHERE j.finished_by = r.token AND j.finished_report = 'succeeded' AND j.output = r.output
            ), freed AS (
                DELETE FROM holders h USING done WHERE done.has_categories AND h.job = done.id RETURNING h.job
            ), counts AS (
                SELECT run, count(*)::int AS n FROM done GROUP BY run
            ), closed AS (
                UPDATE runs u SET unfinished = u.unfinished - counts.n,
                    finished = CASE WHEN u.unfinished - counts.n = 0 THEN (SELECT t FROM now) ELSE u.finished END
                FROM counts WHERE u.id = counts.run RETURNING u.id
            ), deps AS (
                SELECT e.job, count(*)::int AS n FROM edges e
                WHERE e.dependency = ANY(ARRAY(SELECT id FROM done)) GROUP BY e.job
            ), readied AS (
                -- Whether a dependent is pending is read from the row as it is when it is updated, not in the
                -- WHERE (the statement's snapshot): a retry that made a cancelled dependent pending again and
                -- committed while this statement waited for its job's lock would otherwise be missed, and the
                -- dependent would wait for ever.
                UPDATE jobs d SET remaining = CASE WHEN d.state = 'pending' THEN d.remaining - deps.n ELSE d.remaining END,
                    state = CASE WHEN d.state = 'pending' AND d.remaining - deps.n = 0 THEN 'ready' ELSE d.state END
                FROM deps WHERE d.id = deps.job
                RETURNING d.state
            ), woken AS (
                SELECT pg_notify($5, '') FROM (SELECT 1) one
                WHERE EXISTS (SELECT 1 FROM readied WHERE state = 'ready') OR EXISTS (SELECT 1 FROM freed)
            )
            SELECT id, token, (SELECT count(*) FROM closed) + (SELECT count(*) FROM woken) FROM done
            UNION ALL
            SELECT id, token, 0 FROM again
            """
    }

    /// ``finish(_:)`` and then ``claim(worker:kinds:limit:lease:)``, for successes (the common case) in
    /// one trip: the completions' statement and then the claiming statement on the same connection,
    /// then the confirmation of the claim's commit. The server answers in order, so the claim's answer
    /// also says that the completions committed (a connection cut before it makes both run again; the
    /// completions are then recognised as already recorded). Other reports go as ``finish(_:)`` sends
    /// them, followed by a claim.
    public func finish(
        _ reports: [AttemptReport], thenClaim limit: Int, worker: String, kinds: [String], lease: Duration
    ) async throws -> (results: [FinishResult], claimed: [ClaimedJob]) {
        let allSucceeded = reports.allSatisfy { report in
            if case .succeeded = report.outcome { return report.additions?.jobs.isEmpty ?? true }
            return false
        }
        guard limit > 0, !kinds.isEmpty, !reports.isEmpty, allSucceeded else {
            let results = try await finish(reports)
            guard limit > 0 else { return (results, []) }
            return (results, try await claim(worker: worker, kinds: kinds, limit: limit, lease: lease))
        }
        try StoredText.checkWorker(worker)
        let kinds = Array(Set(kinds)).sorted()
        let finishStatement = finishSucceededStatement(Self.firstReports(reports).map { reports[$0] })
        let claimStatement = Self.claimStatement(
            worker: worker, kinds: kinds, limit: limit, lease: lease, now: nowOverride, channel: channel)
        let logger = logger
        let (finished, claimRows) = try await retrying("finish") { [client, faults] in
            let rows = try await client.withConnection { connection in
                try await Self.discardingIfBroken(connection) {
                    let finished = try await connection.rows(of: finishStatement, logger: logger)
                    let claimed = try await connection.rows(of: claimStatement, logger: logger)
                    try await Self.confirmCommitted(on: connection, logger: logger)
                    return (finished, claimed)
                }
            }
            try faults.afterCommit("finish")
            return rows
        }
        let accepted = try await recheck(reports, accepted: try Self.acceptedLeases(finished))
        var results = [FinishResult](repeating: .rejected, count: reports.count)
        let first = Self.firstReports(reports)
        for index in first where accepted.contains(reports[index].lease) {
            results[index] = .accepted(.succeeded)
        }
        let claimed = try await completeClaim(claimRows, worker: worker, kinds: kinds, limit: limit, lease: lease)
        // Those the statement left (asked to cancel, or not current), report by report. Should that fail,
        // the jobs just claimed go back, rather than wait out their leases.
        let left = first.filter { !accepted.contains(reports[$0].lease) }
        if !left.isEmpty {
            let leftResults: [FinishResult]
            do {
                leftResults = try await finish(left.map { reports[$0] })
            } catch {
                try? await release(claimed.map(\.lease))
                throw error
            }
            for (index, result) in zip(left, leftResults) { results[index] = result }
        }
        return (results, claimed)
    }

    static func finishAttempt(
        _ connection: PostgresConnection, _ report: AttemptReport, now: Double, logger: Logger
    ) async throws -> FinishResult {
        let id = report.lease.job.rawValue
        let token = report.lease.token
        let kind: String
        var output: Data?
        switch report.outcome {
        case .succeeded(let data): (kind, output) = ("succeeded", data)
        case .failed: kind = "failed"
        case .cancelled: kind = "cancelled"
        case .snoozed: kind = "snoozed"
        }
        let rows = try await connection.liveQuery(
            """
            SELECT attempts, max_attempts, retry, cancel_request, lease_owner FROM jobs
            WHERE id = \(id) AND state = 'running' AND lease_token = \(token) FOR UPDATE
            """, logger: logger
        ).collect()
        guard let row = rows.first else {
            // The same report again, after the first one was committed (a reply lost at COMMIT): answered
            // as then, even when later attempts have ended since. A success whose added jobs were refused
            // failed its attempt and kept no output, so its output cannot be compared: the token and the
            // kind of report identify it — in the attempt history, where such a success is a failed attempt
            // whose error says so (a later attempt's end replaces the job's `finished_by`).
            let earlier = try await connection.liveQuery(
                """
                SELECT result FROM attempts WHERE job = \(id) AND token = \(token)
                    AND (outcome = \(kind) OR (\(kind) = 'succeeded' AND outcome = 'failed'
                        AND left(error, length(\(DurableError.addedJobsRefused))) = \(DurableError.addedJobsRefused))
                        OR (\(kind) IN ('snoozed', 'succeeded') AND outcome = 'cancelled'))
                UNION ALL
                SELECT finished_result FROM jobs WHERE id = \(id) AND finished_by = \(token)
                    AND finished_report = \(kind)
                    AND (\(output == nil) OR finished_result <> 'succeeded' OR output = \(output ?? Data()))
                LIMIT 1
                """, logger: logger
            ).collect().first?.decode(String?.self)
            return earlier.flatMap { $0 }.flatMap(DurableJobState.init(rawValue:)).map { .accepted($0) } ?? .rejected
        }
        let (attempts, maxAttempts, retry, cancelRequest, owner) = try row.decode(
            (Int, Int, String, String?, String?).self)
        try await connection.liveQuery("DELETE FROM holders WHERE job = \(id)", logger: logger)
        let result = try await finishAttempt(
            connection, report, attempts: attempts, maxAttempts: maxAttempts, retry: retry,
            cancelRequest: cancelRequest, now: now, logger: logger)
        if case .accepted(let state) = result {
            try await connection.liveQuery(
                """
                UPDATE jobs SET finished_by = \(token), finished_report = \(kind), finished_result = \(state.rawValue)
                WHERE id = \(id)
                """, logger: logger)
            // A success whose added jobs were refused failed its attempt (its job failed, or is retried):
            // recorded as a failed attempt, with the job's last error saying why; one asked to cancel that
            // meant to add jobs, as cancelled.
            if kind != "succeeded" || state != .succeeded {
                // (A snooze of a job asked to cancel ended it cancelled: the job's last error says why.)
                let error: String? =
                    switch report.outcome {
                    case .failed(let message, _): StoredText.message(message)
                    case .cancelled(let reason): StoredText.message(reason)
                    case .snoozed(let wait): state == .ready ? Snooze(for: Snooze.storable(wait)).description : nil
                    case .succeeded: nil
                    }
                let outcome =
                    switch kind {
                    case "succeeded": state == .cancelled ? "cancelled" : "failed"
                    case "snoozed": state == .ready ? "snoozed" : "cancelled"
                    default: kind
                    }
                try await connection.liveQuery(
                    """
                    INSERT INTO attempts (job, token, attempt, worker, started, ended, outcome, result, error)
                    VALUES (\(id), \(token), \(attempts), \(owner), (SELECT started FROM jobs WHERE id = \(id)),
                        \(now), \(outcome), \(state.rawValue),
                        COALESCE(\(error), (SELECT last_error FROM jobs WHERE id = \(id))))
                    ON CONFLICT DO NOTHING
                    """, logger: logger)
            }
        }
        return result
    }

    /// Records an attempt whose lease is current (its row locked, its categories freed).
    private static func finishAttempt(
        _ connection: PostgresConnection, _ report: AttemptReport, attempts: Int, maxAttempts: Int, retry: String,
        cancelRequest: String?, now: Double, logger: Logger
    ) async throws -> FinishResult {
        let id = report.lease.job.rawValue
        switch report.outcome {
        case .succeeded(let output):
            // A job asked to cancel (itself or its run) ends cancelled, however its attempt ended, as a
            // failure or a snooze of it does: its dependents are cancelled rather than run, it adds nothing,
            // and a retry runs it again. (Its body may have finished before its worker heard of the request.)
            if let cancelRequest {
                try await finishJob(
                    connection, id: id, state: .cancelled, error: cancelRequest, output: nil, now: now,
                    logger: logger)
                return .accepted(.cancelled)
            }
            if let additions = report.additions, !additions.jobs.isEmpty {
                do {
                    try await addJobs(connection, additions, by: id, now: now, logger: logger)
                } catch let error as DurableError {
                    // Jobs that cannot be added fail the job that added them, saying why; nothing is added
                    // (the plan is checked before anything is written). A conflict of the moment is a
                    // retryable failure, which the job's retry policy may try again; a graph that cannot
                    // be, a failure at once.
                    let message = DurableError.addedJobsRefused + error.message
                    guard error.code == .conflict else {
                        try await finishJob(
                            connection, id: id, state: .failed, error: message, output: nil, now: now,
                            logger: logger)
                        return .accepted(.failed)
                    }
                    return try await finishAttempt(
                        connection,
                        AttemptReport(lease: report.lease, outcome: .failed(message: message, retryable: true)),
                        attempts: attempts, maxAttempts: maxAttempts, retry: retry, cancelRequest: cancelRequest,
                        now: now, logger: logger)
                }
            }
            try await finishJob(
                connection, id: id, state: .succeeded, error: nil, output: output, now: now, logger: logger)
            return .accepted(.succeeded)
        case .cancelled(let reason):
            try await finishJob(
                connection, id: id, state: .cancelled, error: StoredText.message(reason), output: nil, now: now,
                logger: logger)
            return .accepted(.cancelled)
        case .failed(let message, let retryable):
            let message = StoredText.message(message)
            if let cancelRequest {
                try await finishJob(
                    connection, id: id, state: .cancelled, error: cancelRequest, output: nil, now: now, logger: logger)
                return .accepted(.cancelled)
            }
            guard retryable, attempts < maxAttempts else {
                try await finishJob(
                    connection, id: id, state: .failed, error: message, output: nil, now: now, logger: logger)
                return .accepted(.failed)
            }
            guard let policy = RetryPolicy.stored(retry) else {
                // A damaged row: the job fails with its own error and the damage named, not a report that
                // fails for ever (and the job left running).
                try await finishJob(
                    connection, id: id, state: .failed, error: message + RetryPolicy.unreadable, output: nil,
                    now: now, logger: logger)
                return .accepted(.failed)
            }
            // Attempts that spent none of the policy's raised the stored maximum by as many: snoozes (one
            // each), and the attempts before a retry of the job (a retry gives it the policy's attempts again).
            let uncounted = max(0, maxAttempts - policy.maxAttempts)
            let wait = policy.wait(beforeAttempt: max(1, attempts - uncounted) + 1)
            // A retry that waits for its time waits out of claims' way (`waiting`): see `due` and `promoted`
            // (claims).
            try await connection.liveQuery(
                """
                UPDATE jobs SET state = 'ready', not_before = \(now + wait.seconds), waiting = \(wait > .zero),
                    lease_owner = NULL, lease_token = NULL, lease_expires = NULL, last_error = \(message)
                WHERE id = \(id)
                """, logger: logger)
            return .accepted(.ready)
        case .snoozed(let wait):
            if let cancelRequest {
                try await finishJob(
                    connection, id: id, state: .cancelled, error: cancelRequest, output: nil, now: now, logger: logger)
                return .accepted(.cancelled)
            }
            let wait = Snooze.storable(wait)
            try await connection.liveQuery(
                """
                UPDATE jobs SET state = 'ready', not_before = \(now + wait.seconds), waiting = \(wait > .zero),
                    max_attempts = CASE WHEN max_attempts < 2147483647 THEN max_attempts + 1 ELSE max_attempts END,
                    lease_owner = NULL, lease_token = NULL, lease_expires = NULL
                WHERE id = \(id)
                """, logger: logger)
            return .accepted(.ready)
        }
    }

    /// Moves a job to a final state, then its dependents: those whose last dependency this was become
    /// ready; if it did not succeed, those that do not run regardless are cancelled, transitively.
    ///
    /// The cascade goes a level at a time, each level in two statements whatever its width: the
    /// dependents that run regardless are counted down, and the others are cancelled, each with the
    /// name of a dependency that stopped it. It went a job at a time before, three statements each: a
    /// failure ahead of 4,000 dependents took 12,000 round trips (18 s in a debug build, over 300 s
    /// under ThreadSanitizer on a loaded machine), with the run's rows locked throughout.
    static func finishJob(
        _ connection: PostgresConnection, id: Int64, state: DurableJobState, error: String?, output: Data?,
        now: Double, logger: Logger
    ) async throws {
        let row =
            try await connection.liveQuery(
                """
                UPDATE jobs SET state = \(state.rawValue), last_error = COALESCE(\(error), last_error), output = \(output),
                    finished = \(now), lease_owner = NULL, lease_token = NULL, lease_expires = NULL
                WHERE id = \(id) RETURNING run
                """, logger: logger
            ).collect().first
        guard let run = try row?.decode(Int64.self) else { return }
        if state == .succeeded {
            try await connection.liveQuery(
                """
                UPDATE jobs d SET remaining = d.remaining - 1,
                    state = CASE WHEN d.remaining = 1 THEN 'ready' ELSE d.state END
                FROM edges e WHERE e.dependency = \(id) AND d.id = e.job AND d.state = 'pending'
                """, logger: logger)
        }
        // The run is counted down once, after the whole cascade: one update of its row per finished job
        // made PostgreSQL walk every earlier version of that row (all of one transaction) at each update,
        // and a cascade through thousands of dependents slowed down as it went.
        var cancelled = 0
        var frontier: [Int64] = state == .succeeded ? [] : [id]
        var ending = state == .failed ? "' failed" : "' was cancelled"
        while !frontier.isEmpty {
            // Cancelled first: a dependent that waits regardless on one job of the level and not on
            // another is cancelled, as a job at a time did in either order (it could not become ready
            // while the other was unfinished).
            let stopped = try await connection.liveQuery(
                """
                UPDATE jobs d SET state = 'cancelled', last_error = 'dependency ''' || c.name || \(ending),
                    output = NULL, finished = \(now), lease_owner = NULL, lease_token = NULL, lease_expires = NULL
                FROM (
                    SELECT DISTINCT ON (e.job) e.job, p.name FROM edges e JOIN jobs p ON p.id = e.dependency
                    WHERE e.dependency = ANY(\(frontier)) AND NOT e.run_regardless ORDER BY e.job, e.dependency
                ) c
                WHERE d.id = c.job AND d.state = 'pending'
                RETURNING d.id
                """, logger: logger
            ).collect()
            try await connection.liveQuery(
                """
                UPDATE jobs d SET remaining = d.remaining - c.n,
                    state = CASE WHEN d.remaining = c.n THEN 'ready' ELSE d.state END
                FROM (
                    SELECT job, count(*)::integer AS n FROM edges
                    WHERE dependency = ANY(\(frontier)) AND run_regardless GROUP BY job
                ) c
                WHERE d.id = c.job AND d.state = 'pending'
                """, logger: logger)
            frontier = try stopped.map { try $0.decode(Int64.self) }
            cancelled += frontier.count
            ending = "' was cancelled"
        }
        let finished = 1 + cancelled
        let failed = state == .failed ? 1 : 0
        let cancelledCount = cancelled + (state == .cancelled ? 1 : 0)
        try await connection.liveQuery(
            """
            UPDATE runs SET unfinished = unfinished - \(finished), failed = failed + \(failed),
                cancelled = cancelled + \(cancelledCount),
                finished = CASE WHEN unfinished = \(finished) THEN \(now) ELSE finished END
            WHERE id = \(run)
            """, logger: logger)
    }

    public func release(_ leases: [Lease]) async throws {
        guard !leases.isEmpty else { return }
        let logger = logger
        let notify = notifySQL()
        try await transaction("release") { connection in
            let now = try await self.serverTime(on: connection)
            for lease in leases {
                let rows = try await connection.liveQuery(
                    """
                    SELECT cancel_request FROM jobs
                    WHERE id = \(lease.job.rawValue) AND state = 'running' AND lease_token = \(lease.token) FOR UPDATE
                    """, logger: logger
                ).collect()
                guard let row = rows.first else { continue }
                try await connection.liveQuery("DELETE FROM holders WHERE job = \(lease.job.rawValue)", logger: logger)
                if let reason = try row.decode(String?.self) {
                    try await Self.finishJob(
                        connection, id: lease.job.rawValue, state: .cancelled, error: reason, output: nil, now: now,
                        logger: logger)
                } else {
                    try await connection.liveQuery(
                        """
                        UPDATE jobs SET state = 'ready', attempts = attempts - 1, lease_owner = NULL, lease_token = NULL,
                            lease_expires = NULL WHERE id = \(lease.job.rawValue)
                        """, logger: logger)
                }
            }
            try await connection.liveQuery(PostgresQuery(unsafeSQL: "SELECT \(notify)"), logger: logger)
        }
    }

    public func cancel(run: DurableRunID, reason: String) async throws {
        let reason = StoredText.message(reason)
        let logger = logger
        let notify = notifySQL()
        try await transaction("cancel") { connection in
            let now = try await self.serverTime(on: connection)
            let exists = try await connection.liveQuery("SELECT 1 FROM runs WHERE id = \(run.rawValue)", logger: logger)
                .collect()
            guard !exists.isEmpty else {
                throw DurableError(
                    code: .unknownRun, message: "\(run) is not in the store (pruned?); nothing to cancel.")
            }
            // Every unfinished job of the run is locked first, in one statement, waiting for those that
            // others hold: a job being claimed is then seen as the claim left it (running), not as this
            // statement's snapshot had it (ready). Asking running jobs to stop before locking the waiting
            // ones missed it: the request skipped it (still ready), and the lock, taken once the claim
            // committed, dropped it (no longer ready) — it ran on, uncancelled. Locked in id order, as
            // dependencies usually come before their dependents, so a completion holding its job and
            // updating its dependents does not wait on this in a cycle (one that does is a deadlock, and
            // both are retried).
            let unfinished = try await connection.liveQuery(
                """
                SELECT id, state, idx FROM jobs WHERE run = \(run.rawValue) AND state IN ('pending', 'ready', 'running')
                ORDER BY id FOR UPDATE
                """, logger: logger
            ).collect().map { try $0.decode((Int64, String, Int).self) }
            let running = unfinished.filter { $0.1 == "running" }.map(\.0)
            if !running.isEmpty {
                try await connection.liveQuery(
                    "UPDATE jobs SET cancel_request = \(reason) WHERE id = ANY(\(running)) AND cancel_request IS NULL",
                    logger: logger)
            }
            // In graph order, as before (and as SQLite does): a job cancelled by an earlier one's cascade
            // keeps that reason.
            let waiting = unfinished.filter { $0.1 != "running" }.sorted { $0.2 < $1.2 }.map(\.0)
            var waitingNow = waiting
            while !waitingNow.isEmpty {
                for job in waitingNow {
                    // An earlier job's cascade may have cancelled it already.
                    let state = try await connection.liveQuery(
                        "SELECT state FROM jobs WHERE id = \(job)", logger: logger
                    )
                    .collect().first?.decode(String.self)
                    guard state == "pending" || state == "ready" else { continue }
                    try await Self.finishJob(
                        connection, id: job, state: .cancelled, error: reason, output: nil, now: now, logger: logger)
                }
                // Jobs that a completion added while this waited for its job's lock (invisible to the
                // first statement's snapshot): read again until none is left.
                waitingNow = try await connection.liveQuery(
                    """
                    SELECT id FROM jobs WHERE run = \(run.rawValue) AND state IN ('pending', 'ready') ORDER BY idx FOR UPDATE
                    """, logger: logger
                ).collect().map { try $0.decode(Int64.self) }
            }
            try await connection.liveQuery(PostgresQuery(unsafeSQL: "SELECT \(notify)"), logger: logger)
        }
    }

    public func cancel(job: DurableJobID, reason: String) async throws {
        let reason = StoredText.message(reason)
        let logger = logger
        let notify = notifySQL()
        try await transaction("cancel") { connection in
            let now = try await self.serverTime(on: connection)
            guard
                let state = try await connection.liveQuery(
                    "SELECT state FROM jobs WHERE id = \(job.rawValue) FOR UPDATE", logger: logger
                ).collect().first?.decode(String.self)
            else {
                throw DurableError(
                    code: .unknownJob, message: "\(job) is not in the store (pruned?); nothing to cancel.")
            }
            switch DurableJobState(rawValue: state) {
            case .pending, .ready:
                try await Self.finishJob(
                    connection, id: job.rawValue, state: .cancelled, error: reason, output: nil, now: now,
                    logger: logger)
            case .running:
                try await connection.liveQuery(
                    "UPDATE jobs SET cancel_request = \(reason) WHERE id = \(job.rawValue) AND cancel_request IS NULL",
                    logger: logger)
            default: break
            }
            try await connection.liveQuery(PostgresQuery(unsafeSQL: "SELECT \(notify)"), logger: logger)
        }
    }

    /// The names of run `run`'s jobs that the names of added jobs can meet: each of `names`, each
    /// numbered form `name #k` of them (``RunAddition``'s rule for a name that is taken), and every name
    /// beyond ASCII, chosen on the server through the run's name indexes (`jobs_run_name`, byte order,
    /// and `jobs_run_wide_name`), so an addition reads what it adds, not what the run holds: a crawler
    /// adding jobs one by one to a large run read every name of the run at each addition.
    static func takenNames(
        _ connection: PostgresConnection, run: Int64, among names: [String], logger: Logger
    ) async throws -> Set<String> {
        let distinct = Array(Set(names))
        guard !distinct.isEmpty else { return [] }
        // PostgreSQL compares text by its bytes, Swift by its characters (two spellings of "é" are one
        // name to a submission's check): with a name beyond ASCII, every name of the run is compared here;
        // otherwise the run's names beyond ASCII are too (the Kelvin sign is the letter K to Swift).
        guard names.allSatisfy({ $0.utf8.allSatisfy { $0 < 0x80 } }) else {
            return Set(
                try await connection.liveQuery("SELECT name FROM jobs WHERE run = \(run)", logger: logger).collect()
                    .map { try $0.decode(String.self) })
        }
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(run)
        bindings.append(distinct)
        return Set(
            try await connection.liveQuery(PostgresQuery(unsafeSQL: takenNamesSQL, binds: bindings), logger: logger)
                .collect().map { try $0.decode(String.self) })
    }

    /// The statement of ``takenNames(_:run:among:logger:)`` for names in ASCII: $1 the run, $2 the added
    /// names. The index holds each name's first 400 characters (`jobs_run_name`; a btree entry has room
    /// for 2,704 bytes, and names have no limit): a name is found by its prefix and then compared whole.
    /// A numbered form of `n` sorts, byte by byte, from "n #" to just before "n $" ("$" follows "#"), and
    /// its prefix between those of "n #" and "n $", both included (cutting two strings short keeps their
    /// order). `OFFSET 0` keeps each name's look a look of its own into the index (joined, the planner
    /// hashed every name of the run against the added ones). ``PostgresClaimKindsTests`` checks what it
    /// reads.
    static let takenNamesSQL = """
        SELECT j.name FROM unnest($2::text[]) AS n(name), LATERAL (
            SELECT name FROM jobs
            WHERE run = $1 AND substr(name, 1, 400) = substr(n.name, 1, 400) AND name = n.name
            OFFSET 0
        ) j
        UNION
        SELECT j.name FROM unnest($2::text[]) AS n(name), LATERAL (
            SELECT name FROM jobs
            WHERE run = $1 AND substr(name, 1, 400) ~>=~ substr(n.name || ' #', 1, 400)
                AND substr(name, 1, 400) ~<=~ substr(n.name || ' $', 1, 400)
                AND name ~>=~ (n.name || ' #') AND name ~<~ (n.name || ' $')
                AND regexp_replace(name, ' #[0-9]+$', '') = n.name
            OFFSET 0
        ) j
        UNION
        SELECT name FROM jobs WHERE run = $1 AND octet_length(name) <> length(name)
        """

    /// Stores the jobs that job `adder` adds to its run (before its success is recorded): they, their
    /// edges and categories; the adder's dependents that wait for what it adds wait for them too.
    /// Validated before anything is written.
    static func addJobs(
        _ connection: PostgresConnection, _ addition: RunAddition, by adder: Int64, now: Double, logger: Logger
    ) async throws {
        try addition.validate()
        guard
            let row = try await connection.liveQuery(
                "SELECT run, name FROM jobs WHERE id = \(adder)", logger: logger
            ).collect().first
        else { return }
        let (run, adderName) = try row.decode((Int64, String).self)
        // The run is locked while it grows: two of its jobs adding at once pick names and places in turn.
        try await connection.liveQuery("SELECT 1 FROM runs WHERE id = \(run) FOR UPDATE", logger: logger)
        let taken = try await takenNames(connection, run: run, among: addition.jobs.map(\.name), logger: logger)
        var existing: [Int64: AdditionPlan.Existing] = [:]
        var downstream = Set<Int64>()
        if !addition.existingDependencies.isEmpty {
            let ids = addition.existingDependencies.map(\.rawValue)
            // Locked, so that none is claimed (and its completion's statement begun, blind to the edges
            // added here) before this transaction commits.
            for row in try await connection.liveQuery(
                "SELECT id, run, name, state FROM jobs WHERE id = ANY(\(ids)) ORDER BY id FOR UPDATE", logger: logger
            ).collect() {
                let (id, run, name, state) = try row.decode((Int64, Int64, String, String).self)
                existing[id] = AdditionPlan.Existing(
                    run: run, name: name, state: DurableJobState(rawValue: state) ?? .failed)
            }
            downstream = Set(
                try await connection.liveQuery(
                    """
                    WITH RECURSIVE down(id) AS (
                        SELECT job FROM edges WHERE dependency = \(adder)
                        UNION SELECT e.job FROM edges e JOIN down ON e.dependency = down.id
                    ) SELECT id FROM down
                    """, logger: logger
                ).collect().map { try $0.decode(Int64.self) })
        }
        let groupDependents = try await connection.liveQuery(
            """
            SELECT e.job, e.run_regardless FROM edges e JOIN jobs j ON j.id = e.job
            WHERE e.dependency = \(adder) AND e.includes_added
            """, logger: logger
        ).collect().map { row in
            let (id, regardless) = try row.decode((Int64, Bool).self)
            return AdditionPlan.GroupDependent(id: id, runRegardless: regardless)
        }
        let plan = try AdditionPlan.make(
            addition, adder: adder, adderName: adderName, run: run, taken: taken, existing: existing,
            downstream: downstream, groupDependents: groupDependents)
        let jobs = addition.jobs
        let first =
            (try await connection.liveQuery("SELECT max(idx) FROM jobs WHERE run = \(run)", logger: logger).collect()
            .first?.decode(Int?.self) ?? nil).map { $0 + 1 } ?? 0
        // Identities drawn in job order (older means added first), then every row in a few statements
        // whatever the number of jobs: one statement per row kept a crawler's addition of 10,000 jobs
        // from committing within the operation timeout.
        let ids = try await connection.liveQuery(
            "SELECT nextval(pg_get_serial_sequence('jobs', 'id')) FROM generate_series(1, \(jobs.count))",
            logger: logger
        ).collect().map { try $0.decode(Int64.self) }.sorted()
        let retries = try storedRetries(of: jobs)
        try await connection.liveQuery(
            """
            INSERT INTO jobs (id, run, idx, name, kind, state, input, input_from, remaining, max_attempts, retry,
                priority, timeout, has_categories, not_before, waiting, added_by)
            SELECT t.id, \(run), t.idx, t.name, t.kind, CASE WHEN t.remaining = 0 THEN 'ready' ELSE 'pending' END,
                CASE WHEN t.has_input THEN t.input END, NULLIF(t.input_from, -1), t.remaining, t.max_attempts,
                t.retry, t.priority, NULLIF(t.timeout, -1), t.has_categories, t.not_before, t.not_before <> 0,
                \(adder)
            FROM unnest(\(ids), \(jobs.indices.map { Int64(first + $0) }), \(plan.names), \(jobs.map(\.kind)),
                \(jobs.map { ByteBuffer(bytes: $0.input ?? Data()) }), \(jobs.map { $0.input != nil }),
                \(jobs.map { job in job.inputFrom.map { ids[$0] } ?? -1 }), \(plan.remaining.map { Int32($0) }),
                \(jobs.map { Int32($0.retry.maxAttempts) }), \(retries), \(jobs.map { Int32($0.priority) }),
                \(jobs.map { $0.timeout?.seconds ?? -1 }), \(jobs.map { !$0.categories.isEmpty }),
                \(jobs.map { $0.notBefore?.storeTime ?? 0 }))
            AS t(id, idx, name, kind, input, has_input, input_from, remaining, max_attempts, retry, priority,
                timeout, has_categories, not_before)
            """, logger: logger)
        var links = LinkColumns(jobs) { ids[$0] }
        for edge in plan.existingEdges {
            links.appendEdge(from: edge.dependency, to: ids[edge.job], regardless: false, includesAdded: false)
        }
        for dependent in plan.groupDependents {
            for id in ids {
                links.appendEdge(from: id, to: dependent.id, regardless: dependent.runRegardless, includesAdded: true)
            }
        }
        if !links.edgeFrom.isEmpty {
            try await connection.liveQuery(
                """
                INSERT INTO edges (dependency, job, run_regardless, includes_added)
                SELECT * FROM unnest(
                    \(links.edgeFrom), \(links.edgeTo), \(links.edgeRegardless), \(links.edgeIncludesAdded))
                ON CONFLICT DO NOTHING
                """, logger: logger)
        }
        if !links.categoryJob.isEmpty {
            try await connection.liveQuery(
                """
                INSERT INTO job_categories (job, category, max_holders)
                SELECT * FROM unnest(\(links.categoryJob), \(links.categoryName), \(links.categoryLimit))
                """, logger: logger)
        }
        // Every dependent that waits for what the adder adds gets the edges (one cancelled now waits for
        // them when its run is retried); one that waits counts them now.
        if !plan.groupDependents.isEmpty {
            try await connection.liveQuery(
                """
                UPDATE jobs SET remaining = remaining + \(ids.count)
                WHERE id = ANY(\(plan.groupDependents.map(\.id))) AND state = 'pending'
                """, logger: logger)
        }
        try await connection.liveQuery(
            """
            UPDATE runs SET unfinished = unfinished + \(ids.count), jobs = jobs + \(ids.count), finished = NULL
            WHERE id = \(run)
            """, logger: logger)
        for (index, reason) in plan.cancelled {
            try await finishJob(
                connection, id: ids[index], state: .cancelled, error: reason, output: nil, now: now, logger: logger)
        }
    }
}
