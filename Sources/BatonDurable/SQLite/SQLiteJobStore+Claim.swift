import Foundation
import GRDB

extension SQLiteJobStore {
    public func claim(worker: String, kinds: [String], limit: Int, lease: Duration) async throws -> [ClaimedJob] {
        guard limit > 0, !kinds.isEmpty else { return [] }
        try StoredText.checkWorker(worker)
        let now = clock.now()
        let expires = now.adding(lease)
        let kinds = Array(Set(kinds)).sorted()
        return try await write(wake: false) { db in
            try Self.endExpiredLeases(db, now: now)
            return try Self.claimReady(db, worker: worker, kinds: kinds, limit: limit, now: now, expires: expires)
        }
    }

    /// Ends the leases that ran out before `now`: the job is ready again, or failed when it has no
    /// attempt left, or cancelled when its cancellation was requested.
    static func endExpiredLeases(_ db: Database, now: Date) throws {
        let expired = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT id, attempts, max_attempts, lease_owner, lease_expires, cancel_request, lease_token
                    FROM baton_jobs WHERE state = 'running' AND lease_expires < ?
                    """),
            arguments: [now.storeTime])
        for row in expired {
            let id: Int64 = try row.value("id")
            let attempts: Int = try row.value("attempts")
            let owner: String = try row.value("lease_owner") ?? "?"
            let at = Date(storeTime: try row.value("lease_expires"))
            let message =
                "attempt \(attempts) lost: the lease of worker '\(owner)' expired at \(at.formatted(.iso8601))"
            try releaseCategories(db, job: id)
            let cancelRequest: String? = try row.value("cancel_request")
            let result: DurableJobState =
                cancelRequest != nil
                ? .cancelled : attempts >= (try row.value("max_attempts") as Int) ? .failed : .ready
            try recordAttempt(
                db, Lease(job: DurableJobID(id), token: try row.value("lease_token") ?? 0), attempt: attempts,
                worker: try row.value("lease_owner"), now: now, outcome: .lost, result: result, error: message)
            if let reason = cancelRequest {
                try finishJob(db, id: id, state: .cancelled, error: reason, output: nil, now: now)
            } else if try attempts >= row.value("max_attempts") as Int {
                try finishJob(db, id: id, state: .failed, error: message, output: nil, now: now)
            } else {
                try db.cachedStatement(
                    sql: """
                        UPDATE baton_jobs SET state = 'ready', not_before = ?, waiting = 0, lease_owner = NULL,
                            lease_token = NULL, lease_expires = NULL, last_error = ? WHERE id = ?
                        """
                ).execute(arguments: [now.storeTime, message, id])
            }
        }
    }

    static func claimReady(
        _ db: Database, worker: String, kinds: [String], limit: Int, now: Date, expires: Date
    ) throws -> [ClaimedJob] {
        let select = try db.cachedStatement(sql: claimCandidatesSQL(kinds: kinds.count))
        let update = try db.cachedStatement(
            sql: """
                UPDATE baton_jobs SET state = 'running', attempts = attempts + 1, lease_owner = ?, lease_token = ?,
                    lease_expires = ?, started = ? WHERE id = ?
                """)
        let categoriesOf = try db.cachedStatement(
            sql: "SELECT category, max_holders FROM baton_job_categories WHERE job = ?")
        let countHolders = try db.cachedStatement(sql: "SELECT count(*) FROM baton_holders WHERE category = ?")
        let hold = try db.cachedStatement(sql: "INSERT INTO baton_holders (category, job) VALUES (?, ?)")

        var claimed: [ClaimedJob] = []
        while claimed.count < limit {
            let page = limit - claimed.count
            // Before each page: the previous one may have filled a category that held back the due jobs
            // it promoted, and those left the others waiting (one look through an index when none is due).
            try promoteDue(db, kinds: kinds, limit: page, now: now)
            let rows = try Row.fetchAll(select, arguments: StatementArguments([now.storeTime, page] + kinds))
            var progress = false
            // Columns by position: id, run, name, kind, attempts, max_attempts, priority, timeout,
            // has_categories, input.
            for row in rows {
                let id: Int64 = try row.value(at: 0)
                if try row.value(at: 8) as Int != 0 {
                    // Recheck against the holders added by this claim.
                    let categories = try Row.fetchAll(categoriesOf, arguments: [id])
                    var fits = true
                    for category in categories {
                        let held =
                            try Int.fetchOne(countHolders, arguments: [try category.value("category") as String]) ?? 0
                        if try held >= category.value("max_holders") as Int { fits = false }
                    }
                    guard fits else { continue }
                    for category in categories {
                        try hold.execute(arguments: [try category.value("category") as String, id])
                    }
                }
                let token = Lease.newToken()
                try update.execute(arguments: [worker, token, expires.storeTime, now.storeTime, id])
                progress = true
                claimed.append(
                    ClaimedJob(
                        lease: Lease(job: DurableJobID(id), token: token),
                        run: DurableRunID(try row.value(at: 1) as Int64),
                        name: try row.value(at: 2), kind: try row.value(at: 3), input: try row.value(at: 9) ?? Data(),
                        attempt: try row.value(at: 4) as Int + 1,
                        maxAttempts: try row.value(at: 5), priority: try row.value(at: 6),
                        timeout: (try row.value(at: 7) as Double?).map { Duration.seconds($0) }, leaseExpires: expires))
            }
            // A short page means nothing else is claimable; a page that made no progress would repeat.
            if rows.count < page || !progress { break }
        }
        return claimed
    }

    /// Makes the ready jobs of `kinds` that waited for their time and whose time has come (`not_before`
    /// at or before `now`) claimable: they leave the index of waiting jobs (`baton_jobs_waiting`) for the
    /// index claims read (`baton_jobs_claim`), keeping their place in claims' order (priority, then id).
    ///
    /// Jobs that wait for their time — retries backing off, jobs submitted with a start date — are kept
    /// out of the claims' index: a retry keeps its id, so it sorts before the jobs submitted after it,
    /// and a claim read past every retry of its kind that was backing off, at each look (a backlog of
    /// retries after a failing dependency came back slowed every claim in proportion). This reads the
    /// waiting jobs that are due, each of them once in the common case. After a long pause (no claim
    /// while 100,000 retries came due), it promotes the best `max(limit, 1,000)` of those whose
    /// categories have room: every due job it leaves waits behind these, so a claim of up to `limit`
    /// keeps its order, and no claim promotes the whole backlog at once. (Counting the jobs a full
    /// category holds back in the 1,000 would let a younger or lower job be claimed first.) A due job
    /// held back by its categories stays waiting and is looked at again by each claim, as a ready one
    /// held back is.
    static func promoteDue(_ db: Database, kinds: [String], limit: Int, now: Date) throws {
        try db.cachedStatement(sql: promoteDueSQL(kinds: kinds.count))
            .execute(arguments: StatementArguments([now.storeTime, max(limit, 1000)] + kinds))
    }

    /// The statement of ``promoteDue(_:kinds:limit:now:)``: ?1 now, ?2 how many at most, then the kinds.
    static func promoteDueSQL(kinds count: Int) -> String {
        let placeholders = (0..<count).map { "?\($0 + 3)" }.joined(separator: ",")
        return """
            UPDATE baton_jobs SET waiting = 0 WHERE id IN (
                SELECT a.id FROM baton_jobs a
                WHERE a.state = 'ready' AND a.waiting = 1 AND a.kind IN (\(placeholders)) AND a.not_before <= ?1
                    AND \(roomFor("a"))
                ORDER BY a.priority DESC, a.id LIMIT ?2)
            """
    }

    /// The claim's look for candidates: ready jobs of `kinds` kinds whose categories all have room, as the
    /// holders table says before this claim.
    ///
    /// The first of each kind come through the index of claimable jobs by kind (`baton_jobs_claim`; ?1
    /// now, ?2 the page, ?3... the kinds), then the first of those. A claim reads only the ready jobs of
    /// its kinds that do not wait for their time, however many of other kinds wait: one look through all
    /// ready jobs in priority order read past every one of them (19 ms behind 100,000 for a worker with
    /// nothing to do). A job not marked `waiting` was due when it was promoted or made ready; its time is
    /// compared again all the same (`+` keeps it off every index).
    static func claimCandidatesSQL(kinds count: Int) -> String {
        // SQLite allows 500 terms in a compound SELECT: past 200 kinds, an arm takes several (and sorts
        // their ready jobs).
        let perArm = (count + 199) / 200
        let arms = stride(from: 0, to: count, by: perArm).map { first in
            let parameters = (first..<min(first + perArm, count)).map { "?\($0 + 3)" }
            let kind = parameters.count == 1 ? "= \(parameters[0])" : "IN (\(parameters.joined(separator: ", ")))"
            return """
                SELECT id FROM (SELECT a.id FROM baton_jobs a
                    WHERE a.state = 'ready' AND a.waiting = 0 AND a.kind \(kind) AND +a.not_before <= ?1
                        AND \(roomFor("a"))
                    ORDER BY a.priority DESC, a.id LIMIT ?2)
                """
        }
        return """
            SELECT j.id, j.run, j.name, j.kind, j.attempts, j.max_attempts, j.priority, j.timeout,
                j.has_categories, COALESCE(j.input, (SELECT d.output FROM baton_jobs d WHERE d.id = j.input_from)) AS input
            FROM baton_jobs j
            WHERE j.id IN (\(arms.joined(separator: " UNION ALL ")))
            ORDER BY j.priority DESC, j.id
            LIMIT ?2
            """
    }

    /// In the claim's statements: the job `alias` needs no category, or each of its categories has room.
    static func roomFor(_ alias: String) -> String {
        """
        (\(alias).has_categories = 0 OR NOT EXISTS (
            SELECT 1 FROM baton_job_categories c WHERE c.job = \(alias).id
            AND (SELECT count(*) FROM baton_holders h WHERE h.category = c.category) >= c.max_holders))
        """
    }

    static func releaseCategories(_ db: Database, job: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM baton_holders WHERE job = ?").execute(arguments: [job])
    }
}
