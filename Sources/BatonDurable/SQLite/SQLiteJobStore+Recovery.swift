import Foundation
import GRDB

extension SQLiteJobStore {
    /// The runs not finished yet whose name is `name`, newest first: what a program that was
    /// interrupted (killed, crashed) finds to resume.
    public func unfinishedRuns(named name: String) async throws -> [RunRecord] {
        try await reading { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, name, unique_key, created FROM baton_runs
                    WHERE finished IS NULL AND name = ? ORDER BY id DESC
                    """,
                arguments: [name]
            ).map { row in
                RunRecord(
                    id: DurableRunID(try row.value("id") as Int64), name: try row.value("name"),
                    uniqueKey: try row.value("unique_key"),
                    created: Date(storeTime: try row.value("created")), finished: nil)
            }
        }
    }

    /// Ends now the leases that `worker` holds, as if they had expired: for a worker known to be gone
    /// (its process no longer exists), so that its jobs are claimed again at once rather than when
    /// their leases run out. Each such job is ready again with its attempt counted (or failed, when it
    /// had no attempt left), exactly as after an expiry.
    ///
    /// Only call this for a worker that is certainly not running: a live worker would lose its jobs
    /// (its late completions are rejected by the lease token, so nothing is recorded twice, but the
    /// work is done again).
    ///
    /// - Returns: how many leases were ended.
    @discardableResult
    public func endLeases(ofWorker worker: String) async throws -> Int {
        let now = clock.now()
        return try await write(wake: true) { db in
            try db.execute(
                sql: "UPDATE baton_jobs SET lease_expires = ? WHERE state = 'running' AND lease_owner = ?",
                arguments: [now.addingTimeInterval(-1).storeTime, worker])
            let ended = db.changesCount
            if ended > 0 { try Self.endExpiredLeases(db, now: now) }
            return ended
        }
    }
}
