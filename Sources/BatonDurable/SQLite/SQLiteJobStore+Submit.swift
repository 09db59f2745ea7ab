import Foundation
public import GRDB

extension SQLiteJobStore {
    public func submit(_ graph: GraphSpec, uniqueKey: String?) async throws -> SubmittedRun {
        let insert = try prepareInsert(graph, uniqueKey: uniqueKey)
        return try await write(wake: true) { db in try insert(db) }
    }

    /// Stores a whole graph in the caller's own transaction: the run exists if and only if that
    /// transaction commits, and no worker sees it before then.
    ///
    /// ```swift
    /// try await appDatabase.write { db in
    ///     try Order(id: 7, total: 12).insert(db)
    ///     try store.submit(shipOrder(7), uniqueKey: "ship-7", in: db)
    /// }
    /// ```
    ///
    /// `db` must be a connection to the store's own file (the `baton_…` tables live beside the
    /// application's); the graph is written in a savepoint of the caller's transaction (or, outside a
    /// transaction, in one of its own). This process's workers are woken when that transaction commits;
    /// workers of other processes find the run at their next poll. A `uniqueKey` behaves as in
    /// ``submit(_:uniqueKey:)``: a run holding it, committed or written earlier in the same transaction,
    /// is returned with ``SubmittedRun/existing`` set. The identities returned are the run's once the
    /// transaction commits: after a rollback, SQLite may give them to a later run, as it does rowids.
    ///
    /// - Throws: ``DurableError``: ``DurableError/Code/invalidGraph`` or ``DurableError/Code/dependencyCycle``
    ///   before writing anything; ``DurableError/Code/misuse`` when `db` is a connection to another file (or
    ///   the store is in memory); GRDB's errors as they happen, which the caller's transaction handles.
    public func submit(_ graph: GraphSpec, uniqueKey: String?, in db: Database) throws -> SubmittedRun {
        try checkOpen()
        try checkSameFile(db)
        let insert = try prepareInsert(graph, uniqueKey: uniqueKey)
        var submitted: SubmittedRun?
        try db.inSavepoint {
            submitted = try insert(db)
            return .commit
        }
        let wakeupHub = wakeupHub
        let outcomeHub = outcomeHub
        if db.isInsideTransaction {
            db.afterNextTransaction(onCommit: { _ in
                wakeupHub.wake()
                outcomeHub.wake()
            })
        } else {
            wakeupHub.wake()
            outcomeHub.wake()
        }
        return submitted!
    }

    /// Submits a typed graph in the caller's own transaction, as ``submit(_:uniqueKey:in:)-(GraphSpec,_,_)``
    /// does; the submitter's trace context is stored with the run, as by ``JobStore/submit(_:uniqueKey:instrument:)``.
    ///
    /// ```swift
    /// try await appDatabase.write { db in
    ///     try db.execute(sql: "INSERT INTO orders (id) VALUES (?)", arguments: [7])
    ///     var graph = JobGraph(name: "ship order 7")
    ///     _ = graph.add(ShipOrder.self, input: 7)
    ///     return try store.submit(graph, uniqueKey: "ship-7", in: db)
    /// }
    /// ```
    ///
    /// - Throws: as ``submit(_:uniqueKey:in:)-(GraphSpec,_,_)``, and ``DurableError/Code/uniqueKeyConflict`` when the
    ///   run holding `uniqueKey` has another shape than `graph`.
    public func submit(_ graph: JobGraph, uniqueKey: String? = nil, in db: Database) throws -> DurableRun {
        var spec = try graph.spec()
        spec.traceCarrier = spec.carrierToStore()
        let run = DurableRun(try submit(spec, uniqueKey: uniqueKey, in: db))
        guard run.existing else { return run }
        var stored: [(String, String)?] = []
        if run.jobs.count == spec.jobs.count {
            let rows = try Row.fetchAll(
                db, sql: "SELECT name, kind FROM baton_jobs WHERE run = ? AND added_by IS NULL ORDER BY idx",
                arguments: [run.id.rawValue])
            stored = try rows.map { (try $0.value(at: 0) as String, try $0.value(at: 1) as String) }
        }
        try spec.checkShape(of: run, uniqueKey: uniqueKey, stored: stored)
        return run
    }

    /// Refuses a connection that is not to this store's file: its `baton_…` tables would be another
    /// store's, or missing. Files are compared by identity (device and inode), so a path through a
    /// link, or relative, names the same file.
    func checkSameFile(_ db: Database) throws {
        let theirs =
            try Row.fetchAll(db, sql: "PRAGMA database_list")
            .first { (try $0.value("name") as String?) == "main" }?["file"] as String? ?? ""
        let ours = (writer as? DatabasePool)?.path ?? ""
        guard !ours.isEmpty else {
            throw DurableError(
                code: .misuse,
                message:
                    "this job store is in memory: it cannot share a transaction with another connection. Open it with SQLiteJobStore(path:) on the application's database file."
            )
        }
        func identity(_ path: String) -> (UInt64, UInt64)? {
            var info = stat()
            guard !path.isEmpty, stat(path, &info) == 0 else { return nil }
            return (UInt64(info.st_dev), UInt64(info.st_ino))
        }
        guard let mine = identity(ours), let other = identity(theirs), mine == other else {
            throw DurableError(
                code: .misuse,
                message:
                    "the transaction given to submit(_:uniqueKey:in:) is on '\(theirs.isEmpty ? "a database in memory" : theirs)', but this job store is the file '\(ours)': a graph can be submitted only in a transaction of the store's own file. Open the store on the application's database file (its tables are named baton_…), or submit outside the transaction."
            )
        }
    }

    /// Validates and encodes a graph, and returns what writes it in a transaction.
    private func prepareInsert(
        _ graph: GraphSpec, uniqueKey: String?
    ) throws -> @Sendable (Database) throws -> SubmittedRun {
        try graph.validate()
        try StoredText.checkUniqueKey(uniqueKey)
        let now = clock.now().storeTime
        let encoder = JSONEncoder()
        let retries = try graph.jobs.map { String(decoding: try encoder.encode($0.retry), as: UTF8.self) }
        let carrier = TraceCarrierCoding.encode(graph.carrierToStore())
        return { db in
            try Self.insert(graph, uniqueKey: uniqueKey, now: now, retries: retries, carrier: carrier, db)
        }
    }

    /// Validates `graph` and writes it in the transaction `db` (a schedule's tick).
    static func insertChecked(_ graph: GraphSpec, uniqueKey: String, now: Double, _ db: Database) throws -> SubmittedRun
    {
        try graph.validate()
        let encoder = JSONEncoder()
        let retries = try graph.jobs.map { String(decoding: try encoder.encode($0.retry), as: UTF8.self) }
        return try insert(graph, uniqueKey: uniqueKey, now: now, retries: retries, carrier: nil, db)
    }

    /// Writes a validated graph: its run, jobs, edges and categories.
    private static func insert(
        _ graph: GraphSpec, uniqueKey: String?, now: Double, retries: [String], carrier: String?, _ db: Database
    ) throws -> SubmittedRun {
        if let uniqueKey,
            let existing = try Int64.fetchOne(
                db, sql: "SELECT id FROM baton_runs WHERE unique_key = ?", arguments: [uniqueKey])
        {
            // The jobs it was submitted with: a run that grew (jobs that add jobs) is still the same shape.
            let jobs = try Int64.fetchAll(
                db, sql: "SELECT id FROM baton_jobs WHERE run = ? AND added_by IS NULL ORDER BY idx",
                arguments: [existing])
            return SubmittedRun(run: DurableRunID(existing), jobs: jobs.map { DurableJobID($0) }, existing: true)
        }
        // Identities of committed runs are never handed out twice, even after `prune` deleted the newest
        // runs (SQLite would reuse them): a job's idempotency key, and a run a client still names, stay its
        // own. (Those of a rolled-back submission in the caller's transaction may be used again.)
        let run = try nextID(db, table: "baton_runs")
        try db.execute(
            sql: """
                INSERT INTO baton_runs (id, name, unique_key, created, unfinished, jobs, trace_context)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [run, graph.name, uniqueKey, now, graph.jobs.count, graph.jobs.count, carrier])
        let ids = try insertJobs(
            db, run: run, jobs: graph.jobs, retries: retries, firstIndex: 0, addedBy: nil,
            remaining: graph.jobs.map { Set($0.allDependencies.map(\.index)).count })
        if graph.jobs.isEmpty {
            try db.execute(sql: "UPDATE baton_runs SET finished = ? WHERE id = ?", arguments: [now, run])
        }
        return SubmittedRun(run: DurableRunID(run), jobs: ids.map { DurableJobID($0) }, existing: false)
    }

    /// Writes validated jobs into `run` (their `idx` from `firstIndex`), with their edges among them,
    /// their inputs' sources and their categories; `remaining` counts each one's unfinished dependencies.
    /// Returns their identities, in order.
    static func insertJobs(
        _ db: Database, run: Int64, jobs: [JobSpec], retries: [String], firstIndex: Int, addedBy: Int64?,
        remaining: [Int]
    ) throws -> [Int64] {
        let firstJob = try nextID(db, table: "baton_jobs")
        let insertJob = try db.cachedStatement(
            sql: """
                INSERT INTO baton_jobs (id, run, idx, name, kind, state, input, remaining, max_attempts, retry,
                    priority, timeout, has_categories, not_before, waiting, added_by)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        var ids: [Int64] = []
        ids.reserveCapacity(jobs.count)
        for (index, job) in jobs.enumerated() {
            try insertJob.execute(arguments: [
                firstJob + Int64(index), run, firstIndex + index, job.name, job.kind,
                (remaining[index] == 0 ? DurableJobState.ready : .pending).rawValue,
                job.input, remaining[index], job.retry.maxAttempts, retries[index], job.priority,
                job.timeout?.seconds, job.categories.isEmpty ? 0 : 1, job.notBefore?.storeTime ?? 0,
                job.notBefore == nil ? 0 : 1, addedBy,
            ])
            ids.append(firstJob + Int64(index))
        }
        let insertEdge = try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO baton_edges (dependency, job, run_regardless, includes_added)
                VALUES (?, ?, ?, ?)
                """)
        let setInputFrom = try db.cachedStatement(sql: "UPDATE baton_jobs SET input_from = ? WHERE id = ?")
        let insertCategory = try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO baton_job_categories (job, category, max_holders) VALUES (?, ?, ?)")
        for (index, job) in jobs.enumerated() {
            for dependency in job.storedDependencies {
                try insertEdge.execute(arguments: [
                    ids[dependency.index], ids[index], dependency.runRegardless, dependency.includingAdded,
                ])
            }
            if let from = job.inputFrom { try setInputFrom.execute(arguments: [ids[from], ids[index]]) }
            for category in job.categories {
                try insertCategory.execute(arguments: [ids[index], category.name, category.limit])
            }
        }
        return ids
    }

    /// The key in `baton_durable_meta` of the highest identity `table` has held (``prune(finishedBefore:)``
    /// records it before deleting).
    static func idFloorKey(_ table: String) -> String { "\(table)_id_floor" }

    /// The next identity of `table`: above every one it holds and every one it held.
    static func nextID(_ db: Database, table: String) throws -> Int64 {
        let held = try Int64.fetchOne(db, sql: "SELECT max(id) FROM \(table)") ?? 0
        let floor =
            try Int64.fetchOne(
                db, sql: "SELECT CAST(value AS INTEGER) FROM baton_durable_meta WHERE key = ?",
                arguments: [idFloorKey(table)]) ?? 0
        return max(held, floor) + 1
    }

    /// Records the highest identity of each table before rows are deleted, so that none is reused.
    static func recordIDFloors(_ db: Database) throws {
        for table in ["baton_runs", "baton_jobs"] {
            let next = try nextID(db, table: table)
            try db.execute(
                sql: "INSERT OR REPLACE INTO baton_durable_meta (key, value) VALUES (?, ?)",
                arguments: [idFloorKey(table), String(next - 1)])
        }
    }
}
