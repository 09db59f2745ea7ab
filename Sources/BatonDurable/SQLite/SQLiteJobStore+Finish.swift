import Foundation
import GRDB

extension SQLiteJobStore {
    public func finish(_ reports: [AttemptReport]) async throws -> [FinishResult] {
        guard !reports.isEmpty else { return [] }
        let now = clock.now()
        return try await write(wake: true) { db in
            try reports.map { report in try Self.finishAttempt(db, report, now: now) }
        }
    }

    static func finishAttempt(_ db: Database, _ report: AttemptReport, now: Date) throws -> FinishResult {
        let id = report.lease.job.rawValue
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT attempts, max_attempts, retry, cancel_request, has_categories, lease_owner
                        FROM baton_jobs WHERE id = ? AND state = 'running' AND lease_token = ?
                        """),
                arguments: [id, report.lease.token])
        else { return .rejected }
        // Columns by position: attempts, max_attempts, retry, cancel_request, has_categories, lease_owner.
        if try row.value(at: 4) as Int != 0 { try releaseCategories(db, job: id) }
        let result = try finishAttempt(db, report, row: row, now: now)
        switch (report.outcome, result) {
        case (.succeeded, .accepted(let state)) where state == .failed || state == .ready:
            // Its added jobs were refused: the attempt failed (its job failed, or is retried), saying why
            // (the job's last error).
            let error = try String.fetchOne(db, sql: "SELECT last_error FROM baton_jobs WHERE id = ?", arguments: [id])
            try recordAttempt(
                db, report.lease, attempt: try row.value(at: 0), worker: try row.value(at: 5), now: now,
                outcome: .failed, result: state,
                error: error)
        case (.succeeded, .accepted(.cancelled)):
            // It was asked to cancel: recorded as cancelled, saying why.
            let error = try String.fetchOne(db, sql: "SELECT last_error FROM baton_jobs WHERE id = ?", arguments: [id])
            try recordAttempt(
                db, report.lease, attempt: try row.value(at: 0), worker: try row.value(at: 5), now: now,
                outcome: .cancelled, result: .cancelled,
                error: error)
        case (.succeeded, _), (_, .rejected): break
        case (.failed(let message, _), .accepted(let state)):
            try recordAttempt(
                db, report.lease, attempt: try row.value(at: 0), worker: try row.value(at: 5), now: now,
                outcome: .failed, result: state,
                error: StoredText.message(message))
        case (.cancelled(let reason), .accepted(let state)):
            try recordAttempt(
                db, report.lease, attempt: try row.value(at: 0), worker: try row.value(at: 5), now: now,
                outcome: .cancelled, result: state,
                error: StoredText.message(reason))
        case (.snoozed(let wait), .accepted(let state)):
            // A snooze of a job asked to cancel ends it cancelled, saying why (its last error).
            let error =
                state == .ready
                ? Snooze(for: Snooze.storable(wait)).description
                : try String.fetchOne(db, sql: "SELECT last_error FROM baton_jobs WHERE id = ?", arguments: [id])
            try recordAttempt(
                db, report.lease, attempt: try row.value(at: 0), worker: try row.value(at: 5), now: now,
                outcome: state == .ready ? .snoozed : .cancelled, result: state, error: error)
        }
        return result
    }

    /// Records an attempt that did not succeed (a success is the job's own row).
    static func recordAttempt(
        _ db: Database, _ lease: Lease, attempt: Int, worker: String?, now: Date, outcome: AttemptRecord.Outcome,
        result: DurableJobState, error: String?
    ) throws {
        try db.cachedStatement(
            sql: """
                INSERT OR IGNORE INTO baton_attempts (job, token, attempt, worker, started, ended, outcome, result, error)
                VALUES (?, ?, ?, ?, (SELECT started FROM baton_jobs WHERE id = ?), ?, ?, ?, ?)
                """
        ).execute(arguments: [
            lease.job.rawValue, lease.token, attempt, worker, lease.job.rawValue, now.storeTime, outcome.rawValue,
            result.rawValue, error,
        ])
    }

    /// Records an attempt whose lease is current (`row`: its job's columns, categories released).
    private static func finishAttempt(
        _ db: Database, _ report: AttemptReport, row: Row, now: Date
    ) throws
        -> FinishResult
    {
        let id = report.lease.job.rawValue
        switch report.outcome {
        case .succeeded(let output):
            // A job asked to cancel (itself or its run) ends cancelled, however its attempt ended, as a
            // failure or a snooze of it does: its dependents are cancelled rather than run, it adds nothing,
            // and a retry runs it again. (Its body may have finished before its worker heard of the request.)
            if let cancelRequest = try row.value(at: 3) as String? {
                try finishJob(db, id: id, state: .cancelled, error: cancelRequest, output: nil, now: now)
                return .accepted(.cancelled)
            }
            if let additions = report.additions, !additions.jobs.isEmpty {
                do {
                    try addJobs(db, additions, by: id, now: now)
                } catch let error as DurableError {
                    // Jobs that cannot be added fail the job that added them, saying why; nothing is added
                    // (the plan is checked before anything is written). A conflict of the moment is a
                    // retryable failure, which the job's retry policy may try again; a graph that cannot
                    // be, a failure at once.
                    let message = DurableError.addedJobsRefused + error.message
                    guard error.code == .conflict else {
                        try finishJob(db, id: id, state: .failed, error: message, output: nil, now: now)
                        return .accepted(.failed)
                    }
                    return try finishAttempt(
                        db, AttemptReport(lease: report.lease, outcome: .failed(message: message, retryable: true)),
                        row: row, now: now)
                }
            }
            try finishJob(db, id: id, state: .succeeded, error: nil, output: output, now: now)
            return .accepted(.succeeded)
        case .cancelled(let reason):
            try finishJob(db, id: id, state: .cancelled, error: StoredText.message(reason), output: nil, now: now)
            return .accepted(.cancelled)
        case .failed(let message, let retryable):
            let message = StoredText.message(message)
            let attempts: Int = try row.value(at: 0)
            let cancelRequest: String? = try row.value(at: 3)
            if let cancelRequest {
                try finishJob(db, id: id, state: .cancelled, error: cancelRequest, output: nil, now: now)
                return .accepted(.cancelled)
            }
            guard retryable, try attempts < row.value(at: 1) as Int else {
                try finishJob(db, id: id, state: .failed, error: message, output: nil, now: now)
                return .accepted(.failed)
            }
            guard let policy = RetryPolicy.stored(try row.value(at: 2) as String) else {
                // A damaged row: the job fails with its own error and the damage named, not a report that
                // fails for ever (and the job left running).
                try finishJob(
                    db, id: id, state: .failed, error: message + RetryPolicy.unreadable, output: nil, now: now)
                return .accepted(.failed)
            }
            // Attempts that spent none of the policy's raised the stored maximum by as many: snoozes (one
            // each), and the attempts before a retry of the job (a retry gives it the policy's attempts again).
            let uncounted = max(0, try row.value(at: 1) as Int - policy.maxAttempts)
            let wait = policy.wait(beforeAttempt: max(1, attempts - uncounted) + 1)
            // A retry that waits for its time waits out of claims' way (`waiting`): see `promoteDue`.
            try db.cachedStatement(
                sql: """
                    UPDATE baton_jobs SET state = 'ready', not_before = ?, waiting = ?, lease_owner = NULL,
                        lease_token = NULL, lease_expires = NULL, last_error = ? WHERE id = ?
                    """
            ).execute(arguments: [now.adding(wait).storeTime, wait > .zero ? 1 : 0, message, id])
            return .accepted(.ready)
        case .snoozed(let wait):
            if let cancelRequest = try row.value(at: 3) as String? {
                try finishJob(db, id: id, state: .cancelled, error: cancelRequest, output: nil, now: now)
                return .accepted(.cancelled)
            }
            let wait = Snooze.storable(wait)
            try db.cachedStatement(
                sql: """
                    UPDATE baton_jobs SET state = 'ready', not_before = ?, waiting = ?, max_attempts = min(max_attempts + 1, 2147483647),
                        lease_owner = NULL, lease_token = NULL, lease_expires = NULL WHERE id = ?
                    """
            ).execute(arguments: [now.adding(wait).storeTime, wait > .zero ? 1 : 0, id])
            return .accepted(.ready)
        }
    }

    /// Moves a job to a final state, then its dependents: those whose last dependency this was become
    /// ready; if it did not succeed, those that do not run regardless are cancelled, transitively.
    /// A work list, not recursion.
    static func finishJob(
        _ db: Database, id: Int64, state: DurableJobState, error: String?, output: Data?, now: Date
    ) throws {
        let finalize = try db.cachedStatement(
            sql: """
                UPDATE baton_jobs SET state = ?, last_error = COALESCE(?, last_error), output = ?, finished = ?,
                    lease_owner = NULL, lease_token = NULL, lease_expires = NULL WHERE id = ?
                """)
        // One statement counts the job down in its run and closes the run with its last job.
        let countDown = try db.cachedStatement(
            sql: """
                UPDATE baton_runs SET unfinished = unfinished - 1, failed = failed + ?, cancelled = cancelled + ?,
                    finished = CASE WHEN unfinished = 1 THEN ? ELSE finished END
                WHERE id = (SELECT run FROM baton_jobs WHERE id = ?)
                """)
        let dependents = try db.cachedStatement(
            sql: """
                SELECT e.job, e.run_regardless, j.state, j.remaining FROM baton_edges e JOIN baton_jobs j ON j.id = e.job
                WHERE e.dependency = ?
                """)
        let decrement = try db.cachedStatement(
            sql: """
                UPDATE baton_jobs SET remaining = remaining - 1,
                    state = CASE WHEN remaining = 1 THEN 'ready' ELSE state END WHERE id = ?
                """)
        let nameOf = try db.cachedStatement(sql: "SELECT name FROM baton_jobs WHERE id = ?")

        var work: [(id: Int64, state: DurableJobState, error: String?, output: Data?)] = [(id, state, error, output)]
        while let (job, state, error, output) = work.popLast() {
            try finalize.execute(arguments: [state.rawValue, error, output, now.storeTime, job])
            try countDown.execute(arguments: [
                state == .failed ? 1 : 0, state == .cancelled ? 1 : 0, now.storeTime, job,
            ])
            var name: String?
            // Columns by position: job, run_regardless, state, remaining.
            for row in try Row.fetchAll(dependents, arguments: [job]) {
                let dependent: Int64 = try row.value(at: 0)
                guard try row.value(at: 2) as String == DurableJobState.pending.rawValue else { continue }
                if try state == .succeeded || row.value(at: 1) as Bool {
                    try decrement.execute(arguments: [dependent])
                } else {
                    if name == nil { name = try String.fetchOne(nameOf, arguments: [job]) }
                    let reason =
                        state == .failed
                        ? "dependency '\(name ?? "?")' failed" : "dependency '\(name ?? "?")' was cancelled"
                    // Mark it now so that a second path to it in this work list does not queue it twice.
                    try db.cachedStatement(sql: "UPDATE baton_jobs SET state = 'cancelled' WHERE id = ?")
                        .execute(arguments: [dependent])
                    work.append((dependent, .cancelled, reason, nil))
                }
            }
        }
    }

    public func release(_ leases: [Lease]) async throws {
        guard !leases.isEmpty else { return }
        let now = clock.now()
        try await write(wake: true) { db in
            for lease in leases {
                guard let row = try Self.currentLease(db, lease) else { continue }
                try Self.releaseCategories(db, job: lease.job.rawValue)
                if let reason: String = try row.value("cancel_request") {
                    try Self.finishJob(
                        db, id: lease.job.rawValue, state: .cancelled, error: reason, output: nil, now: now)
                } else {
                    try db.cachedStatement(
                        sql: """
                            UPDATE baton_jobs SET state = 'ready', attempts = attempts - 1, lease_owner = NULL,
                                lease_token = NULL, lease_expires = NULL WHERE id = ?
                            """
                    ).execute(arguments: [lease.job.rawValue])
                }
            }
        }
    }

    public func cancel(run: DurableRunID, reason: String) async throws {
        let reason = StoredText.message(reason)
        let now = clock.now()
        try await write(wake: true) { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM baton_runs WHERE id = ?", arguments: [run.rawValue]) != nil
            else {
                throw DurableError(
                    code: .unknownRun, message: "\(run) is not in the store (pruned?); nothing to cancel.")
            }
            try db.execute(
                sql:
                    "UPDATE baton_jobs SET cancel_request = ? WHERE run = ? AND state = 'running' AND cancel_request IS NULL",
                arguments: [reason, run.rawValue])
            let waiting = try Int64.fetchAll(
                db, sql: "SELECT id FROM baton_jobs WHERE run = ? AND state IN ('pending', 'ready') ORDER BY idx",
                arguments: [run.rawValue])
            for job in waiting {
                // An earlier job's cascade may have cancelled it already.
                let state = try String.fetchOne(db, sql: "SELECT state FROM baton_jobs WHERE id = ?", arguments: [job])
                guard state == "pending" || state == "ready" else { continue }
                try Self.finishJob(db, id: job, state: .cancelled, error: reason, output: nil, now: now)
            }
        }
    }

    public func cancel(job: DurableJobID, reason: String) async throws {
        let reason = StoredText.message(reason)
        let now = clock.now()
        try await write(wake: true) { db in
            guard
                let state = try String.fetchOne(
                    db, sql: "SELECT state FROM baton_jobs WHERE id = ?", arguments: [job.rawValue])
            else {
                throw DurableError(
                    code: .unknownJob, message: "\(job) is not in the store (pruned?); nothing to cancel.")
            }
            switch DurableJobState(rawValue: state) {
            case .pending, .ready:
                try Self.finishJob(db, id: job.rawValue, state: .cancelled, error: reason, output: nil, now: now)
            case .running:
                try db.execute(
                    sql: "UPDATE baton_jobs SET cancel_request = ? WHERE id = ? AND cancel_request IS NULL",
                    arguments: [reason, job.rawValue])
            default: break
            }
        }
    }

    public func renew(_ leases: [Lease], worker: String, lease: Duration) async throws -> [LeaseStatus] {
        guard !leases.isEmpty else { return [] }
        try StoredText.checkWorker(worker)
        let until = clock.now().adding(lease)
        return try await write(wake: false) { db in
            try leases.map { held in
                guard let row = try Self.currentLease(db, held) else { return .lost }
                try db.cachedStatement(sql: "UPDATE baton_jobs SET lease_expires = ?, lease_owner = ? WHERE id = ?")
                    .execute(arguments: [until.storeTime, worker, held.job.rawValue])
                if let reason: String = try row.value("cancel_request") {
                    return .cancelRequested(reason: reason, until: until)
                }
                return .renewed(until: until)
            }
        }
    }

    /// The names of run `run`'s jobs that the names of added jobs can meet (``RunAddition``'s rule for a
    /// name that is taken): each of `names`, each numbered form `name #…` of them, and — as Swift compares
    /// names by their characters, where the Kelvin sign is the letter K — every name beyond ASCII. Found
    /// through the run's name indexes (``prepareReadIndexes(_:)``), so an addition costs what it adds,
    /// not what the run holds. An added name beyond ASCII, or more names than a tenth of the run's
    /// jobs, reads every name of the run instead.
    static func takenNames(_ db: Database, run: Int64, among names: [String]) throws -> Set<String> {
        let distinct = Array(Set(names))
        guard !distinct.isEmpty else { return [] }
        let size = try Int.fetchOne(db, sql: "SELECT jobs FROM baton_runs WHERE id = ?", arguments: [run]) ?? 0
        guard distinct.allSatisfy({ $0.utf8.allSatisfy { $0 < 0x80 } }), distinct.count * 10 < size else {
            return Set(try String.fetchAll(db, sql: "SELECT name FROM baton_jobs WHERE run = ?", arguments: [run]))
        }
        var taken = Set(
            try String.fetchAll(
                db,
                sql: """
                    SELECT name FROM baton_jobs INDEXED BY baton_jobs_run_wide_name
                    WHERE run = ? AND length(name) <> length(CAST(name AS BLOB))
                    """,
                arguments: [run]))
        let exact = try db.cachedStatement(sql: "SELECT name FROM baton_jobs WHERE run = ? AND name = ?")
        // Every name that begins with "name #" sorts from "name #" to just before "name $" ("$" follows "#").
        let numbered = try db.cachedStatement(
            sql: "SELECT name FROM baton_jobs WHERE run = ? AND name >= ? AND name < ?")
        for name in distinct {
            taken.formUnion(try String.fetchAll(exact, arguments: [run, name]))
            taken.formUnion(try String.fetchAll(numbered, arguments: [run, name + " #", name + " $"]))
        }
        return taken
    }

    /// Stores the jobs that job `adder` adds to its run (before its success is recorded): they, their
    /// edges and categories; the adder's dependents that wait for what it adds wait for them too.
    static func addJobs(_ db: Database, _ addition: RunAddition, by adder: Int64, now: Date) throws {
        try addition.validate()
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT run, name FROM baton_jobs WHERE id = ?", arguments: [adder])
        else { return }
        let run: Int64 = try row.value(at: 0)
        let adderName: String = try row.value(at: 1)
        let taken = try takenNames(db, run: run, among: addition.jobs.map(\.name))
        var existing: [Int64: AdditionPlan.Existing] = [:]
        var downstream = Set<Int64>()
        if !addition.existingDependencies.isEmpty {
            for id in addition.existingDependencies.map(\.rawValue) {
                guard
                    let row = try Row.fetchOne(
                        db, sql: "SELECT run, name, state FROM baton_jobs WHERE id = ?", arguments: [id])
                else { continue }
                existing[id] = AdditionPlan.Existing(
                    run: try row.value(at: 0), name: try row.value(at: 1),
                    state: DurableJobState(rawValue: try row.value(at: 2)) ?? .failed)
            }
            downstream = Set(
                try Int64.fetchAll(
                    db,
                    sql: """
                        WITH RECURSIVE down(id) AS (
                            SELECT job FROM baton_edges WHERE dependency = ?
                            UNION SELECT e.job FROM baton_edges e JOIN down ON e.dependency = down.id
                        ) SELECT id FROM down
                        """, arguments: [adder]))
        }
        let groupDependents = try Row.fetchAll(
            db,
            sql: """
                SELECT e.job, e.run_regardless FROM baton_edges e JOIN baton_jobs j ON j.id = e.job
                WHERE e.dependency = ? AND e.includes_added = 1
                """, arguments: [adder]
        ).map { AdditionPlan.GroupDependent(id: try $0.value(at: 0), runRegardless: try $0.value(at: 1)) }
        let plan = try AdditionPlan.make(
            addition, adder: adder, adderName: adderName, run: run, taken: taken, existing: existing,
            downstream: downstream, groupDependents: groupDependents)
        let encoder = JSONEncoder()
        let retries = try addition.jobs.map { String(decoding: try encoder.encode($0.retry), as: UTF8.self) }
        var jobs = addition.jobs
        for index in jobs.indices { jobs[index].name = plan.names[index] }
        let first =
            (try Int.fetchOne(db, sql: "SELECT max(idx) FROM baton_jobs WHERE run = ?", arguments: [run]) ?? -1) + 1
        let ids = try insertJobs(
            db, run: run, jobs: jobs, retries: retries, firstIndex: first, addedBy: adder, remaining: plan.remaining)
        for edge in plan.existingEdges {
            try db.execute(
                sql:
                    "INSERT OR IGNORE INTO baton_edges (dependency, job, run_regardless, includes_added) VALUES (?, ?, 0, 0)",
                arguments: [edge.dependency, ids[edge.job]])
        }
        for dependent in plan.groupDependents {
            for id in ids {
                try db.execute(
                    sql: """
                        INSERT OR IGNORE INTO baton_edges (dependency, job, run_regardless, includes_added)
                        VALUES (?, ?, ?, 1)
                        """, arguments: [id, dependent.id, dependent.runRegardless])
            }
            // Every such dependent gets the edges (one cancelled now waits for them when its run is
            // retried); one that waits counts them now.
            try db.execute(
                sql: "UPDATE baton_jobs SET remaining = remaining + ? WHERE id = ? AND state = 'pending'",
                arguments: [ids.count, dependent.id])
        }
        try db.execute(
            sql: "UPDATE baton_runs SET unfinished = unfinished + ?, jobs = jobs + ?, finished = NULL WHERE id = ?",
            arguments: [ids.count, ids.count, run])
        for (index, reason) in plan.cancelled {
            try finishJob(db, id: ids[index], state: .cancelled, error: reason, output: nil, now: now)
        }
    }

    /// The row (its `cancel_request`) of the job that `lease` names, if the lease is its current one;
    /// nil when the job ended or another attempt holds it.
    static func currentLease(_ db: Database, _ lease: Lease) throws -> Row? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: "SELECT cancel_request FROM baton_jobs WHERE id = ? AND state = 'running' AND lease_token = ?"),
            arguments: [lease.job.rawValue, lease.token])
    }
}
