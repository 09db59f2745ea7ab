import Foundation
import GRDB

extension SQLiteJobStore {
    public func submit(_ graph: GraphSpec, uniqueKey: String?) async throws -> SubmittedRun {
        try graph.validate()
        try StoredText.checkUniqueKey(uniqueKey)
        let now = clock.now().storeTime
        let encoder = JSONEncoder()
        let retries = try graph.jobs.map { String(decoding: try encoder.encode($0.retry), as: UTF8.self) }
        let carrier = TraceCarrierCoding.encode(graph.carrierToStore())
        let result = try await write(wake: true) { db -> SubmittedRun in
            if let uniqueKey,
                let existing = try Int64.fetchOne(
                    db, sql: "SELECT id FROM baton_runs WHERE unique_key = ?", arguments: [uniqueKey])
            {
                let jobs = try Int64.fetchAll(
                    db, sql: "SELECT id FROM baton_jobs WHERE run = ? ORDER BY idx", arguments: [existing])
                return SubmittedRun(run: DurableRunID(existing), jobs: jobs.map { DurableJobID($0) }, existing: true)
            }
            // Identities are never handed out twice, even after `prune` deleted the newest runs (SQLite
            // would reuse them): a job's idempotency key, and a run a client still names, stay its own.
            let run = try Self.nextID(db, table: "baton_runs")
            try db.execute(
                sql: """
                    INSERT INTO baton_runs (id, name, unique_key, created, unfinished, trace_context)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [run, graph.name, uniqueKey, now, graph.jobs.count, carrier])
            let firstJob = try Self.nextID(db, table: "baton_jobs")
            let insertJob = try db.cachedStatement(
                sql: """
                    INSERT INTO baton_jobs (id, run, idx, name, kind, state, input, remaining, max_attempts, retry,
                        priority, timeout, has_categories, not_before)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            var ids: [Int64] = []
            ids.reserveCapacity(graph.jobs.count)
            for (index, job) in graph.jobs.enumerated() {
                let remaining = Set(job.allDependencies.map(\.index)).count
                try insertJob.execute(arguments: [
                    firstJob + Int64(index), run, index, job.name, job.kind,
                    (remaining == 0 ? DurableJobState.ready : .pending).rawValue,
                    job.input, remaining, job.retry.maxAttempts, retries[index], job.priority,
                    job.timeout?.durableSeconds, job.categories.isEmpty ? 0 : 1, job.notBefore?.storeTime ?? 0,
                ])
                ids.append(firstJob + Int64(index))
            }
            let insertEdge = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO baton_edges (dependency, job, run_regardless) VALUES (?, ?, ?)")
            let setInputFrom = try db.cachedStatement(sql: "UPDATE baton_jobs SET input_from = ? WHERE id = ?")
            let insertCategory = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO baton_job_categories (job, category, max_holders) VALUES (?, ?, ?)")
            for (index, job) in graph.jobs.enumerated() {
                for dependency in job.allDependencies {
                    try insertEdge.execute(arguments: [ids[dependency.index], ids[index], dependency.runRegardless])
                }
                if let from = job.inputFrom { try setInputFrom.execute(arguments: [ids[from], ids[index]]) }
                for category in job.categories {
                    try insertCategory.execute(arguments: [ids[index], category.name, category.limit])
                }
            }
            if graph.jobs.isEmpty {
                try db.execute(sql: "UPDATE baton_runs SET finished = ? WHERE id = ?", arguments: [now, run])
            }
            return SubmittedRun(run: DurableRunID(run), jobs: ids.map { DurableJobID($0) }, existing: false)
        }
        return result
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
