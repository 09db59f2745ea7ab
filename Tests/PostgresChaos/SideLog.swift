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
        // The application's effects: every odd job of the graph counts itself here in its completion's
        // transaction (`PostgresJobStore.complete`); each count must end at exactly 1.
        "CREATE TABLE IF NOT EXISTS chaos_effects (n integer PRIMARY KEY, count integer NOT NULL)",
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

    /// Logs the end of an attempt's work, trying again (every 100 ms, for up to a minute) whatever the
    /// error: an end that never reaches the log leaves the attempt counted as running until its process
    /// is killed, a second holder of its category that never was. (Once, in a crash run, the write failed
    /// twice while the server was away, and the checker saw a work of 3 ms as one of 3.7 s.) The worker's
    /// ``WorkJournal`` keeps the end too, for a process killed before this write got through.
    func ended(row: Int64, started: Double, at: Double) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                try await query("UPDATE chaos_attempts SET started = \(started), ended = \(at) WHERE id = \(row)")
                return
            } catch {
                guard ContinuousClock.now < deadline else { throw error }
                FileHandle.standardError.write(
                    Data("chaos: logging the end of attempt row \(row) failed, trying again: \(error)\n".utf8))
                try? await Task.sleep(for: .milliseconds(100))  // not cancelled with the attempt
            }
        }
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

/// A worker process's own record of the work it did: a line when an attempt's work begins (`B job
/// token began`) and one when it ends (`E job token began ended`), each appended with one write(2)
/// before the side log is told. The kernel keeps what was written when the process is SIGKILLed, so
/// the checker knows, for an attempt whose end the side log lacks, whether its work began at all (the
/// attempt's start is logged before the work may begin, and that write may wait out a server restart
/// and be cut by a kill after its insert committed) and when it ended (the end's write may wait too).
final class WorkJournal: Sendable {
    let descriptor: Int32

    /// The journal of this process in `directory`.
    init(directory: String) throws {
        let path = directory + "/\(getpid()).work"
        descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard descriptor >= 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
    }

    deinit { close(descriptor) }

    func began(job: Int64, token: Int64, at: Double) {
        append("B \(job) \(token) \(at)\n")
    }

    func ended(job: Int64, token: Int64, began: Double, at: Double) {
        append("E \(job) \(token) \(began) \(at)\n")
    }

    /// Appends `line`; a journal that cannot be written stops the worker (an attempt missing from it
    /// would count as one that never worked).
    private func append(_ line: String) {
        let bytes = Array(line.utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written != bytes.count {
            FileHandle.standardError.write(
                Data("chaos worker: writing its work journal failed (\(written) of \(bytes.count) bytes)\n".utf8))
            exit(3)
        }
    }

    /// What every journal in `directory` says of each attempt, by job and lease token: when its work
    /// began, and when it ended (`nil`: not before its process was killed).
    static func read(directory: String) throws -> [Pair: (began: Double, ended: Double?)] {
        var work: [Pair: (began: Double, ended: Double?)] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name.hasSuffix(".work") {
            let text = try String(contentsOfFile: directory + "/" + name, encoding: .utf8)
            // Whole lines only: a last line without its newline was cut by the kill.
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            lines.removeLast()
            for line in lines {
                let fields = line.split(separator: " ")
                guard fields.count >= 4, let job = Int64(fields[1]), let token = Int64(fields[2]),
                    let began = Double(fields[3])
                else { continue }
                switch (fields[0], fields.count) {
                case ("B", 4): work[Pair(job: job, token: token)] = (began, work[Pair(job: job, token: token)]?.ended)
                case ("E", 5):
                    guard let ended = Double(fields[4]), ended >= began else { continue }
                    work[Pair(job: job, token: token)] = (began, ended)
                default: continue  // a line cut by the kill
                }
            }
        }
        return work
    }

    struct Pair: Hashable {
        var job: Int64
        var token: Int64
    }
}
