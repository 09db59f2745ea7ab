public import Foundation
import GRDB

extension SQLiteJobStore {
    public func snapshot(of run: DurableRunID) async throws -> RunSnapshot {
        let now = clock.now()
        return try await reading { db in
            guard
                let runRow = try Row.fetchOne(
                    db, sql: "SELECT id, name, unique_key, created, finished FROM baton_runs WHERE id = ?",
                    arguments: [run.rawValue])
            else {
                throw DurableError(
                    code: .unknownRun,
                    message: "\(run) is not in the store: it was never submitted here, or was pruned.")
            }
            let record = RunRecord(
                id: run, name: try runRow.value("name"), uniqueKey: try runRow.value("unique_key"),
                created: Date(storeTime: try runRow.value("created")),
                finished: (try runRow.value("finished") as Double?).map(Date.init(storeTime:)))
            var dependencies: [Int64: [JobRecord.Dependency]] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT e.job, e.dependency, e.run_regardless, e.includes_added
                    FROM baton_edges e JOIN baton_jobs j ON j.id = e.job
                    WHERE j.run = ? ORDER BY e.job, e.dependency
                    """, arguments: [run.rawValue])
            {
                dependencies[try row.value(at: 0), default: []].append(
                    JobRecord.Dependency(
                        job: DurableJobID(try row.value(at: 1) as Int64), runRegardless: try row.value(at: 2),
                        includingAdded: try row.value(at: 3)))
            }
            var categories: [Int64: [DurableCategory]] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT c.job, c.category, c.max_holders FROM baton_job_categories c JOIN baton_jobs j ON j.id = c.job
                    WHERE j.run = ? ORDER BY c.job, c.category
                    """, arguments: [run.rawValue])
            {
                categories[try row.value(at: 0), default: []].append(
                    DurableCategory(name: try row.value(at: 1), limit: try row.value(at: 2)))
            }
            let decoder = JSONDecoder()
            // Most jobs of a run share a few retry policies: each distinct text is decoded once.
            var policies: [String: RetryPolicy] = [:]
            // Columns by position (a name lookup per column and row costs more than the read at 100,000 jobs).
            let jobRows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT id, name, kind, state, attempts, retry, priority, timeout, input_from, not_before,
                        lease_owner, lease_expires, cancel_request, last_error, output, finished, added_by, max_attempts
                    FROM baton_jobs WHERE run = ? ORDER BY idx
                    """, arguments: [run.rawValue])
            var jobs: [JobRecord] = []
            jobs.reserveCapacity(
                try Int.fetchOne(db, sql: "SELECT count(*) FROM baton_jobs WHERE run = ?", arguments: [run.rawValue])
                    ?? 0)
            while let row = try jobRows.next() {
                let id: Int64 = try row.value(at: 0)
                let retryText: String = try row.value(at: 5)
                let retry: RetryPolicy
                if let known = policies[retryText] {
                    retry = known
                } else {
                    // A damaged policy reads as none, as a completion treats it (the job is not retried).
                    retry = (try? decoder.decode(RetryPolicy.self, from: Data(retryText.utf8))) ?? .never
                    policies[retryText] = retry
                }
                let notBefore: Double = try row.value(at: 9)
                jobs.append(
                    JobRecord(
                        id: DurableJobID(id), run: run, name: try row.value(at: 1), kind: try row.value(at: 2),
                        state: DurableJobState(rawValue: try row.value(at: 3)) ?? .failed,
                        attempts: try row.value(at: 4), retry: retry,
                        priority: try row.value(at: 6),
                        timeout: (try row.value(at: 7) as Double?).map { Duration.seconds($0) },
                        categories: categories[id] ?? [], dependencies: dependencies[id] ?? [],
                        inputFrom: (try row.value(at: 8) as Int64?).map { DurableJobID($0) },
                        notBefore: notBefore > 0 ? Date(storeTime: notBefore) : nil, leaseOwner: try row.value(at: 10),
                        leaseExpires: (try row.value(at: 11) as Double?).map(Date.init(storeTime:)),
                        cancelRequest: try row.value(at: 12),
                        lastError: try row.value(at: 13), output: try row.value(at: 14),
                        finished: (try row.value(at: 15) as Double?).map(Date.init(storeTime:)),
                        addedBy: (try row.value(at: 16) as Int64?).map { DurableJobID($0) },
                        maxAttempts: try row.value(at: 17)))
            }
            let names = Set(jobs.filter { !$0.state.isFinished }.flatMap { $0.categories.map(\.name) })
            var holders: [CategoryHolder] = []
            for name in names.sorted() {
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT h.job, j.name, j.run FROM baton_holders h JOIN baton_jobs j ON j.id = h.job
                        WHERE h.category = ? ORDER BY h.job
                        """, arguments: [name])
                {
                    holders.append(
                        CategoryHolder(
                            category: name, job: DurableJobID(try row.value("job") as Int64),
                            jobName: try row.value("name"),
                            run: DurableRunID(try row.value("run") as Int64)))
                }
            }
            let workers = try Row.fetchAll(
                db, sql: "SELECT id, kinds, expires FROM baton_workers WHERE expires > ? ORDER BY id",
                arguments: [now.storeTime]
            ).map { row in
                WorkerRecord(
                    id: try row.value("id"),
                    kinds: try decoder.decode([String].self, from: Data((try row.value("kinds") as String).utf8)),
                    expires: Date(storeTime: try row.value("expires")))
            }
            return RunSnapshot(run: record, jobs: jobs, holders: holders, workers: workers, now: now)
        }
    }

    public func record(of run: DurableRunID) async throws -> RunRecord {
        let record = try await reading { db -> RunRecord? in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT id, name, unique_key, created, finished FROM baton_runs WHERE id = ?",
                    arguments: [run.rawValue])
            else { return nil }
            return RunRecord(
                id: run, name: try row.value("name"), uniqueKey: try row.value("unique_key"),
                created: Date(storeTime: try row.value("created")),
                finished: (try row.value("finished") as Double?).map { Date(storeTime: $0) })
        }
        guard let record else {
            throw DurableError(
                code: .unknownRun, message: "\(run) is not in the store: it was never submitted here, or was pruned.")
        }
        return record
    }

    public func traceCarrier(of run: DurableRunID) async throws -> [String: String] {
        let text = try await reading { db in
            try String?.fetchOne(
                db, sql: "SELECT trace_context FROM baton_runs WHERE id = ?", arguments: [run.rawValue])
        }
        return TraceCarrierCoding.decode(text ?? nil)
    }

    public func run(of job: DurableJobID) async throws -> DurableRunID {
        let run = try await reading { db in
            try Int64.fetchOne(db, sql: "SELECT run FROM baton_jobs WHERE id = ?", arguments: [job.rawValue])
        }
        guard let run else {
            throw DurableError(
                code: .unknownJob, message: "\(job) is not in the store: never submitted here, or pruned.")
        }
        return DurableRunID(run)
    }

    public func nextDueDate(kinds: [String]) async throws -> Date? {
        guard !kinds.isEmpty else { return nil }
        let now = clock.now().storeTime
        let next = try await reading { db -> Double? in
            let ready = try Double.fetchOne(
                db, sql: Self.nextDueSQL(kinds: kinds.count), arguments: StatementArguments([now] + kinds))
            let lease = try Double.fetchOne(
                db, sql: "SELECT min(lease_expires) FROM baton_jobs WHERE state = 'running'")
            return [ready, lease].compactMap { $0 }.min()
        }
        return next.map(Date.init(storeTime:))
    }

    /// The earliest start of a ready job of `count` kinds (? now, then the kinds) that may not start yet,
    /// through the index of waiting jobs by kind and start (`baton_jobs_waiting`): it reads the jobs of
    /// those kinds that wait for their time, not every ready job.
    static func nextDueSQL(kinds count: Int) -> String {
        let placeholders = Array(repeating: "?", count: count).joined(separator: ",")
        return
            "SELECT min(not_before) FROM baton_jobs WHERE state = 'ready' AND waiting = 1 AND not_before > ? "
            + "AND kind IN (\(placeholders))"
    }

    /// Prunes in transactions of a few thousand jobs each (a run's jobs are never split), oldest runs
    /// first: the file's write lock is held for a batch at a time, so that workers' renewals and reports
    /// get in between. In one transaction, 80,000 runs held it for 38 s, and every running job of every
    /// worker of the file was stopped as its lease ran out (found by a probe, 7 December 2026). A prune
    /// that is cancelled stops between batches; what it deleted stays deleted.
    public func prune(finishedBefore date: Date) async throws -> Int {
        try date.checkStorable(in: "prune(finishedBefore:)")
        var total = 0
        while true {
            try Task.checkCancellation()
            let (pruned, more) = try await write(wake: false) { db -> (Int, Bool) in
                var runs: [Int64] = []
                var jobs = 0
                let candidates = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT id, jobs FROM baton_runs WHERE finished IS NOT NULL AND finished < ?
                        ORDER BY finished LIMIT ?
                        """, arguments: [date.storeTime, Self.pruneBatchRuns])
                while jobs < Self.pruneBatchJobs, let row = try candidates.next() {
                    runs.append(try row.value(at: 0))
                    jobs += max(1, try row.value(at: 1) as Int)
                }
                guard !runs.isEmpty else { return (0, false) }
                try Self.recordIDFloors(db)
                try Self.deleteRuns(db, runs)
                return (runs.count, true)
            }
            total += pruned
            if !more { return total }
        }
    }

    /// The most runs, and (but for a run larger alone) jobs, that one transaction of a prune deletes.
    static let pruneBatchRuns = 500
    static let pruneBatchJobs = 5_000

    public func register(_ worker: WorkerRecord) async throws {
        try StoredText.checkWorker(worker.id)
        let kinds = String(decoding: try JSONEncoder().encode(worker.kinds.sorted()), as: UTF8.self)
        try await write(wake: false) { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO baton_workers (id, kinds, expires) VALUES (?, ?, ?)",
                arguments: [worker.id, kinds, worker.expires.storeTime])
        }
    }

    public func unregister(worker: String) async throws {
        try await write(wake: false) { db in
            try db.execute(sql: "DELETE FROM baton_workers WHERE id = ?", arguments: [worker])
        }
    }
}
