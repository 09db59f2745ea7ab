public import BatonDurable
import Foundation
import PostgresNIO

extension PostgresJobStore {
    public func claim(worker: String, kinds: [String], limit: Int, lease: Duration) async throws -> [ClaimedJob] {
        guard limit > 0, !kinds.isEmpty else { return [] }
        try StoredText.checkWorker(worker)
        // Jobs another store hands over while this claim is under way wait for its end, and take the
        // room it leaves (``PostgresHandoff/endClaim(_:room:kinds:)``).
        handoff.beginClaim(worker)
        let claimed: [ClaimedJob]
        do {
            claimed = try await claimOnce(worker: worker, kinds: kinds, limit: limit, lease: lease)
        } catch {
            await giveBack(handoff.endClaim(worker, room: 0).excess)
            throw error
        }
        let (late, excess, full) = handoff.endClaim(worker, room: limit - claimed.count, kinds: kinds)
        await giveBack(excess)
        if !claimed.isEmpty || !late.isEmpty { handoff.busy(worker, full: full) }
        return claimed + late
    }

    /// A claim of up to `limit` jobs, less those on their way to the worker.
    private func claimOnce(
        worker: String, kinds: [String], limit: Int, lease: Duration
    ) async throws -> [ClaimedJob] {
        let (handed, room) = handoff.take(for: worker, limit: limit)
        if !handed.isEmpty {
            // Claimed for this worker by a submission through this store, or another store's: they start
            // with no round trip. The worker is woken to claim again: for jobs it may have missed
            // meanwhile, and to offer its room again.
            hub.wake()
            return handed
        }
        // Jobs on their way to this worker (their submission's insert has not answered yet) need room.
        let limit = room
        guard limit > 0 else { return [] }
        let now = clock.now().storeTime
        let expires = now + lease.storeSeconds
        let kinds = Array(Set(kinds)).sorted()
        let statement = Self.claimStatement(worker: worker, kinds: kinds, limit: limit, now: now, expires: expires)
        let rows: [PostgresRow]
        if let early = await claimOnListener(statement) {
            rows = early
        } else {
            rows = try await prepared("claim", statement, confirm: false)
        }
        return try await completeClaim(rows, worker: worker, kinds: kinds, limit: limit, now: now, expires: expires)
    }

    /// Offers `worker`'s room to submissions through this store, and through the other stores of the
    /// schema (told in a notification, in this process or another): their due independent jobs of
    /// `kinds` are claimed for it in their inserting statement — through another store, only while
    /// this one listens, with the claims sent here in a notification of that statement — and returned
    /// by its next ``claim(worker:kinds:limit:lease:)``: one round trip from submission to start, not
    /// three. A submission through this store prefers this store's idle workers. See
    /// `JobStore.parkClaim(worker:kinds:limit:lease:)`.
    public func parkClaim(worker: String, kinds: [String], limit: Int, lease: Duration) {
        handoff.park(worker, kinds: kinds, limit: limit, lease: lease)
    }

    /// Withdraws `worker`'s offer for good and gives back, as ``release(_:)`` does, the jobs handed
    /// over to it and not taken (and, as they arrive, those still on their way). See
    /// `JobStore.withdrawClaim(worker:)`.
    public func withdrawClaim(worker: String) async {
        await giveBack(handoff.retire(worker))
    }

    /// Releases jobs claimed ahead for workers that stopped, or that another store handed over beyond a
    /// worker's room (``release(_:)``); a failure is logged: they are claimed again when their leases
    /// expire.
    func giveBack(_ jobs: [ClaimedJob]) async {
        guard !jobs.isEmpty else { return }
        do {
            try await release(jobs.map(\.lease))
        } catch {
            logger.notice(
                "giving back jobs claimed ahead for a worker that stopped or had no room failed; they are claimed again when their leases expire",
                metadata: ["error": "\(PostgresFailure.describe(error))"])
        }
    }

    /// The claiming statement's rows, run on the listening connection when it is free
    /// (``PostgresListener/lend(_:)``); nil when it is not, or when it failed (the caller then claims
    /// through the pool, with its retries: a claim that committed before the failure is a lost claim,
    /// whose jobs are claimed again when its lease expires).
    func claimOnListener(_ statement: Prepared<ClaimReady>) async -> [PostgresRow]? {
        let logger = logger
        do {
            return try await listener.lend { [faults] connection in
                try await PostgresTimeout.run(configuration.operationTimeout) {
                    let rows = try await connection.rows(of: statement, logger: logger)
                    try faults.afterCommit("claim on the wake-up connection")
                    return rows
                }
            }
        } catch is CancellationError {
            return nil
        } catch {
            logger.notice(
                "claiming on the wake-up connection failed; claiming through the pool",
                metadata: ["error": "\(PostgresFailure.describe(error))"])
            return nil
        }
    }

    /// The rest of a claim once the claiming statement has answered with `rows`: the candidates with
    /// categories, and expired leases. Expired leases are noticed by the claiming statement itself (no
    /// round trip of its own in the common case, where there are none); when there are, they are ended
    /// and the claim taken again.
    ///
    /// The claiming statement looks at `limit` candidates at a time. When some of them could not be
    /// admitted (candidates sharing a category with room for fewer of them), the claim looks further,
    /// as the SQLite store does: taken again for the room left, the statement no longer sees the
    /// candidates whose categories are now full, and reaches the next ones — a claim returned fewer
    /// jobs than it asked for while more were claimable. It stops at a look that found fewer candidates
    /// than it asked for, or that admitted none (after a first such look: another claimer may have
    /// filled the categories meanwhile), and after at most 16 looks.
    func completeClaim(
        _ rows: [PostgresRow], worker: String, kinds: [String], limit: Int, now: Double, expires: Double
    ) async throws -> [ClaimedJob] {
        var (claimed, expired, filled) = try await claimReady(
            rows, worker: worker, limit: limit, now: now, expires: expires)
        if expired {
            try await endExpiredLeases(now: now)
            filled = true  // Jobs whose leases ended may be ready again.
        }
        var looks = 1
        var admitted = true
        while claimed.count < limit, filled, admitted, looks < 16 {
            looks += 1
            let room = limit - claimed.count
            let rows = try await prepared(
                "claim",
                Self.claimStatement(worker: worker, kinds: kinds, limit: room, now: now, expires: expires),
                confirm: false)
            let look = try await claimReady(rows, worker: worker, limit: room, now: now, expires: expires)
            claimed += look.claimed
            filled = look.filled
            admitted = !look.claimed.isEmpty
        }
        claimed.sort { ($0.priority, $1.job.rawValue) > ($1.priority, $0.job.rawValue) }
        return claimed
    }

    static func claimStatement(
        worker: String, kinds: [String], limit: Int, now: Double, expires: Double
    ) -> Prepared<ClaimReady> {
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(now)
        bindings.append(kinds)
        bindings.append(limit)
        bindings.append(worker)
        bindings.append(expires)
        return Prepared<ClaimReady>(bindings: bindings)
    }

    /// A fresh lease token, in SQL: 62 random bits (never 0). Not a sequence: a claim of jobs without
    /// categories commits without waiting for the WAL flush (`synchronous_commit = off` for its
    /// transaction — the claimed job starts one disk flush sooner), and a server crash can lose such a
    /// commit *and* set a sequence back, so a sequence could hand the lost claim's token out again while
    /// its worker still holds it. A random token is never handed out twice for a job in practice. A lost
    /// claim — lost in a crash, or rolled back by a connection cut after its rows were sent (its commit
    /// is not awaited: the job starts one round trip sooner) — costs no completion guarantee: its worker's renewals and report are refused as any stale
    /// lease's are, and the job is claimed again (so, as with any lost lease, it may run twice at once
    /// until the first worker's next renewal); every accepted report, being a synchronous commit, flushes
    /// the claim before it. Claims of jobs with categories commit synchronously: a lost one would let
    /// a category's slot be held twice.
    static let newToken =
        "(floor(random() * 2147483648)::bigint * 2147483648 + floor(random() * 2147483648)::bigint + 1)"

    /// One claiming pass over the ready jobs, given the claiming statement's rows; also says whether any
    /// lease has expired, and whether the statement found as many candidates as it was asked for
    /// (`filled`: there may be more).
    private func claimReady(
        _ rows: [PostgresRow], worker: String, limit: Int, now: Double, expires: Double
    ) async throws -> (claimed: [ClaimedJob], expired: Bool, filled: Bool) {
        // 1. Jobs without categories were picked, locked (skipping rows other claimers hold) and marked
        //    running by the statement. Candidates with categories are only reported, not claimed.
        //    A last row (claimed NULL) reports that some lease has expired.
        var claimed: [ClaimedJob] = []
        var withCategories: [Int64] = []
        var expired = false
        for row in rows {
            let columns = row.makeRandomAccess()
            switch try columns["claimed"].decode(Bool?.self) {
            case true?: claimed.append(try Self.claimedJob(columns, expires: expires))
            case false?: withCategories.append(try columns["id"].decode(Int64.self))
            case nil: expired = true
            }
        }
        let candidates = claimed.count + withCategories.count
        // 2. Jobs with categories: each category's count is checked and taken under a per-category lock.
        if !withCategories.isEmpty && claimed.count < limit {
            claimed += try await claimWithCategories(
                withCategories, worker: worker, limit: limit - claimed.count, now: now, expires: expires)
        }
        return (claimed, expired, candidates >= limit)
    }

    /// The claiming statement: $1 now, $2 kinds, $3 limit, $4 worker, $5 lease expiry.
    ///
    /// Every table is reached by key or through the ready jobs' index, whatever the planner's statistics
    /// say (``PostgresPlanTests``): the claimed rows are updated by their ids (an array), not joined back
    /// to the candidates (which the planner did by hashing the whole table when it expected many
    /// candidates), and a candidate's categories are counted for that candidate alone (a `NOT EXISTS`
    /// was planned as one hash of the whole `job_categories` table per claim).
    enum ClaimReady: PreparedText {
        static let name = "baton_claim_ready_v4"
        static let sql = """
            WITH candidates AS (
                SELECT j.id, j.has_categories FROM jobs j
                WHERE j.state = 'ready' AND j.not_before <= $1 AND j.kind = ANY($2)
                    AND (NOT j.has_categories OR COALESCE((
                        SELECT bool_and((SELECT count(*) FROM holders h WHERE h.category = c.category) < c.max_holders)
                        FROM job_categories c WHERE c.job = j.id), true))
                ORDER BY j.priority DESC, j.id
                LIMIT $3
                FOR UPDATE SKIP LOCKED
            ), early AS (
                SELECT set_config('synchronous_commit', 'off', true)
            ), claimed AS (
                UPDATE jobs j SET state = 'running', attempts = j.attempts + 1, lease_owner = $4,
                    lease_token = \(newToken), lease_expires = $5
                WHERE j.id = ANY(ARRAY(SELECT id FROM candidates WHERE NOT has_categories))
                RETURNING j.id, j.run, j.name, j.kind, j.attempts, j.max_attempts, j.priority, j.timeout,
                    j.lease_token, COALESCE(j.input, (SELECT d.output FROM jobs d WHERE d.id = j.input_from)) AS input
            )
            SELECT id, run, name, kind, attempts, max_attempts, priority, timeout, lease_token, input, true AS claimed
                FROM claimed WHERE (SELECT count(*) FROM early) > 0
            UNION ALL
            SELECT id, 0, '', '', 0, 0, 0, NULL, 0, NULL, false FROM candidates WHERE has_categories
            UNION ALL
            SELECT 0, 0, '', '', 0, 0, 0, NULL, 0, NULL, NULL
                WHERE EXISTS (SELECT 1 FROM jobs WHERE state = 'running' AND lease_expires < $1)
            """
    }

    static func claimedJob(_ columns: PostgresRandomAccessRow, expires: Double) throws -> ClaimedJob {
        let id = try columns["id"].decode(Int64.self)
        let token = try columns["lease_token"].decode(Int64.self)
        return ClaimedJob(
            lease: Lease(job: DurableJobID(id), token: token), run: DurableRunID(try columns["run"].decode(Int64.self)),
            name: try columns["name"].decode(String.self), kind: try columns["kind"].decode(String.self),
            input: try columns["input"].decode(Data?.self) ?? Data(),
            attempt: try columns["attempts"].decode(Int.self),
            maxAttempts: try columns["max_attempts"].decode(Int.self),
            priority: try columns["priority"].decode(Int.self),
            timeout: try columns["timeout"].decode(Double?.self).map { Duration.seconds($0) },
            leaseExpires: Date(storeTime: expires))
    }

    /// Claims, in priority order, those of `candidates` whose categories all have room, counting the
    /// holders after taking a transaction-scoped advisory lock per category (in name order, so two
    /// claimers never wait on each other in a cycle). Releasing a category needs no lock: a claimer
    /// that counted a holder just released only admits fewer jobs.
    func claimWithCategories(
        _ candidates: [Int64], worker: String, limit: Int, now: Double, expires: Double
    ) async throws -> [ClaimedJob] {
        let logger = logger
        let schema = configuration.schema
        return try await transaction("claim") { connection in
            // Lock the candidates that are still ready (another claimer may have taken some).
            let locked = try await connection.query(
                """
                SELECT id FROM jobs WHERE id = ANY(\(candidates)) AND state = 'ready' AND not_before <= \(now)
                ORDER BY priority DESC, id FOR UPDATE SKIP LOCKED
                """, logger: logger
            ).collect().map { try $0.decode(Int64.self) }
            guard !locked.isEmpty else { return [] }
            var needs: [Int64: [(String, Int)]] = [:]
            for try await (job, category, maximum) in try await connection.query(
                "SELECT job, category, max_holders FROM job_categories WHERE job = ANY(\(locked))", logger: logger
            ).decode((Int64, String, Int).self) {
                needs[job, default: []].append((category, maximum))
            }
            let names = Array(Set(needs.values.flatMap { $0.map(\.0) })).sorted()
            for name in names {
                try await connection.query(
                    "SELECT pg_advisory_xact_lock(hashtext(\(schema + ":category:" + name)))", logger: logger)
            }
            var held: [String: Int] = [:]
            for try await (category, count) in try await connection.query(
                "SELECT category, count(*)::int FROM holders WHERE category = ANY(\(names)) GROUP BY category",
                logger: logger
            ).decode((String, Int).self) {
                held[category] = count
            }
            var chosen: [Int64] = []
            var holderJobs: [Int64] = []
            var holderCategories: [String] = []
            for job in locked where chosen.count < limit {
                let categories = needs[job] ?? []
                guard categories.allSatisfy({ held[$0.0, default: 0] < $0.1 }) else { continue }
                chosen.append(job)
                for (category, _) in categories {
                    held[category, default: 0] += 1
                    holderJobs.append(job)
                    holderCategories.append(category)
                }
            }
            guard !chosen.isEmpty else { return [] }
            if !holderJobs.isEmpty {
                try await connection.query(
                    "INSERT INTO holders (category, job) SELECT * FROM unnest(\(holderCategories), \(holderJobs))",
                    logger: logger)
            }
            // A synchronous commit, unlike the plain claim's: a claim of a category slot lost in a server
            // crash would let a second holder take the slot while the first still works (until its
            // next renewal is refused), and a category's limit holds across crashes.
            let rows = try await connection.query(
                """
                UPDATE jobs j SET state = 'running', attempts = j.attempts + 1, lease_owner = \(worker),
                    lease_token = \(unescaped: Self.newToken), lease_expires = \(expires)
                WHERE j.id = ANY(\(chosen))
                RETURNING j.id, j.run, j.name, j.kind, j.attempts, j.max_attempts, j.priority, j.timeout,
                    j.lease_token, COALESCE(j.input, (SELECT d.output FROM jobs d WHERE d.id = j.input_from)) AS input
                """, logger: logger
            ).collect()
            return try rows.map { try Self.claimedJob($0.makeRandomAccess(), expires: expires) }
        }
    }

    /// Ends expired leases (the claiming statement said there are some).
    func endExpiredLeases(now: Double) async throws {
        let logger = logger
        let notify = notifySQL()
        try await transaction("expire leases") { connection in
            let expired = try await connection.query(
                """
                SELECT id, attempts, max_attempts, lease_owner, lease_expires, cancel_request FROM jobs
                WHERE state = 'running' AND lease_expires < \(now) ORDER BY id FOR UPDATE SKIP LOCKED
                """, logger: logger
            ).collect()
            guard !expired.isEmpty else { return }
            for row in expired {
                PostgresTimeout.progressed()
                let (id, attempts, maxAttempts, owner, at, cancelRequest) = try row.decode(
                    (Int64, Int, Int, String?, Double, String?).self)
                let message =
                    "attempt \(attempts) lost: the lease of worker '\(owner ?? "?")' expired at "
                    + Date(storeTime: at).formatted(.iso8601)
                try await connection.query("DELETE FROM holders WHERE job = \(id)", logger: logger)
                if let cancelRequest {
                    try await Self.finishJob(
                        connection, id: id, state: .cancelled, error: cancelRequest, output: nil, now: now,
                        logger: logger)
                } else if attempts >= maxAttempts {
                    try await Self.finishJob(
                        connection, id: id, state: .failed, error: message, output: nil, now: now, logger: logger)
                } else {
                    try await connection.query(
                        """
                        UPDATE jobs SET state = 'ready', not_before = \(now), lease_owner = NULL, lease_token = NULL,
                            lease_expires = NULL, last_error = \(message) WHERE id = \(id)
                        """, logger: logger)
                }
            }
            try await connection.query(PostgresQuery(unsafeSQL: "SELECT \(notify)"), logger: logger)
        }
    }

    public func renew(_ leases: [Lease], worker: String, lease: Duration) async throws -> [LeaseStatus] {
        guard !leases.isEmpty else { return [] }
        try StoredText.checkWorker(worker)
        let until = clock.now().storeTime + lease.storeSeconds
        let ids = leases.map(\.job.rawValue)
        let tokens = leases.map(\.token)
        let rows = try await statement(
            "renew",
            """
            UPDATE jobs j SET lease_expires = \(until), lease_owner = \(worker)
            FROM unnest(\(ids), \(tokens)) AS r(id, token)
            WHERE j.id = r.id AND j.lease_token = r.token AND j.state = 'running'
            RETURNING j.id, j.cancel_request
            """)
        var held: [Int64: String?] = [:]
        for row in rows {
            let (id, cancel) = try row.decode((Int64, String?).self)
            held[id] = .some(cancel)
        }
        let date = Date(storeTime: until)
        return leases.map { lease in
            guard let cancel = held[lease.job.rawValue] else { return .lost }
            if let reason = cancel { return .cancelRequested(reason: reason, until: date) }
            return .renewed(until: date)
        }
    }
}
