import BatonTesting
import Foundation
import GRDB
import GRDBSQLite
import JobStoreConformance
import Testing

@testable import BatonDurable

/// A worker with nothing to do behind another kind's backlog. While one index held every ready job in
/// priority order, each of its looks for work (a claim, then the time of the next due job) read past
/// every ready job of the other kind: 19 ms a look behind 100,000 of them. The looks now go through the
/// indexes of ready jobs by kind and by start time, which a store made before them gets when it is next
/// opened for writing.
@Suite("SQLite claims by kind")
struct ClaimByKindTests {
    static let newIndexes = ["baton_jobs_claim", "baton_jobs_waiting"]

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
                let searches = plan.filter { $0.hasPrefix("SEARCH a USING INDEX baton_jobs_claim ") }
                #expect(
                    searches.count == arms && searches.allSatisfy { $0.hasSuffix("(kind=?)") },
                    "\(kinds.count) kinds:\n\(text)")
                if kinds.count <= 200 {
                    #expect(!text.contains("baton_jobs_waiting"), "\(kinds.count) kinds:\n\(text)")
                }
            }
            let next = try Self.plan(db, SQLiteJobStore.nextDueSQL(kinds: 2), [now, "mine", "none"])
            #expect(
                next == ["SEARCH baton_jobs USING INDEX baton_jobs_waiting (kind=? AND not_before>?)"], "\(next)")
            let promote = try Self.plan(db, SQLiteJobStore.promoteDueSQL(kinds: 2), [now, 1000, "mine", "none"])
            #expect(
                promote.contains("SEARCH a USING INDEX baton_jobs_waiting (kind=? AND not_before<?)"),
                "\(promote)")
        }
        // And the claims find their jobs: the one of its kind, none of another's.
        func claim(_ kinds: [String], limit: Int) async throws -> [String] {
            try await store.claim(worker: "w", kinds: kinds, limit: limit, lease: .seconds(30)).map(\.name)
        }
        #expect(try await claim(["mine", "none"], limit: 10) == ["m"])
        #expect(try await claim(["none"], limit: 10).isEmpty)
        #expect(try await claim(["other"], limit: 3) == ["b0", "b1", "b2"])
    }

    /// The look of ``SQLiteJobStore/promoteDueSQL(kinds:)`` for one kind, without its update.
    static let promoteLook = String(
        SQLiteJobStore.promoteDueSQL(kinds: 1).split(separator: "IN (", maxSplits: 1)[1].dropLast())

    /// How many steps SQLite's machine took to run `sql` once: it grows with the rows a statement reads.
    static func steps(_ db: Database, _ sql: String, _ arguments: [any DatabaseValueConvertible]) throws -> Int32 {
        let statement = try db.makeStatement(sql: sql)
        try statement.setArguments(StatementArguments(arguments))
        _ = try Row.fetchAll(statement)
        return sqlite3_stmt_status(statement.sqliteStatement, SQLITE_STMTSTATUS_VM_STEP, 0)
    }

    /// Retries backing off keep their ids, older than the jobs submitted after them, so in the claims'
    /// order they come first: each claim read past every one of them while they waited (a backlog of
    /// retries after a failing service came back slowed every claim in proportion). They now wait in an
    /// index of their own, and a claim reads only those whose time has come, once.
    @Test("a claim reads past none of its own kind's jobs waiting for their time, and takes them in order once due")
    func waitingJobsStayOutOfTheWay() async throws {
        let clock = ManualDurableClock()
        let store = try SQLiteJobStore.inMemory(clock: clock.clock)
        let retry = RetryPolicy.constant(maxAttempts: 3, delay: .seconds(60))
        var failing = GraphSpec(name: "failing")
        for index in 0..<3000 {
            failing.jobs.append(JobSpec(name: "r\(index)", kind: "mine", input: Data(), retry: retry))
        }
        _ = try await store.submit(failing, uniqueKey: nil)
        while true {
            let claimed = try await store.claim(worker: "w", kinds: ["mine"], limit: 500, lease: .seconds(30))
            if claimed.isEmpty { break }
            let reports = claimed.map {
                AttemptReport(lease: $0.lease, outcome: .failed(message: "down", retryable: true))
            }
            #expect(try await store.finish(reports).allSatisfy { $0 == .accepted(.ready) })
        }
        var fresh = GraphSpec(name: "fresh")
        for index in 0..<20 {
            fresh.jobs.append(JobSpec(name: "n\(index)", kind: "mine", input: Data(), retry: .never))
        }
        _ = try await store.submit(fresh, uniqueKey: nil)
        let now = clock.now.storeTime
        let (claimSteps, promoteSteps) = try await store.writer.read { db in
            (
                try Self.steps(db, SQLiteJobStore.claimCandidatesSQL(kinds: 1), [now, 10, "mine"]),
                try Self.steps(db, Self.promoteLook, [now, 1000, "mine"])
            )
        }
        // Ten candidates and their rows: a few hundred steps. Reading past 3,000 waiting jobs took tens of thousands.
        #expect(claimSteps < 1000, "the claim took \(claimSteps) steps")
        #expect(promoteSteps < 200, "the look for due jobs took \(promoteSteps) steps")
        let first = try await store.claim(worker: "w", kinds: ["mine"], limit: 10, lease: .seconds(30))
        #expect(first.map(\.name) == (0..<10).map { "n\($0)" })
        clock.advance(by: .seconds(60))
        // Due: the retries come first again (same priority, older), the best 1,000 promoted by this claim.
        let second = try await store.claim(worker: "w", kinds: ["mine"], limit: 5, lease: .seconds(30))
        #expect(second.map(\.name) == (0..<5).map { "r\($0)" })
        let waiting = try await store.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM baton_jobs WHERE state = 'ready' AND waiting = 1") ?? -1
        }
        #expect(waiting == 2000, "\(waiting) jobs still waiting after a claim promoted the best 1,000")
        var names: [String] = []
        while true {
            let claimed = try await store.claim(worker: "w", kinds: ["mine"], limit: 700, lease: .seconds(30))
            if claimed.isEmpty { break }
            names += claimed.map(\.name)
        }
        #expect(names == (5..<3000).map { "r\($0)" } + (10..<20).map { "n\($0)" })
    }

    /// Version 5 marks the jobs that wait for their time. A file of version 4 holds such jobs unmarked:
    /// opened for writing, it is migrated, and its waiting jobs neither come out early nor stay behind.
    @Test("a version-4 file is migrated: its jobs waiting for their time are marked, and claimed once due")
    func migratesWaitingJobs() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("jobs.sqlite")
        let clock = ManualDurableClock()
        do {
            let store = try SQLiteJobStore(path: path, clock: clock.clock)
            var graph = GraphSpec(name: "g")
            graph.jobs.append(
                JobSpec(
                    name: "later", kind: "k", input: Data(), retry: .never, notBefore: clock.now.addingTimeInterval(60))
            )
            graph.jobs.append(JobSpec(name: "now", kind: "k", input: Data(), retry: .never))
            _ = try await store.submit(graph, uniqueKey: nil)
            // As version 4 left it: no mark, the ready jobs' indexes by kind and by start.
            try await store.writer.write { db in
                try db.execute(
                    sql: """
                        DROP INDEX baton_jobs_claim;
                        DROP INDEX baton_jobs_waiting;
                        ALTER TABLE baton_jobs DROP COLUMN waiting;
                        CREATE INDEX baton_jobs_ready_kind ON baton_jobs(kind, priority DESC, id) WHERE state = 'ready';
                        CREATE INDEX baton_jobs_ready_start ON baton_jobs(kind, not_before) WHERE state = 'ready';
                        UPDATE baton_durable_meta SET value = '4' WHERE key = 'schema';
                        """)
            }
            try store.close()
        }
        let store = try SQLiteJobStore(path: path, clock: clock.clock)
        defer { try? store.close() }
        let (version, marks, indexes) = try await store.writer.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT value FROM baton_durable_meta WHERE key = 'schema'"),
                try Dictionary(
                    uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT name, waiting FROM baton_jobs").map {
                        (try $0.value(at: 0) as String, try $0.value(at: 1) as Int)
                    }),
                try Set(String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index'"))
            )
        }
        #expect(version == SQLiteJobStore.schemaVersion)
        #expect(marks == ["later": 1, "now": 0])
        #expect(indexes.isSuperset(of: Self.newIndexes))
        #expect(indexes.isDisjoint(with: ["baton_jobs_ready_kind", "baton_jobs_ready_start"]))
        func claim() async throws -> [String] {
            try await store.claim(worker: "w", kinds: ["k"], limit: 10, lease: .seconds(300)).map(\.name)
        }
        #expect(try await claim() == ["now"])
        #expect(try await store.nextDueDate(kinds: ["k"]) == clock.now.addingTimeInterval(60))
        clock.advance(by: .seconds(60))
        #expect(try await claim() == ["later"])
    }
}
