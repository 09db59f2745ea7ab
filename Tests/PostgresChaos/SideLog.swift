import BatonDurable
import BatonPostgres
import Foundation
import Logging
import PostgresNIO

/// The chaos run's side log, in the store's database but written apart from the store: one row per
/// execution attempt (started, ended, what the store did with its report) and one per SIGKILL.
/// Every write is its own transaction, retried while the server restarts.
final class SideLog: Sendable {
    let store: PostgresJobStore

    init(store: PostgresJobStore) { self.store = store }

    static let tables = [
        """
        CREATE TABLE IF NOT EXISTS chaos_attempts (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, job bigint NOT NULL, attempt integer NOT NULL,
            worker text NOT NULL, pid integer NOT NULL, token bigint NOT NULL, started float8 NOT NULL,
            ended float8, reporting float8, reported float8, accepted boolean, refused boolean,
            UNIQUE (job, token))
        """,
        "CREATE TABLE IF NOT EXISTS chaos_kills (pid integer NOT NULL, at float8 NOT NULL)",
        "CREATE TABLE IF NOT EXISTS chaos_side_runs (run bigint PRIMARY KEY, job bigint NOT NULL, pid integer NOT NULL)",
        "CREATE TABLE IF NOT EXISTS chaos_server_restarts (began float8 NOT NULL, ended float8 NOT NULL)",
    ]

    func create() async throws {
        for statement in Self.tables { try await query(PostgresQuery(unsafeSQL: statement)) }
    }

    /// Runs one statement with the store's retries (while the server restarts) and timeouts. Not
    /// cancelled with the calling task: an attempt stopped after losing its lease still records it.
    @discardableResult
    func query(_ query: PostgresQuery) async throws -> [PostgresRow] {
        let store = store
        return try await Task { try await store.query(query) }.value
    }

    /// Logs an attempt's start; the row's id. Retry-safe: one lease (job and token) is one attempt, so
    /// an insert sent again after its first send committed and lost its reply (the server restarting)
    /// finds the row the first send wrote instead of adding a second that would never end.
    func started(job: Int64, attempt: Int, token: Int64, worker: String, pid: Int, at: Double) async throws -> Int64 {
        let rows = try await query(
            """
            INSERT INTO chaos_attempts (job, attempt, token, worker, pid, started)
            VALUES (\(job), \(attempt), \(token), \(worker), \(pid), \(at))
            ON CONFLICT (job, token) DO UPDATE SET started = chaos_attempts.started RETURNING id
            """)
        return try rows[0].decode(Int64.self)
    }

    func ended(row: Int64, started: Double, at: Double) async throws {
        try await query("UPDATE chaos_attempts SET started = \(started), ended = \(at) WHERE id = \(row)")
    }

    /// What the store did with the attempt's report, and when the report was sent and answered.
    /// `accepted`: recorded as the job's completion (it succeeded); `refused`: the store rejected the
    /// report (the lease had ended). A planned failure the store accepted, to be retried, is neither.
    func reported(row: Int64, result: FinishResult, sent: Double, at: Double) async throws {
        let accepted = result == .accepted(.succeeded)
        let refused = result == .rejected
        try await query(
            """
            UPDATE chaos_attempts SET accepted = \(accepted), refused = \(refused), reporting = \(sent), reported = \(at)
            WHERE id = \(row)
            """)
    }

    /// A worker submitted the side run `run` for the harness's job `job` (``ChaosWorker``).
    func sideRun(_ run: Int64, of job: Int64, pid: Int) async throws {
        try await query(
            "INSERT INTO chaos_side_runs (run, job, pid) VALUES (\(run), \(job), \(pid)) ON CONFLICT DO NOTHING")
    }

    func killed(pid: Int32, at: Double) async throws {
        try await query("INSERT INTO chaos_kills (pid, at) VALUES (\(Int(pid)), \(at))")
    }

    func serverRestarted(began: Double, ended: Double) async throws {
        try await query("INSERT INTO chaos_server_restarts (began, ended) VALUES (\(began), \(ended))")
    }
}
