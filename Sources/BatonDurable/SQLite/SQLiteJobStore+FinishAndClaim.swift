import Foundation
import GRDB

extension SQLiteJobStore {
    /// Records the reports and claims up to `limit` ready jobs in one write transaction.
    ///
    /// This process's other workers are woken only when something is left for them: a ready job that
    /// this claim did not take (a dependent beyond `limit`, a retry, a job of a kind this worker does not
    /// run, one whose category just freed up), or a run that these reports finished (its
    /// `run(until:)` waiters). A chain step (finish job *i*, claim job *i + 1*) wakes nobody.
    public func finish(
        _ reports: [AttemptReport], thenClaim limit: Int, worker: String, kinds: [String], lease: Duration
    ) async throws -> (results: [FinishResult], claimed: [ClaimedJob]) {
        guard limit > 0, !kinds.isEmpty else { return (try await finish(reports), []) }
        let now = clock.now()
        let expires = now.adding(lease)
        let kinds = Array(Set(kinds)).sorted()
        let (results, claimed, wake) = try await write(wake: false) { db in
            let results = try reports.map { report in try Self.finishAttempt(db, report, now: now) }
            try Self.endExpiredLeases(db, now: now)
            let claimed = try Self.claimReady(
                db, worker: worker, kinds: kinds, limit: limit, now: now, expires: expires)
            var wake = false
            if !reports.isEmpty {
                wake =
                    try Bool.fetchOne(
                        db.cachedStatement(
                            sql: """
                                SELECT EXISTS (SELECT 1 FROM baton_jobs WHERE state = 'ready' AND waiting = 0)
                                    OR EXISTS (SELECT 1 FROM baton_jobs WHERE state = 'ready' AND waiting = 1)
                                    OR EXISTS (SELECT 1 FROM baton_runs WHERE finished = ?)
                                """),
                        arguments: [now.storeTime]) ?? true
            }
            return (results, claimed, wake)
        }
        if wake { wakeupHub.wake() }
        if !reports.isEmpty { outcomeHub.wake() }
        return (results, claimed)
    }
}
