import Baton
import BatonDashboard
import BatonDurable
import BatonTesting
import Foundation
import GRDB
import Hummingbird
import HummingbirdTesting
import Testing

/// The pages of large stores: a run of 10,000 jobs and a store of 100,000 runs. Each page's server time
/// is printed for the record (not asserted: the machine's load decides it); what is asserted is what
/// keeps a browser responsive: the job table is paged and the graph summarised.
@Suite(
    "Dashboard at scale", .serialized,
    .enabled(if: DashboardAlone.enabled, "set BATON_DASHBOARD_ALONE=1 to run (.ci/run runs it after swift test)"))
struct DashboardScaleTests {
    static func timed(_ client: any TestClientProtocol, _ path: String) async throws -> (TestResponse, Duration) {
        let start = ContinuousClock.now
        let response = try await client.execute(uri: path, method: .get)
        return (response, ContinuousClock.now - start)
    }

    static func milliseconds(_ duration: Duration) -> String {
        duration.formatted(.units(allowed: [.milliseconds], fractionalPart: .show(length: 0)))
    }

    @Test func aRunOfTenThousandJobsIsPagedAndItsGraphSummarised() async throws {
        let directory = try Scratch()
        defer { directory.remove() }
        let store = try SQLiteJobStore(path: directory.path("jobs.sqlite"))
        defer { try? store.close() }
        // 100 layers of 100 jobs, each waiting for one job of the layer before.
        var graph = GraphSpec(name: "ten thousand")
        for index in 0..<10_000 {
            graph.jobs.append(
                JobSpec(
                    name: "job \(index)", kind: "big", input: Data("\(index)".utf8),
                    dependencies: index >= 100 ? [JobSpec.Dependency(index: index - 100)] : []))
        }
        let run = try await store.submit(graph, uniqueKey: nil)
        // Run the first 50 layers: 5,000 attempts that succeed.
        for _ in 0..<50 {
            let claimed = try await store.claim(worker: "w", kinds: ["big"], limit: 1_000, lease: .seconds(600))
            var reports: [AttemptReport] = []
            for job in claimed {
                reports.append(AttemptReport(lease: job.lease, outcome: .succeeded(output: Data("1".utf8))))
            }
            _ = try await store.finish(reports)
        }
        let dashboard = Dashboard(
            store: store, storeName: "sqlite", configuration: .init(port: 0, timeZone: TimeZone(identifier: "UTC")!))
        try await dashboard.application().test(.live) { client in
            let (page, took) = try await Self.timed(client, "/runs/\(run.run.rawValue)")
            #expect(page.status == .ok)
            let text = page.text
            #expect(text.contains("Jobs 1–200 of 10000."), "the job table is paged")
            #expect(text.components(separatedBy: "<tr><td class=\"number\"><a href=\"/jobs/").count - 1 == 200)
            #expect(text.contains("The graph of 10000 jobs is not drawn"), "the graph is summarised")
            #expect(!text.contains("<svg class=\"graph\""))
            // The timeline draws the latest 2,000 attempts (a probe, 7 December 2026: a running run of
            // 100,000 jobs made a page of 23.6 MB, fetched again every 2 s by its live update).
            #expect(text.contains("2000 jobs (2000 succeeded)"), "the timeline draws the latest attempts")
            #expect(text.contains("The latest 2000 of 5000 attempts are drawn"), "and says so")
            let (next, tookNext) = try await Self.timed(client, "/runs/\(run.run.rawValue)?state=pending&from=200")
            #expect(next.text.contains("Jobs 201–400 of 4900."), "a page of the pending jobs")
            print(
                "Dashboard, a run of 10,000 jobs (5,000 attempts): its page \(Self.milliseconds(took)) (\(text.utf8.count / 1_000) kB), a page of its pending jobs \(Self.milliseconds(tookNext))"
            )
            if let browser = DashboardBrowserTests.browser {
                // The browser lays the page out and runs its script, within the test's deadline.
                let start = ContinuousClock.now
                let result = Protected<(dom: String, log: String, status: Int32)?>(nil)
                let (url, profile) = (
                    "http://127.0.0.1:\(client.port ?? 0)/runs/\(run.run.rawValue)", directory.path("profile")
                )
                try await withDeadline(.seconds(120), "the browser loads the 10,000-job page") {
                    let loaded = try await DashboardBrowserTests.load(url, screenshot: nil, profile: profile)
                    result.withLock { $0 = loaded }
                }
                let loaded = try #require(result.withLock { $0 })
                #expect(loaded.status == 0)
                #expect(loaded.dom.contains("Jobs 1–200 of 10000."))
                #expect(DashboardBrowserTests.problems(in: loaded.log).isEmpty)
                print("Dashboard, the 10,000-job page in \(browser): \(Self.milliseconds(ContinuousClock.now - start))")
            }
        }
    }

    @Test func aStoreOfOneHundredThousandRunsListsAPageAtATime() async throws {
        let directory = try Scratch()
        defer { directory.remove() }
        let path = directory.path("runs.sqlite")
        try SQLiteJobStore(path: path).close()
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            let insert = try db.makeStatement(
                sql: """
                    INSERT INTO baton_runs (id, name, created, finished, unfinished, jobs, failed, cancelled)
                    VALUES (?, ?, ?, ?, ?, 1, ?, 0)
                    """)
            for id in 1...100_000 {
                let running = id % 50 == 0
                let failed = !running && id % 20 == 0
                try insert.execute(arguments: [
                    id, "run-\(id % 10)", Double(id), running ? nil : Double(id + 1), running ? 1 : 0, failed ? 1 : 0,
                ])
            }
        }
        try queue.close()
        let store = try SQLiteJobStore(path: path)
        defer { try? store.close() }
        let dashboard = Dashboard(
            store: store, storeName: "sqlite", configuration: .init(port: 0, timeZone: TimeZone(identifier: "UTC")!))
        try await dashboard.application().test(.live) { client in
            var report: [String] = []
            for path in ["/", "/?state=failed", "/?name=run-3", "/?before=50000"] {
                let (page, took) = try await Self.timed(client, path)
                #expect(page.status == .ok, "\(path)")
                #expect(page.text.contains("rel=\"next\""), "\(path): a link to the next page")
                report.append("\(path) \(Self.milliseconds(took))")
            }
            let first = try await client.execute(uri: "/", method: .get).text
            #expect(first.contains(">all <span class=\"count\">100000</span>"))
            #expect(first.contains(">failed <span class=\"count\">4000</span>"))
            print("Dashboard, 100,000 runs: " + report.joined(separator: ", "))
        }
    }
}
