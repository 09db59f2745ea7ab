import BatonTesting
import Foundation
import GRDB
import Testing

@testable import BatonDurable

/// A worker with nothing to do behind another kind's backlog. While one index held every ready job in
/// priority order, each of its looks for work (a claim, then the time of the next due job) read past
/// every ready job of the other kind: 19 ms a look behind 100,000 of them. The looks now go through the
/// indexes of ready jobs by kind and by start time, which a store made before them gets when it is next
/// opened for writing.
@Suite("SQLite claims by kind")
struct ClaimByKindTests {
    static let newIndexes = ["baton_jobs_ready_kind", "baton_jobs_ready_start"]

    /// What the planner does with `sql`, one line per step.
    static func plan(_ db: Database, _ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> [String] {
        try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: StatementArguments(arguments))
            .map { $0["detail"] as String? ?? "" }
    }

    @Test("a look for work reads only the ready jobs of its own kinds, through indexes made when a store is opened")
    func looksReadOnlyTheirKinds() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("jobs.sqlite")
        do {
            let store = try SQLiteJobStore(path: path)
            // As an older version left it: one index of all ready jobs.
            try await store.writer.write { db in
                for name in Self.newIndexes { try db.execute(sql: "DROP INDEX \(name)") }
                try db.execute(
                    sql: "CREATE INDEX baton_jobs_ready ON baton_jobs(priority DESC, id) WHERE state = 'ready'")
            }
            try store.close()
        }
        let store = try SQLiteJobStore(path: path)
        defer { try? store.close() }
        var backlog = GraphSpec(name: "backlog")
        for index in 0..<2000 {
            backlog.jobs.append(JobSpec(name: "b\(index)", kind: "other", input: Data(), retry: .never))
        }
        _ = try await store.submit(backlog, uniqueKey: nil)
        var mine = GraphSpec(name: "mine")
        mine.jobs.append(JobSpec(name: "m", kind: "mine", input: Data(), retry: .never))
        _ = try await store.submit(mine, uniqueKey: nil)

        try await store.writer.read { db in
            let indexes = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index'")
            for name in Self.newIndexes { #expect(indexes.contains(name), "\(name) was not made") }
            #expect(!indexes.contains("baton_jobs_ready"), "the index of all ready jobs is still kept up")
            let now = Date().storeTime
            for kinds in [["mine"], ["mine", "none"], (0..<250).map { "x\($0)" } + ["mine"]] {
                let plan = try Self.plan(db, SQLiteJobStore.claimCandidatesSQL(kinds: kinds.count), [now, 10] + kinds)
                let text = plan.joined(separator: "\n")
                // Jobs are searched (by key or through an index), never scanned.
                #expect(
                    !plan.contains { $0.hasPrefix("SCAN a") || $0.hasPrefix("SCAN j") },
                    "\(kinds.count) kinds:\n\(text)")
                // Every arm searches the ready jobs of its kinds. An arm of one kind goes through the index by
                // kind, in its order (the index by kind and start would read every due job of the kind and
                // sort them); an arm of two (past 200 kinds) sorts either way.
                let arms = kinds.count <= 200 ? kinds.count : (kinds.count + 1) / 2
                let searches = plan.filter { $0.hasPrefix("SEARCH a USING INDEX baton_jobs_ready_") }
                #expect(
                    searches.count == arms && searches.allSatisfy { $0.hasSuffix("(kind=?)") },
                    "\(kinds.count) kinds:\n\(text)")
                if kinds.count <= 200 {
                    #expect(!text.contains("baton_jobs_ready_start"), "\(kinds.count) kinds:\n\(text)")
                }
            }
            let next = try Self.plan(db, SQLiteJobStore.nextDueSQL(kinds: 2), [now, "mine", "none"])
            #expect(
                next == ["SEARCH baton_jobs USING INDEX baton_jobs_ready_start (kind=? AND not_before>?)"], "\(next)")
        }
        // And the claims find their jobs: the one of its kind, none of another's.
        func claim(_ kinds: [String], limit: Int) async throws -> [String] {
            try await store.claim(worker: "w", kinds: kinds, limit: limit, lease: .seconds(30)).map(\.name)
        }
        #expect(try await claim(["mine", "none"], limit: 10) == ["m"])
        #expect(try await claim(["none"], limit: 10).isEmpty)
        #expect(try await claim(["other"], limit: 3) == ["b0", "b1", "b2"])
    }
}
