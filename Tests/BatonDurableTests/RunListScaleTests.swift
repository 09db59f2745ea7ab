import BatonDurable
import Foundation
import GRDB
import Testing

/// The run list with 100,000 runs: every filter answers from the runs' rows and indexes, and each query
/// is timed for the record (not asserted: the machine's load decides the milliseconds).
@Suite("Run list at 100,000 runs")
struct RunListScaleTests {
    static let runs = 100_000

    /// A store file holding `runs` runs of one job each, written directly: every 20th failed, every 33rd
    /// cancelled, every 50th still running; names cycle through ten.
    static func store(in directory: TemporaryDirectory) async throws -> SQLiteJobStore {
        let path = directory.path("runs.sqlite")
        _ = try SQLiteJobStore(path: path)
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            let insert = try db.makeStatement(
                sql: """
                    INSERT INTO baton_runs (id, name, created, finished, unfinished, jobs, failed, cancelled)
                    VALUES (?, ?, ?, ?, ?, 1, ?, ?)
                    """)
            for id in 1...runs {
                let running = id % 50 == 0
                let failed = !running && id % 20 == 0
                let cancelled = !running && !failed && id % 33 == 0
                try insert.execute(arguments: [
                    id, "run-\(id % 10)", Double(id), running ? nil : Double(id + 1), running ? 1 : 0, failed ? 1 : 0,
                    cancelled ? 1 : 0,
                ])
            }
        }
        try queue.close()
        return try SQLiteJobStore(path: path)
    }

    @Test("each filter returns the newest matching runs, and says how long it took")
    func filters() async throws {
        let directory = try TemporaryDirectory()
        let store = try await Self.store(in: directory)
        func running(_ id: Int) -> Bool { id % 50 == 0 }
        func failed(_ id: Int) -> Bool { !running(id) && id % 20 == 0 }
        func cancelled(_ id: Int) -> Bool { !running(id) && !failed(id) && id % 33 == 0 }
        func succeeded(_ id: Int) -> Bool { !running(id) && !failed(id) && !cancelled(id) }
        var cases: [(String, RunFilter, (Int) -> Bool)] = []
        cases.append(("all", RunFilter(), { _ in true }))
        cases.append(("running", RunFilter(state: .running), running))
        cases.append(("failed", RunFilter(state: .failed), failed))
        cases.append(("cancelled", RunFilter(state: .cancelled), cancelled))
        cases.append(("succeeded", RunFilter(state: .succeeded), succeeded))
        cases.append(("by name", RunFilter(name: "run-3"), { $0 % 10 == 3 }))
        cases.append(("failed by name", RunFilter(state: .failed, name: "run-0"), { failed($0) && $0 % 10 == 0 }))
        cases.append(("old", RunFilter(createdBefore: Date(timeIntervalSince1970: 1_000)), { $0 < 1_000 }))
        cases.append(("a page deep", RunFilter(before: DurableRunID(50_000)), { $0 < 50_000 }))
        var report: [String] = []
        for (label, filter, matches) in cases {
            let start = ContinuousClock.now
            let page = try await store.runs(filter)
            let took = ContinuousClock.now - start
            let expected = (1...Self.runs).reversed().lazy.filter { matches($0) }.prefix(50).map { Int64($0) }
            #expect(page.runs.map(\.id.rawValue) == Array(expected), "\(label)")
            report.append(
                "\(label) \(took.formatted(.units(allowed: [.milliseconds], fractionalPart: .show(length: 1))))")
        }
        let start = ContinuousClock.now
        let counts = try await store.runCounts()
        report.append(
            "counts \((ContinuousClock.now - start).formatted(.units(allowed: [.milliseconds], fractionalPart: .show(length: 1))))"
        )
        #expect(counts[.running] == 2_000)
        #expect(counts.values.reduce(0, +) == Self.runs)
        print("Run list at 100,000 runs: " + report.joined(separator: ", "))
    }

    @Test("a run of 10,000 jobs is paged through by state from the index of its jobs")
    func jobsOfALargeRun() async throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteJobStore(path: directory.path("jobs.sqlite"))
        var graph = GraphSpec(name: "large")
        for index in 0..<10_000 {
            graph.jobs.append(
                JobSpec(name: "j\(index)", kind: index % 4 == 0 ? "quarter" : "rest", input: Data("0".utf8)))
        }
        let run = try await store.submit(graph, uniqueKey: nil)
        let claimed = try await store.claim(worker: "w", kinds: ["quarter"], limit: 1_000, lease: .seconds(60))
        #expect(claimed.count == 1_000)
        var report: [String] = []
        for (label, state, expected) in [("all", nil, 10_000), ("running", .running, 1_000), ("ready", .ready, 9_000)]
            as [(String, DurableJobState?, Int)]
        {
            var filter = JobFilter(run: run.run, state: state, limit: 1_000)
            var seen: [DurableJobID] = []
            var pages = 0
            let start = ContinuousClock.now
            while true {
                let page = try await store.jobs(filter)
                pages += 1
                seen += page.jobs.map(\.id)
                guard let next = page.next else { break }
                filter.after = next
            }
            let took = ContinuousClock.now - start
            #expect(seen.count == expected, "\(label)")
            #expect(Set(seen).count == seen.count, "\(label): no job twice")
            #expect(seen == seen.sorted { $0.rawValue < $1.rawValue }, "\(label): in the order they were added")
            report.append(
                "\(label) in \(pages) pages \(took.formatted(.units(allowed: [.milliseconds], fractionalPart: .show(length: 1))))"
            )
        }
        try store.close()
        // The plan: the run's jobs are searched in the index on (run, idx), never the whole table.
        let queue = try DatabaseQueue(path: directory.path("jobs.sqlite"))
        let sql = RunQueries.jobsSQL(table: "baton_jobs", state: true, after: true, placeholder: { "?\($0)" })
        let plan = try await queue.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: [run.run.rawValue, "ready", 1, 100])
                .map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("USING INDEX baton_jobs_run") }, "\(plan)")
        #expect(!plan.contains { $0.hasPrefix("SCAN baton_jobs") }, "\(plan)")
        try queue.close()
        print("Jobs of a run of 10,000: " + report.joined(separator: ", "))
    }
}
