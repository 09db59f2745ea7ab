public import BatonDurable
import Foundation
import Logging
import PostgresNIO

extension PostgresJobStore {
    /// Claims with `FOR UPDATE SKIP LOCKED`, never more than `limit`; a job with categories is admitted
    /// only while each has room, counted under a per-category lock that a claim never waits for.
    public func claim(worker: String, kinds: [String], limit: Int, lease: Duration) async throws -> [ClaimedJob] {
        guard limit > 0, !kinds.isEmpty else { return [] }
        try StoredText.checkWorker(worker)
        let kinds = Array(Set(kinds)).sorted()
        let rows = try await prepared(
            "claim",
            Self.claimStatement(
                worker: worker, kinds: kinds, limit: limit, lease: lease, now: nowOverride, channel: channel))
        return try await completeClaim(rows, worker: worker, kinds: kinds, limit: limit, lease: lease)
    }

    /// The rest of a claim once the claiming statement has answered with `rows`: the candidates with
    /// categories, and expired leases. Expired leases are noticed by the claiming statement itself (no
    /// round trip of its own in the common case, where there are none); when there are, they are ended
    /// and the claim taken again.
    ///
    /// The claiming statement looks at `limit` candidates at a time. When some of them could not be
    /// admitted (candidates sharing a category with room for fewer of them, or a category whose lock
    /// another session holds), the claim looks further, as the SQLite store does: taken again for the
    /// room left, the statement no longer sees the candidates whose categories are now full, nor those
    /// needing a category found busy (a busy category's jobs would otherwise come first in every look,
    /// however many of them, and a worker with little room would claim nothing while other jobs wait
    /// behind them), and reaches the next ones. It stops at a look that found fewer candidates than it
    /// asked for, or — after the first look — at one that neither claimed a job nor found another
    /// category busy, and after at most 16 looks (so jobs of more than about 15 busy categories, ahead
    /// of all others, still hold back a claim with little room).
    func completeClaim(
        _ rows: [PostgresRow], worker: String, kinds: [String], limit: Int, lease: Duration
    ) async throws -> [ClaimedJob] {
        let first = try await claimReady(rows, worker: worker, limit: limit, lease: lease)
        var (claimed, busy, filled) = (first.claimed, first.busy, first.filled)
        if first.expired {
            try await endExpiredLeases()
            filled = true  // Jobs whose leases ended may be ready again.
        }
        var looks = 1
        var progressed = true
        while claimed.count < limit, filled, progressed, looks < 16 {
            looks += 1
            let room = limit - claimed.count
            let rows = try await prepared(
                "claim",
                Self.claimStatement(
                    worker: worker, kinds: kinds, limit: room, lease: lease, now: nowOverride, channel: channel,
                    busy: busy))
            let look = try await claimReady(rows, worker: worker, limit: room, lease: lease)
            claimed += look.claimed
            let found = look.busy.subtracting(busy)
            busy.formUnion(found)
            filled = look.filled
            progressed = !look.claimed.isEmpty || !found.isEmpty
        }
        claimed.sort { ($0.priority, $1.job.rawValue) > ($1.priority, $0.job.rawValue) }
        return claimed
    }

    /// The claiming statement's call; `busy`: categories whose lock another session held in this claim.
    static func claimStatement(
        worker: String, kinds: [String], limit: Int, lease: Duration, now: Double?, channel: String,
        busy: Set<String> = []
    ) -> ClaimCall {
        var bindings = PostgresBindings(capacity: 7)
        bindings.append(now)
        bindings.append(kinds)
        bindings.append(limit)
        bindings.append(worker)
        bindings.append(lease.seconds)
        bindings.append(busy.sorted())
        bindings.append(channel)
        return kinds.count == 1
            ? .oneKind(Prepared<ClaimReadyOfOneKind>(bindings: bindings))
            : .severalKinds(Prepared<ClaimReady>(bindings: bindings))
    }

    /// A call of the claiming statement: the form for one kind or for several (the same values).
    enum ClaimCall: Sendable {
        case oneKind(Prepared<ClaimReadyOfOneKind>)
        case severalKinds(Prepared<ClaimReady>)
    }

    /// `prepared(_:_:readOnly:)` for a claim.
    func prepared(_ label: String, _ call: ClaimCall) async throws -> [PostgresRow] {
        switch call {
        case .oneKind(let statement): try await prepared(label, statement)
        case .severalKinds(let statement): try await prepared(label, statement)
        }
    }

    /// A fresh lease token, in SQL: 62 random bits (never 0), so a token says nothing about the claims
    /// before it and is never handed out twice for a job in practice.
    static let newToken =
        "(floor(random() * 2147483648)::bigint * 2147483648 + floor(random() * 2147483648)::bigint + 1)"

    /// One claiming pass over the ready jobs, given the claiming statement's rows; also says which
    /// categories it found busy (their lock held by another session), whether any lease has expired,
    /// and whether the statement found as many candidates as it was asked for (`filled`: there may be
    /// more).
    private func claimReady(
        _ rows: [PostgresRow], worker: String, limit: Int, lease: Duration
    ) async throws -> (claimed: [ClaimedJob], busy: Set<String>, expired: Bool, filled: Bool) {
        // 1. Jobs without categories were picked, locked (skipping rows other claimers hold) and marked
        //    running by the statement. Candidates with categories are only reported, not claimed.
        //    Last rows (claimed NULL) report that some lease has expired (id 0), that a claim of
        //    several kinds found as many candidates as it asked for before others' locks (id -1), and
        //    that waiting jobs it promoted woke listeners (id -2).
        var claimed: [ClaimedJob] = []
        var withCategories: [Int64] = []
        var expired = false
        var pooled = false
        for row in rows {
            let columns = row.makeRandomAccess()
            switch try columns["claimed"].decode(Bool?.self) {
            case true?: claimed.append(try Self.claimedJob(columns))
            case false?: withCategories.append(try columns["id"].decode(Int64.self))
            case nil:
                switch try columns["id"].decode(Int64.self) {
                case -1: pooled = true
                case -2: break  // Listeners were woken.
                default: expired = true
                }
            }
        }
        let candidates = claimed.count + withCategories.count
        // 2. Jobs with categories: each category's count is checked and taken under a per-category lock.
        var busy: Set<String> = []
        if !withCategories.isEmpty && claimed.count < limit {
            let admitted: [ClaimedJob]
            (admitted, busy) = try await claimWithCategories(
                withCategories, worker: worker, limit: limit - claimed.count, lease: lease)
            claimed += admitted
        }
        return (claimed, busy, expired, candidates >= limit || pooled)
    }

    /// The claiming statement: $1 now (NULL: the server's clock), $2 kinds, $3 limit, $4 worker, $5 the
    /// lease in seconds, $6 the categories found busy by an earlier look (their jobs are passed over),
    /// $7 the wake-up channel.
    ///
    /// The candidates come through the index of claimable jobs by kind (`jobs_claim`): a claim reads
    /// only the ready jobs of its kinds that do not wait for their time, however many of other kinds
    /// wait; and through the index of waiting jobs (`jobs_waiting`), the waiting jobs whose time has come
    /// (``due``, ``promoted``). (One look through all ready jobs in priority order read past every job
    /// of another kind: 10 ms a claim behind 100,000 of them, for a worker with nothing to do.) One kind
    /// has a statement of its own (``ClaimReadyOfOneKind``). With several, `pool` reads the first `$3` of
    /// each kind without locking them, and one ordered pass over the pool locks the first `$3` that no
    /// other claimer holds: of the ready jobs, a claim locks none it does not take (locking each kind's
    /// first `$3` held rows that other claimers then skipped, and wrote a lock for each), and the rows
    /// another claimer holds leave their places to the other kinds' next ones.
    /// When the pool held `$3` or more (a last row with id -1), the claim may look again for rows that
    /// others held: ``completeClaim(_:worker:kinds:limit:lease:)``.
    ///
    /// Every table is reached by key or through the ready jobs' index, whatever the planner's statistics
    /// say (``PostgresPlanTests``): the claimed rows are updated by their ids (an array), not joined back
    /// to the candidates (which the planner did by hashing the whole table when it expected many
    /// candidates), and a candidate's categories are counted for that candidate alone (a `NOT EXISTS`
    /// was planned as one hash of the whole `job_categories` table per claim).
    enum ClaimReady: PreparedText {
        static let name = "baton_claim_ready_v10"
        static let sql = """
            WITH now AS MATERIALIZED (
                SELECT coalesce($1::float8, extract(epoch FROM now())::float8) AS t
            \(due)
            ), pool AS MATERIALIZED (
                SELECT p.id FROM unnest($2::text[]) AS k(kind), LATERAL (
                    SELECT j.id FROM jobs j
                    WHERE j.state = 'ready' AND NOT j.waiting AND j.kind = k.kind
                        AND j.not_before <= (SELECT t FROM now) AND \(roomFor("j"))
                    ORDER BY j.priority DESC, j.id
                    LIMIT $3
                ) p
                UNION ALL
                SELECT d.id FROM due d
            ), candidates AS (
                SELECT j.id, j.has_categories FROM jobs j
                WHERE j.id = ANY(ARRAY(SELECT id FROM pool)) AND j.state = 'ready'
                    AND j.not_before <= (SELECT t FROM now)
                ORDER BY j.priority DESC, j.id
                LIMIT $3
                FOR UPDATE SKIP LOCKED
            \(promoted())
            \(claimRest)
            UNION ALL
            SELECT -1, 0, '', '', 0, 0, 0, NULL, 0, 0, NULL, NULL WHERE (SELECT count(*) FROM pool) >= $3
            """
    }

    /// ``ClaimReady`` for one kind (`$2` holds one): its first `$3` unlocked ready jobs, in one look
    /// through the index of ready jobs by kind that skips the rows other claimers hold as it goes, so
    /// any number of claimers of one kind each take a full batch. The form for several kinds reads its
    /// pool and then locks from it, which costs more server time a claim and leaves a claimer short
    /// when others hold more than the pool's spare rows (it then looks again); a worker of one kind,
    /// the common case, pays neither.
    enum ClaimReadyOfOneKind: PreparedText {
        static let name = "baton_claim_ready_one_v2"
        static let sql = """
            WITH now AS MATERIALIZED (
                SELECT coalesce($1::float8, extract(epoch FROM now())::float8) AS t
            \(due)
            ), ready AS MATERIALIZED (
                SELECT j.id, j.priority, j.has_categories FROM jobs j
                WHERE j.state = 'ready' AND NOT j.waiting AND j.kind = ($2::text[])[1]
                    AND j.not_before <= (SELECT t FROM now) AND \(roomFor("j"))
                ORDER BY j.priority DESC, j.id
                LIMIT $3
                FOR UPDATE SKIP LOCKED
            ), candidates AS (
                SELECT c.id, c.has_categories FROM (
                    SELECT * FROM ready
                    UNION ALL
                    SELECT d.id, d.priority, d.has_categories FROM due d
                ) c
                ORDER BY c.priority DESC, c.id
                LIMIT $3
            \(promoted(passedOver: heldAndLeft))
            \(claimRest)
            """
    }

    /// In ``ClaimReadyOfOneKind``: whether the claim holds rows it does not take. `ready` locks its
    /// first `$3`; when due jobs come before some of them, those stay locked until the statement ends.
    static let heldAndLeft =
        "(SELECT count(*) FROM ready) + (SELECT count(*) FROM due) > (SELECT count(*) FROM candidates)"

    /// In the claiming statements, after `now`: the jobs of kinds $2 that waited for their time (`waiting`)
    /// and whose time has come, locked (skipping rows other sessions hold), through the index of waiting
    /// jobs by kind and start (`jobs_waiting`): claim candidates beside the others.
    ///
    /// Jobs that wait for their time — retries backing off, jobs submitted with a start date — are kept
    /// out of the claims' index: a retry keeps its id, so it sorts before the jobs submitted after it,
    /// and a claim read past every retry of its kind that was backing off, at each look (a backlog of
    /// retries after a failing dependency came back slowed every claim in proportion). A claim reads the
    /// waiting jobs that are due, which the same statement promotes (``promoted``): each is read once,
    /// in the common case. After a long pause (workers stopped while 100,000 retries came due), a claim
    /// takes the best `max($3, 1,000)` of those whose categories have room and promotes those it does
    /// not claim: every due job it leaves waits behind these, so claims keep their order (priority, then
    /// age), and no statement promotes the whole backlog at once. (Counting the jobs a full category
    /// holds back in the 1,000 would let a younger or lower job be claimed first.) The due rows are
    /// sorted in full before they are locked, so while a backlog of due jobs drains, each claim reads
    /// all of it (unmeasured at 100,000; the whole backlog drains in backlog / 1,000 claims).
    static let due = """
        ), due AS MATERIALIZED (
            SELECT j.id, j.priority, j.has_categories FROM jobs j
            WHERE j.state = 'ready' AND j.waiting AND j.kind = ANY($2::text[]) AND j.not_before <= (SELECT t FROM now)
                AND \(roomFor("j"))
            ORDER BY j.priority DESC, j.id
            LIMIT greatest($3, 1000)
            FOR UPDATE SKIP LOCKED
        """

    /// In the claiming statements, after `candidates`: the due jobs of ``due`` that this claim does not
    /// take become claimable (a job it claims is marked by the claim itself: one row is changed once
    /// per statement), and listeners are woken when there are some, or when `passedOver` (SQL) says
    /// that the claim holds rows it does not take. A claim that ran beside this one skipped those rows,
    /// locked, and may have found nothing: its worker would otherwise wait for its polling interval.
    static func promoted(passedOver: String = "false") -> String {
        """
        ), promoted AS (
            UPDATE jobs j SET waiting = false
            WHERE j.id = ANY(ARRAY(SELECT id FROM due EXCEPT SELECT id FROM candidates WHERE NOT has_categories))
            RETURNING j.id
        ), woken AS (
            SELECT pg_notify($7, '') FROM (SELECT 1) one WHERE EXISTS (SELECT 1 FROM promoted) OR \(passedOver)
        """
    }

    /// In the claiming statements: the job `alias` needs no category, or each of its categories has
    /// room and was not found busy ($6).
    static func roomFor(_ alias: String) -> String {
        """
        (NOT \(alias).has_categories OR COALESCE((
            SELECT bool_and(c.category <> ALL($6::text[])
                AND (SELECT count(*) FROM holders h WHERE h.category = c.category) < c.max_holders)
            FROM job_categories c WHERE c.job = \(alias).id), true))
        """
    }

    /// The claiming statements after their candidates: the claim of those without categories, the
    /// candidates with categories, a row saying whether a lease has expired, and one saying that
    /// listeners were woken (``promoted``).
    ///
    /// Whether a lease has expired is the first entry of the index of running jobs by expiry
    /// (`jobs_running`). Asked as `EXISTS (… lease_expires < now)`, the planner expected to meet an
    /// expired lease early in a scan of the whole table and read every job when there was none: 6 ms of
    /// a claim on a table of 50,000 jobs, at every claim.
    static let claimRest = """
        ), claimed AS (
            UPDATE jobs j SET state = 'running', waiting = false, attempts = j.attempts + 1, lease_owner = $4,
                lease_token = \(newToken), lease_expires = (SELECT t FROM now) + $5::float8,
                started = (SELECT t FROM now)
            WHERE j.id = ANY(ARRAY(SELECT id FROM candidates WHERE NOT has_categories))
            RETURNING j.id, j.run, j.name, j.kind, j.attempts, j.max_attempts, j.priority, j.timeout,
                j.lease_token, j.lease_expires,
                COALESCE(j.input, (SELECT d.output FROM jobs d WHERE d.id = j.input_from)) AS input
        )
        SELECT id, run, name, kind, attempts, max_attempts, priority, timeout, lease_token, lease_expires, input,
            true AS claimed
            FROM claimed
        UNION ALL
        SELECT id, 0, '', '', 0, 0, 0, NULL, 0, 0, NULL, false FROM candidates WHERE has_categories
        UNION ALL
        SELECT 0, 0, '', '', 0, 0, 0, NULL, 0, 0, NULL, NULL
            WHERE (SELECT min(lease_expires) FROM jobs WHERE state = 'running') < (SELECT t FROM now)
        UNION ALL
        SELECT -2, 0, '', '', 0, 0, 0, NULL, 0, 0, NULL, NULL FROM woken
        """

    static func claimedJob(_ columns: PostgresRandomAccessRow) throws -> ClaimedJob {
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
            leaseExpires: Date(storeTime: try columns["lease_expires"].decode(Double.self)))
    }

    /// Claims, in priority order, those of `candidates` whose categories all have room, counting the
    /// holders under a transaction-scoped advisory lock per category; also says which categories were
    /// busy. A category whose lock another session holds is skipped, as `SKIP LOCKED` skips a busy
    /// row: a claim never waits for one (a session stuck inside a claim — a paused worker, a half-open
    /// connection — would otherwise stall every worker's claims, jobs without categories included).
    /// Releasing a category needs no lock: a claimer that counted a holder just released only admits
    /// fewer jobs.
    func claimWithCategories(
        _ candidates: [Int64], worker: String, limit: Int, lease: Duration
    ) async throws -> (claimed: [ClaimedJob], busy: Set<String>) {
        let logger = logger
        let prefix = configuration.schema + ":category:"
        return try await transaction("claim") { connection in
            let now = try await self.serverTime(on: connection)
            // Lock the candidates that are still ready (another claimer may have taken some).
            let locked = try await connection.liveQuery(
                """
                SELECT id FROM jobs WHERE id = ANY(\(candidates)) AND state = 'ready' AND not_before <= \(now)
                ORDER BY priority DESC, id FOR UPDATE SKIP LOCKED
                """, logger: logger
            ).collect().map { try $0.decode(Int64.self) }
            guard !locked.isEmpty else { return ([], []) }
            var needs: [Int64: [(String, Int)]] = [:]
            for try await (job, category, maximum) in try await connection.liveQuery(
                "SELECT job, category, max_holders FROM job_categories WHERE job = ANY(\(locked))", logger: logger
            ).decode((Int64, String, Int).self) {
                needs[job, default: []].append((category, maximum))
            }
            let names = Array(Set(needs.values.flatMap { $0.map(\.0) })).sorted()
            var free = Set<String>()
            for try await name in try await connection.liveQuery(
                """
                SELECT n FROM unnest(\(names)::text[]) AS n
                WHERE pg_try_advisory_xact_lock(hashtext(\(prefix) || n))
                """, logger: logger
            ).decode(String.self) {
                free.insert(name)
            }
            let busy = Set(names).subtracting(free)
            guard !free.isEmpty else { return ([], busy) }
            var held: [String: Int] = [:]
            for try await (category, count) in try await connection.liveQuery(
                "SELECT category, count(*)::int FROM holders WHERE category = ANY(\(Array(free))) GROUP BY category",
                logger: logger
            ).decode((String, Int).self) {
                held[category] = count
            }
            var chosen: [Int64] = []
            var holderJobs: [Int64] = []
            var holderCategories: [String] = []
            for job in locked where chosen.count < limit {
                let categories = needs[job] ?? []
                guard categories.allSatisfy({ free.contains($0.0) && held[$0.0, default: 0] < $0.1 }) else { continue }
                chosen.append(job)
                for (category, _) in categories {
                    held[category, default: 0] += 1
                    holderJobs.append(job)
                    holderCategories.append(category)
                }
            }
            guard !chosen.isEmpty else { return ([], busy) }
            if !holderJobs.isEmpty {
                try await connection.liveQuery(
                    "INSERT INTO holders (category, job) SELECT * FROM unnest(\(holderCategories), \(holderJobs))",
                    logger: logger)
            }
            let rows = try await connection.liveQuery(
                """
                UPDATE jobs j SET state = 'running', waiting = false, attempts = j.attempts + 1,
                    lease_owner = \(worker),
                    lease_token = \(unescaped: Self.newToken), lease_expires = \(now + lease.seconds),
                    started = \(now)
                WHERE j.id = ANY(\(chosen))
                RETURNING j.id, j.run, j.name, j.kind, j.attempts, j.max_attempts, j.priority, j.timeout,
                    j.lease_token, j.lease_expires,
                    COALESCE(j.input, (SELECT d.output FROM jobs d WHERE d.id = j.input_from)) AS input
                """, logger: logger
            ).collect()
            return (try rows.map { try Self.claimedJob($0.makeRandomAccess()) }, busy)
        }
    }

    /// Ends expired leases (the claiming statement said there are some).
    func endExpiredLeases() async throws {
        let logger = logger
        let notify = notifySQL()
        try await transaction("expire leases") { connection in
            let now = try await self.serverTime(on: connection)
            let expired = try await connection.liveQuery(
                """
                SELECT id, attempts, max_attempts, lease_owner, lease_expires, cancel_request, lease_token FROM jobs
                WHERE state = 'running' AND lease_expires < \(now) ORDER BY id FOR UPDATE SKIP LOCKED
                """, logger: logger
            ).collect()
            guard !expired.isEmpty else { return }
            for row in expired {
                let (id, attempts, maxAttempts, owner, at, cancelRequest, token) = try row.decode(
                    (Int64, Int, Int, String?, Double, String?, Int64?).self)
                let message =
                    "attempt \(attempts) lost: the lease of worker '\(owner ?? "?")' expired at "
                    + Date(storeTime: at).formatted(.iso8601) + " (the database server's clock)"
                try await connection.liveQuery("DELETE FROM holders WHERE job = \(id)", logger: logger)
                let result: DurableJobState =
                    cancelRequest != nil ? .cancelled : attempts >= maxAttempts ? .failed : .ready
                try await connection.liveQuery(
                    """
                    INSERT INTO attempts (job, token, attempt, worker, started, ended, outcome, result, error)
                    VALUES (\(id), \(token ?? 0), \(attempts), \(owner), (SELECT started FROM jobs WHERE id = \(id)),
                        \(now), 'lost', \(result.rawValue), \(message))
                    ON CONFLICT DO NOTHING
                    """, logger: logger)
                if let cancelRequest {
                    try await Self.finishJob(
                        connection, id: id, state: .cancelled, error: cancelRequest, output: nil, now: now,
                        logger: logger)
                } else if attempts >= maxAttempts {
                    try await Self.finishJob(
                        connection, id: id, state: .failed, error: message, output: nil, now: now, logger: logger)
                } else {
                    try await connection.liveQuery(
                        """
                        UPDATE jobs SET state = 'ready', not_before = \(now), waiting = false, lease_owner = NULL,
                            lease_token = NULL, lease_expires = NULL, last_error = \(message) WHERE id = \(id)
                        """, logger: logger)
                }
            }
            try await connection.liveQuery(PostgresQuery(unsafeSQL: "SELECT \(notify)"), logger: logger)
        }
    }

    /// Extends the leases to `lease` from now on the server's clock; the answer carries that time.
    public func renew(_ leases: [Lease], worker: String, lease: Duration) async throws -> [LeaseStatus] {
        guard !leases.isEmpty else { return [] }
        try StoredText.checkWorker(worker)
        let ids = leases.map(\.job.rawValue)
        let tokens = leases.map(\.token)
        let rows = try await statement(
            "renew",
            """
            UPDATE jobs j SET lease_expires = coalesce(\(nowOverride)::float8, extract(epoch FROM now())::float8)
                    + \(lease.seconds)::float8,
                lease_owner = \(worker)
            FROM unnest(\(ids), \(tokens)) AS r(id, token)
            WHERE j.id = r.id AND j.lease_token = r.token AND j.state = 'running'
            RETURNING j.id, j.cancel_request, j.lease_expires
            """)
        var held: [Int64: (cancel: String?, until: Double)] = [:]
        for row in rows {
            let (id, cancel, until) = try row.decode((Int64, String?, Double).self)
            held[id] = (cancel, until)
        }
        return leases.map { lease in
            guard let (cancel, until) = held[lease.job.rawValue] else { return .lost }
            if let reason = cancel { return .cancelRequested(reason: reason, until: Date(storeTime: until)) }
            return .renewed(until: Date(storeTime: until))
        }
    }
}

extension PostgresConnection {
    /// `rows(of:logger:)` for a claim.
    func rows(of call: PostgresJobStore.ClaimCall, logger: Logger) async throws -> [PostgresRow] {
        switch call {
        case .oneKind(let statement): try await rows(of: statement, logger: logger)
        case .severalKinds(let statement): try await rows(of: statement, logger: logger)
        }
    }
}
