import Baton
import BatonCLI
import BatonDurable
import BatonPostgres
import BatonTesting
import Foundation
import GRDB
import Testing

/// A job that fails when its input says so, else returns it.
struct Echo: DurableJob {
    static let kind = "cli.echo"
    struct Refused: Error, CustomStringConvertible {
        var description: String { "refused \u{1B}[31mred\u{1B}[0m on purpose" }
    }
    func run(_ input: String, context: DurableJobContext) async throws -> String {
        if input.hasPrefix("fail") { throw Refused() }
        return input
    }
}

/// What the tool wrote, captured.
final class Captured: Sendable {
    private let text = Protected("")
    var output: String { text.withLock { $0 } }
    func write(_ part: String) { text.withLock { $0 += part } }
    func clear() { text.withLock { $0 = "" } }
}

/// A store holding a succeeded run, a failed one (with a hostile job name and error) and an unfinished
/// one, as the `baton` command meets them.
struct Fixture {
    let succeeded: DurableRunID
    let failed: DurableRunID
    let running: DurableRunID
    let failedJob: DurableJobID

    static let hostile = "evil \u{1B}]0;pwned\u{07} <b>name</b>"

    static func fill(_ store: any JobStore) async throws -> Fixture {
        var good = JobGraph(name: "nightly report")
        good.add(Echo.self, input: "ok", name: "write", retry: .never)
        var bad = JobGraph(name: "import")
        let failing = bad.add(Echo.self, input: "fail", name: hostile, retry: .never)
        bad.add(Echo.self, inputFrom: failing, name: "after", retry: .never)
        let first = try await store.submit(good)
        let second = try await store.submit(bad)
        let worker = try DurableWorker(
            store: store, jobs: [Echo()],
            configuration: .init(id: "cli-worker", maxConcurrentJobs: 2, pollInterval: .milliseconds(100)))
        try await withDeadline(.seconds(60), "the fixture's runs") {
            try await worker.run(until: first)
            try await worker.run(until: second)
        }
        // Submitted last, never run: no worker of its kind is running.
        var later = JobGraph(name: "waiting")
        later.add(Echo.self, input: "x", name: "later")
        let third = try await store.submit(later)
        return Fixture(succeeded: first.id, failed: second.id, running: third.id, failedJob: second[failing])
    }
}

@Suite("baton: reading and repairing a SQLite job store")
final class BatonToolSQLiteTests {
    let directory: URL
    let path: String

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("BatonCLITests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("jobs.sqlite").path
    }

    // Each test gets its own instance; whatever a test did, its folder goes with it.
    deinit { try? FileManager.default.removeItem(at: directory) }

    func withFixture(_ body: (BatonTool, Captured, any JobStore, Fixture) async throws -> Void) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteJobStore(path: path)
        let fixture = try await Fixture.fill(store)
        try store.close()
        let captured = Captured()
        let tool = BatonTool(write: captured.write, timeZone: TimeZone(identifier: "UTC")!)
        try await StoreAddress.sqlite(path: path).withStore { store in try await body(tool, captured, store, fixture) }
    }

    @Test func runsListsEachRunWithTheCountsByState() async throws {
        try await withFixture { tool, captured, store, fixture in
            try await tool.runs(store, filter: RunFilter(), json: false)
            let lines = captured.output.split(separator: "\n").map(String.init)
            #expect(lines.first == "1 running, 1 succeeded, 1 failed, 0 cancelled", "\(captured.output)")
            #expect(lines.count == 5, "\(captured.output)")
            // Newest first.
            #expect(lines[2].hasPrefix("\(fixture.running.rawValue) "), "\(lines[2])")
            #expect(
                lines[3].contains("failed") && lines[3].contains("import") && lines[3].contains("1 failed, 1 cancelled")
            )
            #expect(lines[4].contains("succeeded") && lines[4].contains("nightly report") && lines[4].contains("1/1"))

            captured.clear()
            try await tool.runs(store, filter: RunFilter(state: .failed), json: true)
            let page = try JSONDecoder.iso.decode(BatonTool.RunsJSON.self, from: Data(captured.output.utf8))
            #expect(page.runs.map(\.id) == [fixture.failed])
            #expect(page.counts["failed"] == 1 && page.counts["running"] == 1)
            #expect(page.next == nil)
        }
    }

    @Test func aPageSaysHowToAskForTheNext() async throws {
        try await withFixture { tool, captured, store, fixture in
            try await tool.runs(store, filter: RunFilter(limit: 2), json: false)
            #expect(
                captured.output.contains("More: add --before \(fixture.failed.rawValue) for the next page."),
                "\(captured.output)")
        }
    }

    @Test func jobsListsARunsJobsByStateAPageAtATime() async throws {
        try await withFixture { tool, captured, store, fixture in
            try await tool.jobs(store, filter: JobFilter(run: fixture.failed), json: false)
            let lines = captured.output.split(separator: "\n").map(String.init)
            #expect(lines.count == 3, "\(captured.output)")
            #expect(lines[1].contains("failed") && lines[1].contains("evil \\u{1B}]0;pwned"), "\(lines[1])")
            #expect(lines[1].contains("refused \\u{1B}[31mred"), "\(lines[1])")
            #expect(lines[2].contains("cancelled") && lines[2].contains("after"), "\(lines[2])")
            #expect(!captured.output.contains("\u{1B}"))

            captured.clear()
            try await tool.jobs(store, filter: JobFilter(run: fixture.failed, limit: 1), json: false)
            #expect(
                captured.output.contains("More: add --after \(fixture.failedJob.rawValue) for the next page."),
                "\(captured.output)")

            captured.clear()
            try await tool.jobs(store, filter: JobFilter(run: fixture.failed, state: .cancelled), json: true)
            let page = try JSONDecoder.iso.decode(BatonTool.JobsJSON.self, from: Data(captured.output.utf8))
            #expect(page.jobs.map(\.name) == ["after"])
            #expect(page.next == nil)
        }
    }

    @Test func explainAndJobShowUsersTextEscaped() async throws {
        try await withFixture { tool, captured, store, fixture in
            try await tool.explain(store, run: fixture.failed, json: false)
            #expect(
                captured.output.contains("evil \\u{1B}]0;pwned\\u{7} <b>name</b> [cli.echo]: failed"),
                "\(captured.output)")
            #expect(captured.output.contains("after [cli.echo]: cancelled"), "\(captured.output)")
            #expect(!captured.output.contains("\u{1B}"))

            captured.clear()
            try await tool.job(store, job: fixture.failedJob, json: false)
            let text = captured.output
            #expect(text.contains("of run \(fixture.failed.rawValue) 'import': failed, attempt 1 of 1"), "\(text)")
            #expect(text.contains("refused \\u{1B}[31mred\\u{1B}[0m on purpose"), "\(text)")
            #expect(text.contains("cli-worker"), "\(text)")
            #expect(!text.contains("\u{1B}"))

            captured.clear()
            try await tool.job(store, job: fixture.failedJob, json: true)
            let job = try JSONDecoder.iso.decode(BatonTool.JobJSON.self, from: Data(captured.output.utf8))
            #expect(job.job.name == Fixture.hostile)  // JSON keeps the text exact (escaped by JSON itself)
            #expect(job.attempts.map(\.outcome) == [.failed])
            #expect(job.attempts.first?.worker == "cli-worker")

            // A job cancelled before it started has no attempt to come; one still waiting may have.
            let after = try #require(try await store.snapshot(of: fixture.failed).jobs.first { $0.name == "after" })
            captured.clear()
            try await tool.job(store, job: after.id, json: false)
            #expect(
                captured.output.hasSuffix("It never ran: it was cancelled before it started.\n"), "\(captured.output)")
            let later = try #require(try await store.snapshot(of: fixture.running).jobs.first)
            captured.clear()
            try await tool.job(store, job: later.id, json: false)
            #expect(captured.output.hasSuffix("No attempt has ended yet.\n"), "\(captured.output)")
        }
    }

    @Test func theTimelineDrawsEachAttemptEscaped() async throws {
        try await withFixture { tool, _, store, fixture in
            let page = try await tool.timeline(store, run: fixture.failed)
            #expect(page.contains("<svg"), "a Gantt chart")
            #expect(page.contains("&lt;b&gt;name&lt;/b&gt;"), "the hostile name is escaped")
            #expect(!page.contains("<b>name</b>"))
            let attempts = try await store.attempts(of: fixture.failedJob)
            #expect(attempts.first?.started != nil, "the store keeps when each attempt started")
            if let started = attempts.first?.started { #expect(started <= attempts[0].ended) }
        }
    }

    /// Claims the one ready job of `store` (kind `Echo`).
    func claimOne(_ store: SQLiteJobStore) async throws -> ClaimedJob {
        try #require(try await store.claim(worker: "w", kinds: [Echo.kind], limit: 1, lease: .seconds(30)).first)
    }

    /// Closes `store`, then runs `body` with the tool and the file opened as `baton` opens it.
    func withTool(
        closing store: SQLiteJobStore, _ body: (BatonTool, Captured, any JobStore) async throws -> Void
    ) async throws {
        try store.close()
        let captured = Captured()
        let tool = BatonTool(write: captured.write, timeZone: TimeZone(identifier: "UTC")!)
        try await StoreAddress.sqlite(path: path).withStore { store in try await body(tool, captured, store) }
    }

    @Test func aSnoozeIsShownAsOneInTheJobsAttemptsAndTheTimeline() async throws {
        let store = try SQLiteJobStore(path: path)
        var graph = JobGraph(name: "snoozing")
        graph.add(Echo.self, input: "x", name: "waits")
        let run = try await store.submit(graph)
        let first = try await claimOne(store)
        _ = try await store.finish([AttemptReport(lease: first.lease, outcome: .snoozed(wait: .seconds(90)))])
        try await withTool(closing: store) { tool, captured, store in
            try await tool.job(store, job: first.job, json: false)
            #expect(captured.output.contains("snoozed"), "\(captured.output)")
            #expect(captured.output.contains("snoozed for 90 s"), "\(captured.output)")
            let page = try await tool.timeline(store, run: run.id)
            #expect(page.contains(">snoozed</text>"), "the legend names the snooze")
            #expect(page.contains("1 snoozed"), "the summary counts it")
        }
    }

    @Test func theErrorOfAJobThatSucceededLaterIsNotItsLastError() async throws {
        let store = try SQLiteJobStore(path: path)
        var graph = JobGraph(name: "flaky")
        graph.add(Echo.self, input: "x", name: "flaky", retry: .immediate(maxAttempts: 2))
        _ = try await store.submit(graph)
        let first = try await claimOne(store)
        _ = try await store.finish([
            AttemptReport(lease: first.lease, outcome: .failed(message: "first try broke", retryable: true))
        ])
        let second = try await claimOne(store)
        _ = try await store.finish([AttemptReport(lease: second.lease, outcome: .succeeded(output: Data("\"x\"".utf8)))]
        )
        try await withTool(closing: store) { tool, captured, store in
            try await tool.job(store, job: first.job, json: false)
            #expect(captured.output.contains("error of an earlier attempt: first try broke"), "\(captured.output)")
            #expect(!captured.output.contains("last error"), "\(captured.output)")
        }
    }

    /// A probe (7 December 2026): a repair that waited past the store's busy timeout told the user to
    /// "open the store with a longer busyTimeout", which no option of this tool does.
    @Test func aStoreHeldByAnotherProgramIsSaidSoWithoutAProgrammersAdvice() {
        let busy = DurableError(
            code: .storeFailure,
            message:
                "cannot write to the job store at 'x' (database is locked). Another connection held the database longer than the busy timeout; retry, or open the store with a longer busyTimeout.",
            underlying: DatabaseError(resultCode: .SQLITE_BUSY))
        let text = BatonTool.message(for: busy)
        #expect(text.contains("another program held its write lock") && text.contains("Try again"), "\(text)")
        #expect(!text.contains("busyTimeout"), "\(text)")
        let other = DurableError(
            code: .storeFailure, message: "the disk is full", underlying: DatabaseError(resultCode: .SQLITE_FULL))
        #expect(BatonTool.message(for: other) == "the disk is full")
    }

    @Test func retryCancelAndPruneRepairTheStore() async throws {
        try await withFixture { tool, captured, store, fixture in
            try await tool.retry(store, run: fixture.failed, job: nil)
            #expect(captured.output == "Run \(fixture.failed.rawValue): 2 jobs run again.\n", "\(captured.output)")
            #expect(try await store.record(of: fixture.failed).finished == nil)

            captured.clear()
            try await tool.cancel(store, run: fixture.running, job: nil, reason: "not needed")
            #expect(
                captured.output.hasPrefix("Cancelled run \(fixture.running.rawValue) 'waiting': 1 unfinished job"),
                "\(captured.output)")
            let explained = try await store.explain(run: fixture.running)
            #expect(explained.jobs.map(\.state) == [.cancelled])
            captured.clear()
            try await tool.cancel(store, run: fixture.running, job: nil, reason: "again")
            #expect(captured.output.contains("had already finished; nothing was cancelled"))

            // A running job asked twice: the second time changes nothing, and says so (a probe, 7 December
            // 2026: it said "Cancelled" again).
            let lone = try await store.submit(
                GraphSpec(name: "lone", jobs: [JobSpec(name: "busy", kind: "cli.busy", input: Data("1".utf8))]),
                uniqueKey: nil)
            let claimed = try await store.claim(worker: "w", kinds: ["cli.busy"], limit: 1, lease: .seconds(600))
            captured.clear()
            try await tool.cancel(store, run: nil, job: lone.jobs[0], reason: "first")
            #expect(captured.output.hasPrefix("Cancelled job \(lone.jobs[0].rawValue) 'busy' (it is running"))
            captured.clear()
            try await tool.cancel(store, run: nil, job: lone.jobs[0], reason: "second")
            #expect(captured.output.contains("was already asked to cancel (first)"), "\(captured.output)")
            #expect(captured.output.contains("Nothing changed."))
            _ = try await store.finish([AttemptReport(lease: claimed[0].lease, outcome: .cancelled(reason: "first"))])
            try await store.delete(run: lone.run)

            captured.clear()
            try await tool.prune(store, finishedBefore: Date().addingTimeInterval(60), json: false)
            #expect(captured.output.hasPrefix("Deleted 2 runs that finished before"), "\(captured.output)")
            let left = try await store.runs(RunFilter())
            #expect(left.runs.map(\.id) == [fixture.failed])
        }
    }

    @Test func schedulesAreListedPausedAndResumed() async throws {
        try await withFixture { tool, captured, store, _ in
            var graph = JobGraph(name: "hourly")
            graph.add(Echo.self, input: "tick")
            _ = try await store.schedule(name: "hourly \u{1B}[2J", every: .seconds(3_600), graph: graph)
            try await tool.schedules(store, json: false)
            #expect(captured.output.contains("hourly \\u{1B}[2J"), "\(captured.output)")
            #expect(captured.output.contains("active"))
            captured.clear()
            try await tool.setSchedule(store, named: "hourly \u{1B}[2J", paused: true)
            #expect(try await store.schedules().first?.paused == true)
            await #expect(throws: BatonCLIError.self) { try await tool.setSchedule(store, named: "nope", paused: true) }
        }
    }

    /// A schedule written by a newer version (a timing this one does not know) cannot be listed by this
    /// program; the others, and that one, can still be paused and resumed by name.
    @Test func schedulesArePausedByNameBesideOneThisProgramCannotRead() async throws {
        try await withFixture { tool, captured, store, _ in
            var graph = JobGraph(name: "hourly")
            graph.add(Echo.self, input: "tick")
            for name in ["hourly", "future"] {
                _ = try await store.schedule(name: name, every: .seconds(3_600), graph: graph)
            }
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(
                    sql: "UPDATE baton_schedules SET definition = ? WHERE name = 'future'",
                    arguments: [#"{"name":"future","timing":{"fortnightly":{}},"catchUp":"skip"}"#])
            }
            try queue.close()
            // Listed beside the others, with the reason, instead of failing the listing.
            try await tool.schedules(store, json: false)
            let lines = captured.output.split(separator: "\n").map(String.init)
            #expect(lines.count >= 4, "\(captured.output)")
            #expect(lines.dropFirst().first?.hasPrefix("future") == true, "\(captured.output)")
            #expect(lines.dropFirst().first?.contains("unreadable") == true, "\(captured.output)")
            #expect(lines.dropFirst(2).first?.hasPrefix("hourly") == true, "\(captured.output)")
            #expect(
                captured.output.contains("schedule 'future' is stored in a form this program cannot read"),
                "\(captured.output)")
            captured.clear()
            try await tool.schedules(store, json: true)
            let entries = try #require(
                try JSONSerialization.jsonObject(with: Data(captured.output.utf8)) as? [[String: Any]])
            // By name, as in the table: the unreadable one among the others.
            #expect(entries.count == 2)
            #expect((entries[0]["schedule"] as? [String: Any])?["name"] as? String == "future")
            #expect((entries[0]["unreadable"] as? String)?.contains("cannot read") == true)
            #expect((entries[1]["schedule"] as? [String: Any])?["name"] as? String == "hourly")
            #expect(entries[1]["unreadable"] == nil)
            try await tool.setSchedule(store, named: "hourly", paused: true)
            try await tool.setSchedule(store, named: "hourly", paused: false)
            try await tool.setSchedule(store, named: "future", paused: true)
            await #expect(throws: BatonCLIError.self) { try await tool.setSchedule(store, named: "nope", paused: true) }
        }
    }

    @Test func aReadNeverCreatesAStore() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let missing = directory.appendingPathComponent("missing.sqlite").path
        let error = await #expect(throws: BatonCLIError.self) {
            try await StoreAddress.sqlite(path: missing).withStore { _ in }
        }
        #expect(error?.message.contains("there is no job store at \(missing)") == true)
        #expect(!FileManager.default.fileExists(atPath: missing))

        // Another program's database: refused, and left without baton_ tables.
        let other = directory.appendingPathComponent("app.sqlite").path
        let queue = try DatabaseQueue(path: other)
        try await queue.write { db in try db.execute(sql: "CREATE TABLE orders (id INTEGER)") }
        try queue.close()
        let refused = await #expect(throws: BatonCLIError.self) {
            try await StoreAddress.sqlite(path: other).withStore { _ in }
        }
        #expect(refused?.message.contains("holds no Baton job store") == true)
        let tables = try await DatabaseQueue(path: other).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        #expect(tables == ["orders"])
    }

    /// A file that is not a database is called so, without SQLite's statement (it said "cannot be read as a
    /// SQLite database: SQLite error 26 … - while executing `SELECT * FROM sqlite_master LIMIT 1`").
    @Test func aFileThatIsNoDatabaseIsCalledSo() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let noise = directory.appendingPathComponent("noise.sqlite").path
        #expect(FileManager.default.createFile(atPath: noise, contents: Data((0..<4096).map { UInt8($0 * 37 % 251) })))
        let error = await #expect(throws: BatonCLIError.self) {
            try await StoreAddress.sqlite(path: noise).withStore { _ in }
        }
        #expect(
            error?.message.hasPrefix("\(noise) is not a SQLite database, or it is damaged") == true,
            "\(error?.message ?? "")")
        #expect(error?.message.contains("while executing") == false, "\(error?.message ?? "")")
    }

    @Test func anOlderStoreIsReadByNoOneButItsWorkersAndIsNotUpgraded() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try SQLiteJobStore(path: path).close()
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: "UPDATE baton_durable_meta SET value = '3' WHERE key = 'schema'")
        }
        try queue.close()
        let error = await #expect(throws: BatonCLIError.self) {
            try await StoreAddress.sqlite(path: path).withStore { _ in }
        }
        #expect(
            error?.message.contains("has schema version 3, older than this baton's") == true, "\(error?.message ?? "")")
        let version = try await DatabaseQueue(path: path).read { db in
            try String.fetchOne(db, sql: "SELECT value FROM baton_durable_meta WHERE key = 'schema'")
        }
        #expect(version == "3", "the store was not upgraded")
    }

    @Test func addressesAreReadOrRefusedAsUsageErrors() throws {
        defer { try? FileManager.default.removeItem(at: directory) }  // made by init, unused here
        #expect(try StoreAddress.parse("sqlite:/tmp/a.sqlite", schema: nil) == .sqlite(path: "/tmp/a.sqlite"))
        #expect(try StoreAddress.parse("sqlite:///tmp/a", schema: nil) == .sqlite(path: "/tmp/a"))
        #expect(try StoreAddress.parse("jobs.db", schema: nil) == .sqlite(path: "jobs.db"))
        #expect(
            try StoreAddress.parse("postgres://u@h/d", schema: "s") == .postgres(url: "postgres://u@h/d", schema: "s"))
        #expect(
            try StoreAddress.resolve(option: nil, schema: nil, environment: ["BATON_STORE": "sqlite:x"])
                == .sqlite(path: "x"))
        for (text, schema) in [("mysql://x", nil), ("jobs", nil), ("sqlite:", nil), ("sqlite:x", "s")]
            as [(String, String?)]
        {
            #expect(throws: BatonCLIError.self) { try StoreAddress.parse(text, schema: schema) }
        }
        // A schema name the store would refuse is a command-line mistake (64), like an empty one (a probe,
        // 7 December 2026: it exited 1 as a store failure).
        for schema in ["Bad-Name", "1abc", String(repeating: "s", count: 49), ""] {
            let refused = #expect(throws: BatonCLIError.self) {
                try StoreAddress.parse("postgres://u@h/d", schema: schema)
            }
            #expect(refused?.isUsage == true, "\(schema)")
        }
        let missing = #expect(throws: BatonCLIError.self) {
            try StoreAddress.resolve(option: nil, schema: nil, environment: [:])
        }
        #expect(missing?.isUsage == true)
        #expect(
            StoreAddress.postgres(url: "postgres://u:secret@h/d", schema: "baton").description == "postgres://u:***@h/d"
        )
    }

    @Test func agesAndDatesAreRead() throws {
        defer { try? FileManager.default.removeItem(at: directory) }  // made by init, unused here
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let utc = TimeZone(identifier: "UTC")!
        #expect(try TimeText.moment("2h", now: now, timeZone: utc, option: "--since") == now.addingTimeInterval(-7_200))
        #expect(
            try TimeText.moment("7d", now: now, timeZone: utc, option: "--since") == now.addingTimeInterval(-604_800))
        #expect(
            try TimeText.moment("2026-11-01", now: now, timeZone: utc, option: "--since")
                == Date(timeIntervalSince1970: 1_793_491_200))
        #expect(
            try TimeText.moment("2026-11-01T08:00:00Z", now: now, timeZone: utc, option: "--since")
                == Date(timeIntervalSince1970: 1_793_520_000))
        let error = #expect(throws: BatonCLIError.self) {
            try TimeText.moment("yesterday", now: now, timeZone: utc, option: "--before")
        }
        #expect(error?.isUsage == true && error?.message.contains("--before 'yesterday'") == true)
    }
}

extension JSONDecoder {
    static var iso: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
