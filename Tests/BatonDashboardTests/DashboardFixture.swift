import BatonDashboard
import BatonDurable
import Foundation
import GRDB
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

/// Text a user could put into a job name, an error, a worker id or a schedule name, meant to run script
/// or break a page if a dashboard printed it as it is.
enum Hostile {
    static let name = "<script>alert('name')</script>\u{1B}[31m & \"quoted\""
    static let error = "<img src=x onerror=alert('error')> failed"
    static let worker = "w\"><script>alert(1)</script>"
    static let schedule = "nightly <b>bold</b>"
    static let unreadableSchedule = "later <img src=x onerror=alert('schedule')>"
    /// What must never appear in a page: the raw markup of the texts above.
    static let raw = ["<script>alert", "<img src=x", "<b>bold</b>", "\u{1B}"]
}

/// A store holding a run of each kind the dashboard shows: succeeded, failed (a hostile job name and
/// error, its dependent cancelled), running (a job leased by a hostile worker id), one whose job added
/// jobs, and a schedule. Filled with the store's own calls, one transition at a time.
struct DashboardFixture: Sendable {
    let store: any JobStore
    let succeeded: DurableRunID
    let failed: DurableRunID
    let failedJob: DurableJobID
    let cancelledJob: DurableJobID
    let running: DurableRunID
    let runningJob: DurableJobID
    let grown: DurableRunID
    let directory: URL

    /// The fixture in a new SQLite store.
    static func make() async throws -> DashboardFixture {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("BatonDashboard-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try await fill(
            try SQLiteJobStore(path: directory.appendingPathComponent("jobs.sqlite").path), directory: directory)
    }

    /// The fixture's runs and schedule in `store`, which must be empty; `directory` is for the tests' files.
    static func fill(_ store: any JobStore, directory: URL) async throws -> DashboardFixture {
        func job(_ name: String, _ kind: String, after: [Int] = []) -> JobSpec {
            JobSpec(
                name: name, kind: kind, input: Data("{\"name\":\"\(name.count)\",\"html\":\"<i>x</i>\"}".utf8),
                dependencies: after.map { JobSpec.Dependency(index: $0) })
        }
        let ok = try await store.submit(
            GraphSpec(name: "nightly report", jobs: [job("fetch", "ok"), job("write", "ok", after: [0])]),
            uniqueKey: "report-1")
        for _ in 0..<2 {
            for claimed in try await store.claim(worker: "worker-1", kinds: ["ok"], limit: 10, lease: .seconds(60)) {
                _ = try await store.finish([
                    AttemptReport(lease: claimed.lease, outcome: .succeeded(output: Data("\"done\"".utf8)))
                ])
            }
        }
        let bad = try await store.submit(
            GraphSpec(name: Hostile.name, jobs: [job(Hostile.name, "bad"), job("after", "bad", after: [0])]),
            uniqueKey: nil)
        let failing = try await store.claim(worker: Hostile.worker, kinds: ["bad"], limit: 1, lease: .seconds(60))[0]
        _ = try await store.finish([
            AttemptReport(lease: failing.lease, outcome: .failed(message: Hostile.error, retryable: false))
        ])
        let open = try await store.submit(
            GraphSpec(name: "import", jobs: [job("download", "slow"), job("parse", "slow", after: [0])]),
            uniqueKey: nil)
        try await store.register(WorkerRecord(id: Hostile.worker, kinds: ["slow", "<k>"], expires: Date() + 3_600))
        _ = try await store.claim(worker: Hostile.worker, kinds: ["slow"], limit: 1, lease: .seconds(3_600))
        let growing = try await store.submit(GraphSpec(name: "pages", jobs: [job("list", "grow")]), uniqueKey: nil)
        let adder = try await store.claim(worker: "worker-1", kinds: ["grow"], limit: 1, lease: .seconds(60))[0]
        _ = try await store.finish([
            AttemptReport(
                lease: adder.lease, outcome: .succeeded(output: Data("1".utf8)),
                additions: RunAddition(jobs: [job("page 2", "later"), job("import 2", "later", after: [0])]))
        ])
        var graph = JobGraph(name: "scheduled")
        graph.add(FixtureJob.self, input: "x")
        try await store.schedule(name: Hostile.schedule, every: .seconds(3_600), graph: graph)
        return DashboardFixture(
            store: store, succeeded: ok.run, failed: bad.run, failedJob: bad.jobs[0], cancelledJob: bad.jobs[1],
            running: open.run, runningJob: open.jobs[0], grown: growing.run, directory: directory)
    }

    /// A schedule named `name` whose definition this program cannot read (a newer version's timing), in
    /// the fixture's SQLite store.
    func addUnreadableSchedule(named name: String) async throws {
        var graph = JobGraph(name: "later")
        graph.add(FixtureJob.self, input: "x")
        try await store.schedule(name: name, every: .seconds(60), graph: graph)
        let queue = try DatabaseQueue(path: directory.appendingPathComponent("jobs.sqlite").path)
        try await queue.write { db in
            try db.execute(
                sql: "UPDATE baton_schedules SET definition = ? WHERE name = ?",
                arguments: [#"{"name":"x","timing":{"fortnightly":{}},"catchUp":"skip"}"#, name])
        }
        try queue.close()
    }

    func remove() {
        try? (store as? SQLiteJobStore)?.close()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `body` against the dashboard's real server on 127.0.0.1 (a free port).
    func withServer(
        _ configuration: Dashboard.Configuration = .init(port: 0, timeZone: TimeZone(identifier: "UTC")!),
        _ body: @Sendable (any TestClientProtocol) async throws -> Void
    ) async throws {
        let dashboard = Dashboard(store: store, storeName: "sqlite:jobs.sqlite", configuration: configuration)
        var logger = Logger(label: "dashboard-test")
        logger.logLevel = .warning
        try await dashboard.application(logger: logger).test(.live, body)
    }
}

struct FixtureJob: DurableJob {
    static let kind = "fixture"
    func run(_ input: String, context: DurableJobContext) async throws -> String { input }
}

extension TestResponse {
    var text: String { String(buffer: body) }
}

/// The value of the first `name="csrf" value="…"` in a page.
func csrfToken(in page: String) -> String? {
    guard let range = page.range(of: "name=\"csrf\" value=\"") else { return nil }
    return String(page[range.upperBound...].prefix { $0 != "\"" })
}

/// A form body, percent-encoded.
func form(_ fields: [String: String]) -> ByteBuffer {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    let body = fields.sorted { $0.key < $1.key }.map {
        "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
    }.joined(separator: "&")
    return ByteBuffer(string: body)
}

let formHeaders: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]

/// A new folder under the temporary directory; `remove()` deletes it.
struct Scratch {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("BatonDashboard-\(UUID())")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    func remove() { try? FileManager.default.removeItem(at: url) }
}
