import BatonDurable
import Foundation
import PostgresNIO
import Testing

@testable import BatonPostgres

/// The run list with 100,000 runs on PostgreSQL: every filter answers from the runs' rows and indexes;
/// each query is timed for the record (not asserted: the machine's load decides the milliseconds).
@Suite("PostgreSQL run list at 100,000 runs", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresRunListTests {
    @Test("each filter returns the newest matching runs, and says how long it took")
    func filters() async throws {
        try await TestPostgres.withStore("runlist") { store, _ in
            // One job each: every 20th failed, every 33rd cancelled, every 50th still running.
            try await store.client.query(
                """
                INSERT INTO runs (id, name, created, finished, unfinished, jobs, failed, cancelled)
                SELECT g, 'run-' || (g % 10), g, CASE WHEN g % 50 = 0 THEN NULL ELSE g + 1 END,
                    (g % 50 = 0)::int, 1, (g % 50 <> 0 AND g % 20 = 0)::int,
                    (g % 50 <> 0 AND g % 20 <> 0 AND g % 33 = 0)::int
                FROM generate_series(1, 100000) g
                """)
            try await store.client.query("ANALYZE runs")
            func running(_ id: Int) -> Bool { id % 50 == 0 }
            func failed(_ id: Int) -> Bool { !running(id) && id % 20 == 0 }
            func cancelled(_ id: Int) -> Bool { !running(id) && !failed(id) && id % 33 == 0 }
            var cases: [(String, RunFilter, (Int) -> Bool)] = []
            cases.append(("all", RunFilter(), { _ in true }))
            cases.append(("running", RunFilter(state: .running), running))
            cases.append(("failed", RunFilter(state: .failed), failed))
            cases.append(("cancelled", RunFilter(state: .cancelled), cancelled))
            cases.append(
                ("succeeded", RunFilter(state: .succeeded), { !running($0) && !failed($0) && !cancelled($0) }))
            cases.append(("failed by name", RunFilter(state: .failed, name: "run-0"), { failed($0) && $0 % 10 == 0 }))
            cases.append(("old", RunFilter(createdBefore: Date(timeIntervalSince1970: 1_000)), { $0 < 1_000 }))
            cases.append(("a page deep", RunFilter(before: DurableRunID(50_000)), { $0 < 50_000 }))
            var report: [String] = []
            for (label, filter, matches) in cases {
                _ = try await store.runs(filter)  // the connection and the plan, once
                let start = ContinuousClock.now
                let page = try await store.runs(filter)
                let took = ContinuousClock.now - start
                let expected = (1...100_000).reversed().lazy.filter { matches($0) }.prefix(50).map { Int64($0) }
                #expect(page.runs.map(\.id.rawValue) == Array(expected), "\(label)")
                report.append(
                    "\(label) \(took.formatted(.units(allowed: [.milliseconds], fractionalPart: .show(length: 1))))")
            }
            let counts = try await store.runCounts()
            #expect(counts[.running] == 2_000)
            #expect(counts.values.reduce(0, +) == 100_000)
            print("PostgreSQL run list at 100,000 runs: " + report.joined(separator: ", "))
        }
    }
}
