public import BatonDurable
import Foundation
import Logging
import NIOCore
import PostgresNIO

extension PostgresJobStore {
    /// Stores the graph in one transaction. Retry-safe: the call carries a submission id of its own, so
    /// when a reply lost after the commit makes the store send it again, the run stored the first time
    /// is returned, never a second copy. Quick to start: the jobs are claimable before the commit is
    /// flushed, and the call returns only once it is.
    public func submit(_ graph: GraphSpec, uniqueKey: String?) async throws -> SubmittedRun {
        try await submit(graph, uniqueKey: uniqueKey, submission: UUID().uuidString)
    }

    /// Stores the graph under `submission`, an identity of this call drawn by the caller.
    ///
    /// **Retry-safe.** A reply lost after the server committed (the connection dropped at `COMMIT`)
    /// makes the store send the statement again; the run inserted the first time has this
    /// submission, so the second insert does nothing and the first run is returned — never a
    /// second copy of the graph, with or without a unique key.
    ///
    /// **Visible before it is durable, acknowledged only once it is.** The inserting statement
    /// commits without waiting for the WAL flush (`synchronous_commit = off` for that transaction),
    /// so its `NOTIFY` goes out and workers can claim its jobs while the flush runs. The call then
    /// runs a small synchronous transaction that rewrites the run's row (a WAL-logged write, so its
    /// commit flushes the WAL up to and past the run's), and returns only after it, having checked
    /// that the run is still there — which also confirms the insert's commit, so the insert is not
    /// awaited by a round trip of its own: a caller that gets an answer has a durable run, as before.
    /// What a server crash (or a connection cut before the insert committed) can do in that window is
    /// lose a run whose jobs already started — the store then submits it again; the store's guarantees
    /// hold (its completions were never accepted: they would have flushed it).
    ///
    /// `general`: store the graph with the statement for any graph even when it has no dependencies,
    /// categories or inputs taken from other jobs (the tests compare the two statements' rows).
    func submit(
        _ graph: GraphSpec, uniqueKey: String?, submission: String, general: Bool = false
    ) async throws -> SubmittedRun {
        try graph.validate()
        try StoredText.checkUniqueKey(uniqueKey)
        let now = clock.now().storeTime
        let jobs = graph.jobs
        // Encoded once per distinct policy: a graph's jobs mostly share one, and so do a program's graphs
        // (encoding one took 0.05 ms, a tenth of a one-job submission's time before its insert).
        var encodedRetries = retryTexts.withLock { $0 }
        var encoder: JSONEncoder?
        var learned = false
        let retries = try jobs.map { job in
            if let text = encodedRetries[job.retry] { return text }
            let coder = encoder ?? JSONEncoder()
            encoder = coder
            let text = String(decoding: try coder.encode(job.retry), as: UTF8.self)
            encodedRetries[job.retry] = text
            learned = true
            return text
        }
        if learned {
            // A program uses a handful of policies; one that makes new ones per graph starts the cache over.
            let dropped = retryTexts.withLock { cache in
                let old = cache
                cache = encodedRetries.count <= 64 ? encodedRetries : [:]
                return old
            }
            _ = dropped  // released outside the lock
        }
        let carrier = TraceCarrierCoding.encode(graph.carrierToStore())
        let channel = channel
        var remaining: [Int32] = []
        var inputs: [ByteBuffer] = []
        var hasInput: [Bool] = []
        var inputFrom: [Int32] = []
        var timeouts: [Double] = []
        var notBefore: [Double] = []
        var edgeFrom: [Int32] = []
        var edgeTo: [Int32] = []
        var edgeRegardless: [Bool] = []
        var categoryJob: [Int32] = []
        var categoryName: [String] = []
        var categoryLimit: [Int32] = []
        for (index, job) in jobs.enumerated() {
            let dependencies = job.allDependencies
            remaining.append(Int32(Set(dependencies.map(\.index)).count))
            inputs.append(ByteBuffer(bytes: job.input ?? Data()))
            hasInput.append(job.input != nil)
            inputFrom.append(job.inputFrom.map { Int32($0) } ?? -1)
            timeouts.append(job.timeout?.storeSeconds ?? -1)
            notBefore.append(job.notBefore?.storeTime ?? 0)
            var seen = Set<Int>()
            for dependency in dependencies where seen.insert(dependency.index).inserted {
                edgeFrom.append(Int32(dependency.index))
                edgeTo.append(Int32(index))
                edgeRegardless.append(dependency.runRegardless)
            }
            var seenCategories = Set<String>()
            for category in job.categories where seenCategories.insert(category.name).inserted {
                categoryJob.append(Int32(index))
                categoryName.append(category.name)
                categoryLimit.append(Int32(category.limit))
            }
        }
        // Independent jobs (no dependency, category or input from another job) are stored by a lighter
        // statement: no job identities drawn ahead, no edges or categories to insert (0.1 ms less of the
        // server's time for a one-job graph, a third of its insert).
        let independent =
            !general && !jobs.isEmpty && edgeFrom.isEmpty && categoryJob.isEmpty && inputFrom.allSatisfy { $0 < 0 }
        let names = jobs.map(\.name)
        let kinds = jobs.map(\.kind)
        let indexes = (0..<jobs.count).map { Int32($0) }
        let priorities = jobs.map { Int32($0.priority) }
        let maxAttempts = jobs.map { Int32($0.retry.maxAttempts) }
        let hasCategories = jobs.map { !$0.categories.isEmpty }
        // Jobs due now of a graph of independent jobs are claimed in the insert itself for idle workers
        // of this store, when some have offered room (``PostgresHandoff``).
        // Failing that, for one idle worker of another store, as far as a notification can carry them.
        let ticket =
            independent
            ? handoff.reserve(
                kinds: kinds, priorities: priorities, eligible: notBefore.map { $0 <= now },
                sizes: jobs.map { $0.name.utf8.count + $0.kind.utf8.count + ($0.input?.count ?? 0) * 4 / 3 })
            : nil
        defer {
            // Nothing if the jobs were handed over. Else the workers' claims left room for them: wake them.
            if let ticket, handoff.cancel(ticket) { hub.wake() }
        }
        // One statement (one round trip): the run, its jobs (identities drawn in job order, so that
        // older means submitted first), their edges and categories by job index, and the wake-up.
        // With a unique key that an earlier run has, the run's insert does nothing, so nothing else
        // is inserted either, and the existing run is looked up.
        var bindings = PostgresBindings(capacity: 27)
        bindings.append(graph.name)
        bindings.append(uniqueKey)
        bindings.append(now)
        bindings.append(jobs.count)
        bindings.append(jobs.isEmpty ? now : nil)
        bindings.append(carrier)
        bindings.append(submission)
        bindings.append(indexes)
        bindings.append(names)
        bindings.append(kinds)
        bindings.append(inputs)
        bindings.append(hasInput)
        if !independent {
            bindings.append(inputFrom)
            bindings.append(remaining)
        }
        bindings.append(maxAttempts)
        bindings.append(retries)
        bindings.append(priorities)
        bindings.append(timeouts)
        if !independent { bindings.append(hasCategories) }
        bindings.append(notBefore)
        if !independent {
            bindings.append(edgeFrom)
            bindings.append(edgeTo)
            bindings.append(edgeRegardless)
            bindings.append(categoryJob)
            bindings.append(categoryName)
            bindings.append(categoryLimit)
        }
        bindings.append(channel)
        let base = bindings
        if independent { bindings.appendHandoff(nil, count: jobs.count, now: now) }
        // A run lost with its not-yet-flushed commit in a server crash is submitted again (rarely more
        // than once: the server that comes back flushes every commit before answering).
        let plainInsert = SubmitStatement(independent: independent, bindings: bindings)
        let logger = logger
        let handing = HandoverProgress()
        for attempt in 0..<5 {
            // The insert, then on the same connection the flush and check — sent once the server has
            // answered the insert, so after its commit: a connection cut in between runs both again.
            let (inserted, checked) = try await retrying("submit") {
                [submitClient, faults, clock] in
                // Jobs are claimed in the insert until they have been handed over once: rows answered by
                // an insert whose commit then failed were handed over all the same (as a lost claim, their
                // leases are refused), and a try sent after that stores the jobs ready. A run lost after
                // its commit is submitted again the usual way. Leases count from the time of each try.
                // Jobs for another store's worker are sent to it in a notification of the insert, with
                // the claims; the insert hands nothing over when the server process listening for that
                // store is gone. Only the first try carries them: a retry (the first one's reply may have
                // been lost after its commit sent the claims) stores the jobs ready, so that no token is
                // ever sent twice.
                var insert = plainInsert
                var handingOver = false
                var carried = 0
                if attempt == 0, let ticket, let sent = handing.sending(at: clock.now().storeTime) {
                    var values = base
                    if let remote = ticket.remote {
                        _ = handing.delivering()
                        if let (message, cut) = ticket.remoteMessage(graph: graph, expires: sent + remote.lease) {
                            values.appendHandoff(cut, count: jobs.count, now: sent, message: message)
                            carried = cut.workers.count
                            handingOver = true
                        }
                        self.handoff.restore(ticket, count: ticket.workers.count - carried)
                    } else {
                        values.appendHandoff(ticket, count: jobs.count, now: sent)
                        handingOver = true
                    }
                    if handingOver { insert = SubmitStatement(independent: true, bindings: values) }
                }
                let handingRemotely = handingOver && ticket?.remote != nil
                let result = try await submitClient.withConnection { connection -> (PostgresRow?, Bool?) in
                    try await Self.discardingIfReadOnly(connection) { () async throws -> (PostgresRow?, Bool?) in
                        let rows = try await insert.execute(on: connection, logger: logger)
                        try faults.afterCommit("submit insert")
                        guard let row = rows.first else {
                            // A run with the unique key exists: nothing was inserted, nothing sent.
                            if handingRemotely, let ticket { self.handoff.restore(ticket, count: carried) }
                            return (nil, nil)
                        }
                        let (run, _, ids, handed) = try row.decode((Int64, Int64, [Int64]?, Bool).self)
                        if handingRemotely, let remote = ticket?.remote {
                            // Sent with the commit; or the worker's store was gone, and the jobs are ready.
                            if !handed { self.handoff.forget(remote) }
                        } else if handingOver, let ticket, let sent = handing.delivering() {
                            await self.handOver(ticket, graph: graph, run: run, ids: ids ?? [], sent: sent)
                        }
                        let present = try await connection.rows(of: Self.flushPrepared(run), logger: logger)
                        try await Self.confirmCommitted(on: connection, logger: logger)
                        return (row, try present.first?.decode(Bool.self) ?? false)
                    }
                }
                try faults.afterCommit("submit")
                return result
            }
            let submitted: SubmittedRun
            let present: Bool?
            if let row = inserted {
                let (run, _, ids, _) = try row.decode((Int64, Int64, [Int64]?, Bool).self)
                submitted = SubmittedRun(
                    run: DurableRunID(run), jobs: (ids ?? []).map { DurableJobID($0) }, existing: false)
                present = checked
            } else {
                submitted = try await existingRun(graph: graph, uniqueKey: uniqueKey, submission: submission)
                if attempt == 0, let ticket, ticket.remote == nil, !submitted.existing,
                    let sent = handing.delivering()
                {
                    // An insert's reply was lost after its commit: its jobs were claimed for their workers,
                    // under leases from the earliest try (an earlier expiry than the row's, never a later).
                    // (Jobs for another store's worker went to it in the insert's notification.)
                    await handOver(
                        ticket, graph: graph, run: submitted.run.rawValue, ids: submitted.jobs.map(\.rawValue),
                        sent: sent)
                }
                present = try await statement("submit", Self.flushRun(submitted.run.rawValue)).first?.decode(Bool.self)
            }
            if present == true {
                if !submitted.existing && jobs.count >= Self.analyzedSubmission { await refreshStatistics() }
                return submitted
            }
            logger.notice(
                "a submitted run was lost before it was flushed (server crash or dropped connection?); submitting it again",
                metadata: ["graph": "\(graph.name)"])
        }
        throw DurableError(
            code: .storeFailure,
            message: "PostgreSQL lost graph '\(graph.name)' five times after accepting it; is the server crashing?")
    }

    /// Hands the jobs of `ticket` over to their workers once their run is inserted (`ids`: its jobs'
    /// identities, by index), and wakes them; those of workers that stopped meanwhile are given back.
    /// `sent`: the time the leases count from.
    func handOver(_ ticket: PostgresHandoff.Ticket, graph: GraphSpec, run: Int64, ids: [Int64], sent: Double) async {
        let handed = ticket.workers.compactMap { index, hand -> (worker: String, job: ClaimedJob)? in
            guard index < ids.count, index < graph.jobs.count else { return nil }
            let job = graph.jobs[index]
            return (
                hand.worker,
                ClaimedJob(
                    lease: Lease(job: DurableJobID(ids[index]), token: hand.token), run: DurableRunID(run),
                    name: job.name, kind: job.kind, input: job.input ?? Data(), attempt: 1,
                    maxAttempts: job.retry.maxAttempts, priority: job.priority,
                    timeout: job.timeout.map { .seconds($0.storeSeconds) },
                    leaseExpires: Date(storeTime: sent + hand.lease.storeSeconds))
            )
        }
        let orphans = handoff.deliver(ticket, handed)
        hub.wake()
        await giveBack(orphans)
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

    /// A synchronous commit that writes WAL flushes the WAL past the run's commit. It must write: a
    /// transaction that only takes an id writes no WAL, and PostgreSQL commits it without a flush.
    /// Rewriting the run's row (the same values: a heap-only update) is a WAL-logged write, and it finds
    /// no row if the run was lost.
    static func flushRun(_ run: Int64) -> PostgresQuery {
        "UPDATE runs SET submission = submission WHERE id = \(run) RETURNING true"
    }

    /// ``flushRun(_:)`` as a statement prepared once per connection: parsed and planned anew for every
    /// submission, it took a quarter of a millisecond of the server's time, while the worker woken by
    /// the submission claims on the same two cores.
    static func flushPrepared(_ run: Int64) -> Prepared<FlushRun> {
        var bindings = PostgresBindings(capacity: 1)
        bindings.append(run)
        return Prepared<FlushRun>(bindings: bindings)
    }

    enum FlushRun: PreparedText {
        static let name = "baton_flush_run_v1"
        static let sql = "UPDATE runs SET submission = submission WHERE id = $1 RETURNING true"
    }

    /// The inserting statement of a submission: ``SubmitIndependent`` when the graph's jobs are
    /// independent, ``SubmitGraph`` otherwise.
    struct SubmitStatement: Sendable {
        let independent: Bool
        let bindings: PostgresBindings

        func execute(on connection: PostgresConnection, logger: Logger) async throws -> [PostgresRow] {
            independent
                ? try await connection.rows(of: Prepared<SubmitIndependent>(bindings: bindings), logger: logger)
                : try await connection.rows(of: Prepared<SubmitGraph>(bindings: bindings), logger: logger)
        }
    }

    /// The inserting statement of a graph of independent jobs — no dependency, no category, no input
    /// from another job: ``SubmitGraph`` without the identities drawn ahead (the insert draws them, in
    /// job order) and without edges and categories. Its rows must be those ``SubmitGraph`` writes for
    /// the same graph (``PostgresIntegrityTests`` compares them). Values as ``SubmitGraph``'s, less
    /// `input_from`, `remaining`, `has_categories`, the edges and the categories: $1 name, $2 unique
    /// key, $3 now, $4 job count, $5 finished, $6 trace context, $7 submission, $8 indexes, $9 names,
    /// $10 kinds, $11 inputs, $12 has input, $13 maximum attempts, $14 retry policies, $15 priorities,
    /// $16 timeouts, $17 not before, $18 channel; and the jobs claimed in the insert for idle workers of
    /// the submitting store (``PostgresHandoff``): $19 their workers ('' for a job inserted ready),
    /// $20 lease tokens, $21 lease expiries, $22 how many (no `NOTIFY` when that is every job); for jobs
    /// claimed for a worker of another store (``RemoteOffer``), $23 the server process listening for
    /// that store (0 for this store's workers: no check; when it is gone, every job is inserted ready),
    /// $24 the notification that sends them the claims (``RemoteHand``; '' for none) and $25 when that
    /// server process started (microseconds since 1970; process ids are reused). A role that may not
    /// see another role's sessions' start times (no `pg_read_all_stats`) checks the process id alone.
    enum SubmitIndependent: PreparedText {
        static let name = "baton_submit_independent_v3"
        static let sql = """
            WITH alive AS MATERIALIZED (
                SELECT CASE WHEN $23::int4 = 0 THEN true
                    ELSE EXISTS (SELECT 1 FROM pg_stat_get_activity($23::int4) AS a
                        WHERE a.backend_start IS NULL
                            OR (extract(epoch FROM a.backend_start) * 1000000)::int8 = $25::int8) END AS ok
            ), new_run AS (
                INSERT INTO runs (name, unique_key, created, unfinished, finished, trace_context, submission)
                VALUES ($1, $2, $3, $4, $5, $6, $7)
                ON CONFLICT DO NOTHING RETURNING id
            ), inserted AS (
                INSERT INTO jobs (run, idx, name, kind, state, input, remaining, max_attempts, retry, priority,
                    timeout, has_categories, not_before, attempts, lease_owner, lease_token, lease_expires)
                SELECT new_run.id, t.idx, t.name, t.kind,
                    CASE WHEN t.owner = '' OR NOT alive.ok THEN 'ready' ELSE 'running' END,
                    CASE WHEN t.has_input THEN t.input END, 0, t.max_attempts, t.retry, t.priority,
                    NULLIF(t.timeout, -1), false, t.not_before, CASE WHEN t.owner = '' OR NOT alive.ok THEN 0 ELSE 1 END,
                    CASE WHEN alive.ok THEN NULLIF(t.owner, '') END, CASE WHEN alive.ok THEN NULLIF(t.token, 0) END,
                    CASE WHEN t.owner <> '' AND alive.ok THEN t.expires END
                FROM new_run, alive, unnest($8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $19, $20, $21)
                    AS t(idx, name, kind, input, has_input, max_attempts, retry, priority, timeout, not_before,
                        owner, token, expires)
                ORDER BY t.idx
                RETURNING id, idx, lease_owner IS NOT NULL AS handed
            ), woken AS (
                SELECT pg_notify($18, '') FROM new_run, alive WHERE $4 > $22 OR NOT alive.ok
            ), sent AS (
                SELECT pg_notify($18, $24 || new_run.id || ':'
                    || (SELECT string_agg(id::text, ',' ORDER BY idx) FROM inserted WHERE handed))
                FROM new_run, alive WHERE $24 <> '' AND alive.ok
            ), early AS (
                SELECT set_config('synchronous_commit', 'off', true)
            )
            SELECT new_run.id, (SELECT count(*) FROM woken) + (SELECT count(*) FROM sent)
                    + (SELECT count(*) FROM early) AS done,
                (SELECT array_agg(id ORDER BY idx) FROM inserted) AS jobs, (SELECT ok FROM alive) AS handed
            FROM new_run
            """
    }

    /// The inserting statement of a submission; its values are listed where it is run.
    enum SubmitGraph: PreparedText {
        static let name = "baton_submit_v4"
        static let sql = """
            WITH new_run AS (
                INSERT INTO runs (name, unique_key, created, unfinished, finished, trace_context, submission)
                VALUES ($1, $2, $3, $4, $5, $6,
                    $7)
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
                    priority, timeout, has_categories, not_before)
                SELECT i.id, new_run.id, t.idx, t.name, t.kind,
                    CASE WHEN t.remaining = 0 THEN 'ready' ELSE 'pending' END,
                    CASE WHEN t.has_input THEN t.input END, source.id, t.remaining, t.max_attempts,
                    t.retry, t.priority, NULLIF(t.timeout, -1), t.has_categories, t.not_before
                FROM new_run, t JOIN ids i ON i.idx = t.idx LEFT JOIN ids source ON source.idx = t.input_from
                RETURNING id
            ), new_edges AS (
                INSERT INTO edges (dependency, job, run_regardless)
                SELECT a.id, b.id, e.regardless
                FROM unnest($21, $22, $23) AS e(dependency, job, regardless)
                    JOIN ids a ON a.idx = e.dependency JOIN ids b ON b.idx = e.job
            ), new_categories AS (
                INSERT INTO job_categories (job, category, max_holders)
                SELECT i.id, c.category, c.max_holders
                FROM unnest($24, $25, $26) AS c(job, category, max_holders)
                    JOIN ids i ON i.idx = c.job
            ), woken AS (
                SELECT pg_notify($27, '') FROM new_run WHERE $4 > 0
            ), early AS (
                SELECT set_config('synchronous_commit', 'off', true)
            )
            SELECT new_run.id, (SELECT count(*) FROM woken) + (SELECT count(*) FROM inserted)
                    + (SELECT count(*) FROM early) AS done,
                (SELECT array_agg(id ORDER BY idx) FROM ids) AS jobs, false AS handed
            FROM new_run
            """
    }

    /// The run an insert did nothing for: this submission's own (a retry after a lost reply), or the
    /// one holding `uniqueKey`.
    private func existingRun(graph: GraphSpec, uniqueKey: String?, submission: String) async throws -> SubmittedRun {
        let logger = logger
        return try await transaction("submit") { connection in
            let found = try await connection.query(
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
            let ids = try await connection.query(
                "SELECT id FROM jobs WHERE run = \(run) ORDER BY idx", logger: logger
            ).collect().map { try $0.decode(Int64.self) }
            return SubmittedRun(run: DurableRunID(run), jobs: ids.map { DurableJobID($0) }, existing: !own)
        }
    }
}

extension PostgresBindings {
    /// The hand-over values of ``PostgresJobStore/SubmitIndependent`` ($19–$25) for `count` jobs, with
    /// leases from `now`; no ticket: every job is inserted ready. `message`: the notification text of
    /// a ticket for another store's worker (``PostgresHandoff/Ticket/remoteMessage(graph:expires:)``).
    mutating func appendHandoff(_ ticket: PostgresHandoff.Ticket?, count: Int, now: Double, message: String? = nil) {
        // A ticket for another store's worker hands nothing over without its notification.
        let ticket = ticket?.remote != nil && message == nil ? nil : ticket
        let (owners, tokens, expiries) =
            ticket?.values(count: count, now: now)
            ?? (
                [String](repeating: "", count: count), [Int64](repeating: 0, count: count),
                [Double](repeating: 0, count: count)
            )
        append(owners)
        append(tokens)
        append(expiries)
        append(ticket?.workers.count ?? 0)
        append(ticket?.remote != nil ? ticket?.remote?.pid ?? 0 : 0)
        append(ticket?.remote != nil ? message ?? "" : "")
        append(ticket?.remote?.started ?? 0)
    }
}
