public import BatonDurable
public import Foundation
import PostgresNIO

extension PostgresJobStore {
    /// The policy stored as `text` (a damaged one reads as none, as a completion treats it: the job is
    /// not retried), decoded once per text.
    static func policy(_ text: String, cache: inout [String: RetryPolicy]) -> RetryPolicy {
        if let known = cache[text] { return known }
        let policy = RetryPolicy.stored(text) ?? .never
        cache[text] = policy
        return policy
    }

    /// The run as the server sees it, with the server's "now" (its clock decides leases and retries).
    public func snapshot(of run: DurableRunID) async throws -> RunSnapshot {
        let logger = logger
        return try await transaction("snapshot") { connection in
            // One consistent view of the run, as SQLite's read transaction gives.
            try await connection.liveQuery("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            let now = Date(storeTime: try await self.serverTime(on: connection))
            guard
                let runRow = try await connection.liveQuery(
                    "SELECT name, unique_key, created, finished FROM runs WHERE id = \(run.rawValue)", logger: logger
                ).collect().first
            else {
                throw DurableError(
                    code: .unknownRun,
                    message: "\(run) is not in the store: it was never submitted here, or was pruned.")
            }
            let (name, uniqueKey, created, finished) = try runRow.decode((String, String?, Double, Double?).self)
            let record = RunRecord(
                id: run, name: name, uniqueKey: uniqueKey, created: Date(storeTime: created),
                finished: finished.map(Date.init(storeTime:)))
            var dependencies: [Int64: [JobRecord.Dependency]] = [:]
            for try await (job, dependency, regardless, includesAdded) in try await connection.liveQuery(
                """
                SELECT e.job, e.dependency, e.run_regardless, e.includes_added FROM edges e JOIN jobs j ON j.id = e.job
                WHERE j.run = \(run.rawValue) ORDER BY e.job, e.dependency
                """, logger: logger
            ).decode((Int64, Int64, Bool, Bool).self) {
                dependencies[job, default: []].append(
                    JobRecord.Dependency(
                        job: DurableJobID(dependency), runRegardless: regardless, includingAdded: includesAdded))
            }
            var categories: [Int64: [DurableCategory]] = [:]
            for try await (job, category, limit) in try await connection.liveQuery(
                """
                SELECT c.job, c.category, c.max_holders FROM job_categories c JOIN jobs j ON j.id = c.job
                WHERE j.run = \(run.rawValue) ORDER BY c.job, c.category
                """, logger: logger
            ).decode((Int64, String, Int).self) {
                categories[job, default: []].append(DurableCategory(name: category, limit: limit))
            }
            // Each distinct policy text is decoded once: a run's jobs mostly share one, and decoding it for
            // each of 20,000 jobs was most of the time of a large run's snapshot.
            var policies: [String: RetryPolicy] = [:]
            var jobs: [JobRecord] = []
            for row in try await connection.liveQuery(
                """
                SELECT id, name, kind, state, attempts, retry, priority, timeout, input_from, not_before, lease_owner,
                    lease_expires, cancel_request, last_error, output, finished, added_by, max_attempts
                FROM jobs WHERE run = \(run.rawValue) ORDER BY idx
                """, logger: logger
            ).collect() {
                // Reading a large run's rows is work, not a server that stopped answering.
                if jobs.count % 1000 == 0 { PostgresTimeout.progressed() }
                let c = row.makeRandomAccess()
                let id = try c["id"].decode(Int64.self)
                let notBefore = try c["not_before"].decode(Double.self)
                jobs.append(
                    JobRecord(
                        id: DurableJobID(id), run: run, name: try c["name"].decode(String.self),
                        kind: try c["kind"].decode(String.self),
                        state: DurableJobState(rawValue: try c["state"].decode(String.self)) ?? .failed,
                        attempts: try c["attempts"].decode(Int.self),
                        retry: Self.policy(try c["retry"].decode(String.self), cache: &policies),
                        priority: try c["priority"].decode(Int.self),
                        timeout: try c["timeout"].decode(Double?.self).map { Duration.seconds($0) },
                        categories: categories[id] ?? [], dependencies: dependencies[id] ?? [],
                        inputFrom: try c["input_from"].decode(Int64?.self).map { DurableJobID($0) },
                        notBefore: notBefore > 0 ? Date(storeTime: notBefore) : nil,
                        leaseOwner: try c["lease_owner"].decode(String?.self),
                        leaseExpires: try c["lease_expires"].decode(Double?.self).map(Date.init(storeTime:)),
                        cancelRequest: try c["cancel_request"].decode(String?.self),
                        lastError: try c["last_error"].decode(String?.self), output: try c["output"].decode(Data?.self),
                        finished: try c["finished"].decode(Double?.self).map(Date.init(storeTime:)),
                        addedBy: try c["added_by"].decode(Int64?.self).map { DurableJobID($0) },
                        maxAttempts: try c["max_attempts"].decode(Int.self)))
            }
            let names = Array(Set(jobs.filter { !$0.state.isFinished }.flatMap { $0.categories.map(\.name) })).sorted()
            var holders: [CategoryHolder] = []
            if !names.isEmpty {
                for try await (category, job, jobName, jobRun) in try await connection.liveQuery(
                    """
                    SELECT h.category, h.job, j.name, j.run FROM holders h JOIN jobs j ON j.id = h.job
                    WHERE h.category = ANY(\(names)) ORDER BY h.category, h.job
                    """, logger: logger
                ).decode((String, Int64, String, Int64).self) {
                    holders.append(
                        CategoryHolder(
                            category: category, job: DurableJobID(job), jobName: jobName, run: DurableRunID(jobRun)))
                }
            }
            var workers: [WorkerRecord] = []
            for try await (id, kinds, expires) in try await connection.liveQuery(
                "SELECT id, kinds, expires FROM workers WHERE expires > \(now.storeTime) ORDER BY id", logger: logger
            ).decode((String, [String], Double).self) {
                workers.append(WorkerRecord(id: id, kinds: kinds, expires: Date(storeTime: expires)))
            }
            return RunSnapshot(
                run: record, jobs: jobs, holders: holders, workers: workers, now: now,
                clock: "the database server's clock")
        }
    }

    /// One row, not the run's snapshot: a worker running `until:` a run asks this whenever it finds
    /// nothing to claim, and reading every job of a large run each time made each step of a long chain
    /// cost time in proportion to the chain's length.
    public func record(of run: DurableRunID) async throws -> RunRecord {
        let rows = try await statement(
            "record(of:)", "SELECT name, unique_key, created, finished FROM runs WHERE id = \(run.rawValue)",
            readOnly: true)
        guard let row = rows.first else {
            throw DurableError(
                code: .unknownRun, message: "\(run) is not in the store: it was never submitted here, or was pruned.")
        }
        let (name, uniqueKey, created, finished) = try row.decode((String, String?, Double, Double?).self)
        return RunRecord(
            id: run, name: name, uniqueKey: uniqueKey, created: Date(storeTime: created),
            finished: finished.map(Date.init(storeTime:)))
    }

    public func traceCarrier(of run: DurableRunID) async throws -> [String: String] {
        let rows = try await statement(
            "traceCarrier", "SELECT trace_context FROM runs WHERE id = \(run.rawValue)", readOnly: true)
        return TraceCarrierCoding.decode(try rows.first?.decode(String?.self) ?? nil)
    }

    public func run(of job: DurableJobID) async throws -> DurableRunID {
        let rows = try await statement("run(of:)", "SELECT run FROM jobs WHERE id = \(job.rawValue)", readOnly: true)
        guard let row = rows.first else {
            throw DurableError(
                code: .unknownJob, message: "\(job) is not in the store: never submitted here, or pruned.")
        }
        return DurableRunID(try row.decode(Int64.self))
    }

    /// The server's answer, moved onto this process's clock: the time from the server's now to the due
    /// date, added to ``clock``'s now — so a worker on a machine whose clock is set differently waits
    /// as long as the server means.
    public func nextDueDate(kinds: [String]) async throws -> Date? {
        guard !kinds.isEmpty else { return nil }
        let asked = clock.now()
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(nowOverride)
        bindings.append(kinds)
        let rows = try await prepared("nextDueDate", Prepared<NextDue>(bindings: bindings), readOnly: true)
        return try rows.first?.decode(Double?.self).map { asked.addingTimeInterval($0) }
    }

    /// The time from now ($1, NULL: the server's clock) to the earliest `notBefore` of a ready job of
    /// kinds $2, or the earliest lease expiry; prepared, as every claim that leaves room asks it.
    ///
    /// Each kind's earliest is the first entry of its range in the index of waiting jobs by kind and start
    /// (`jobs_waiting`): one `min` over `kind = ANY($2)` read every waiting job of the kinds. A job that
    /// does not wait (`waiting` false) was due when it was made ready or promoted.
    enum NextDue: PreparedText {
        static let name = "baton_next_due_v3"
        static let sql = """
            WITH now AS MATERIALIZED (SELECT coalesce($1::float8, extract(epoch FROM now())::float8) AS t)
            SELECT LEAST(
                (SELECT min(d.start) FROM unnest($2::text[]) AS k(kind), LATERAL (
                    SELECT not_before AS start FROM jobs
                    WHERE state = 'ready' AND waiting AND kind = k.kind AND not_before > (SELECT t FROM now)
                    ORDER BY not_before LIMIT 1) d),
                (SELECT min(lease_expires) FROM jobs WHERE state = 'running')) - (SELECT t FROM now)
            """
    }

    public func prune(finishedBefore date: Date) async throws -> Int {
        try date.checkStorable(in: "prune(finishedBefore:)")
        let logger = logger
        return try await transaction("prune") { connection in
            let runs = try await connection.liveQuery(
                "SELECT id FROM runs WHERE finished IS NOT NULL AND finished < \(date.storeTime) FOR UPDATE",
                logger: logger
            ).collect().map { try $0.decode(Int64.self) }
            guard !runs.isEmpty else { return 0 }
            try await Self.deleteRuns(connection, runs, logger: logger)
            return runs.count
        }
    }

    /// Stores the registration to last as long from the server's now as `worker.expires` is from this
    /// process's (``clock``'s): `explain` judges it on the server's clock.
    public func register(_ worker: WorkerRecord) async throws {
        try StoredText.checkWorker(worker.id)
        let lasts = worker.expires.timeIntervalSince(clock.now())
        _ = try await statement(
            "register",
            """
            INSERT INTO workers (id, kinds, expires)
            VALUES (\(worker.id), \(worker.kinds.sorted()),
                coalesce(\(nowOverride)::float8, extract(epoch FROM now())::float8) + \(lasts)::float8)
            ON CONFLICT (id) DO UPDATE SET kinds = EXCLUDED.kinds, expires = EXCLUDED.expires
            """)
    }

    public func unregister(worker: String) async throws {
        _ = try await statement("unregister", "DELETE FROM workers WHERE id = \(worker)")
    }
}
