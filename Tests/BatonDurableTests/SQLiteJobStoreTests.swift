import Foundation
import GRDB
import Testing

@testable import BatonDurable

@Suite("SQLiteJobStore: files")
struct SQLiteJobStoreTests {
    /// A probe (7 December 2026): `baton runs` while another process held a write transaction failed
    /// after the busy timeout ("cannot prepare the job store … database is locked"), and every open
    /// of the store wrote to the file: its schema was prepared in a write transaction each time.
    @Test("opening a store of this version neither writes nor waits for another connection's write")
    func openingDoesNotWrite() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        let first = try SQLiteJobStore(path: path)
        _ = try await first.submit(
            GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: nil)
        try first.close()
        var configuration = Configuration()
        configuration.allowsUnsafeTransactions = true
        // The application's own connection to the file, which wrote (its log is not empty) and now holds a
        // write transaction open.
        let other = try DatabaseQueue(path: path, configuration: configuration)
        try await other.write { db in
            try db.execute(sql: "CREATE TABLE app_notes (text TEXT); INSERT INTO app_notes VALUES ('a')")
        }
        let cookie = try await other.read { try Int.fetchOne($0, sql: "PRAGMA schema_version") }
        try await other.writeWithoutTransaction { db in
            try db.execute(sql: "BEGIN IMMEDIATE; INSERT INTO app_notes VALUES ('b')")
        }
        let store = try SQLiteJobStore(path: path, busyTimeout: 0.2)
        #expect(try await store.runs(RunFilter()).runs.map(\.name) == ["g"])
        try store.close()
        try await other.writeWithoutTransaction { try $0.execute(sql: "ROLLBACK") }
        #expect(try await other.read { try Int.fetchOne($0, sql: "PRAGMA schema_version") } == cookie)
        try other.close()
    }

    /// A probe (7 December 2026): `baton dashboard` run by a user who may not write the store's folder
    /// opened the file immutable (no other connection used it then) and showed it as it was at the start
    /// for ever: runs submitted later answered 404.
    @Test("a store opened to read only while no one used the file follows later changes")
    func readOnlyStoreFollowsChanges() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        func graph(_ name: String) -> GraphSpec {
            GraphSpec(name: name, jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))])
        }
        let first = try SQLiteJobStore(path: path)
        _ = try await first.submit(graph("before"), uniqueKey: nil)
        try first.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "closed: no log beside the file")
        let reader = try SQLiteJobStore(readingOnly: path)
        #expect(try await reader.runs(RunFilter()).runs.map(\.name) == ["before"])
        // Another process (here, another store) opens the file and submits while the reader stays open.
        let writer = try SQLiteJobStore(path: path)
        let later = try await writer.submit(graph("later"), uniqueKey: nil)
        #expect(try await reader.runs(RunFilter()).runs.map(\.name) == ["later", "before"])
        #expect(try await reader.snapshot(of: later.run).run.name == "later")
        try writer.close()
        // Closed again (the log folded into the file): still followed.
        let third = try SQLiteJobStore(path: path)
        _ = try await third.submit(graph("third"), uniqueKey: nil)
        try third.close()
        #expect(try await reader.runs(RunFilter()).runs.map(\.name) == ["third", "later", "before"])
        try reader.close()
    }

    /// A probe (7 December 2026): these paths failed with SQLite's words ("could not activate WAL mode",
    /// "disk I/O error", "check that its directory exists"), and refusing a store of a newer version left
    /// `-wal` and `-shm` files beside the file it said it had not changed.
    @Test("a path that cannot hold a store is refused saying what to give, and a newer store is left alone")
    func pathsThatCannotHoldAStore() async throws {
        let directory = try TemporaryDirectory()
        for path in ["", ":memory:"] {
            let error = try #require(throws: DurableError.self) { _ = try SQLiteJobStore(path: path) }
            #expect(error.code == .misuse && error.message.contains("SQLiteJobStore.inMemory()"), "\(error.message)")
        }
        let folder = try #require(throws: DurableError.self) { _ = try SQLiteJobStore(path: directory.path("")) }
        #expect(folder.message.contains("it is a directory"), "\(folder.message)")
        let device = try #require(throws: DurableError.self) { _ = try SQLiteJobStore(path: "/dev/null") }
        #expect(device.message.contains("not a regular file"), "\(device.message)")

        let path = directory.path("newer.sqlite")
        let store = try SQLiteJobStore(path: path)
        try store.close()
        let queue = try DatabaseQueue(path: path)
        try await queue.write { try $0.execute(sql: "UPDATE baton_durable_meta SET value = '99' WHERE key = 'schema'") }
        try queue.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let newer = try #require(throws: DurableError.self) { _ = try SQLiteJobStore(path: path) }
        #expect(newer.code == .newerSchema)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    /// A probe (7 December 2026): a schema version of 'abc' read as 0, and the upgrade that followed
    /// failed with "duplicate column name: trace_context"; '5.0' opened in Swift and was refused by
    /// `baton` as version 0.
    @Test(
        "a schema version no BatonDurable writes is named as damage, by the store and by baton alike",
        arguments: [
            "'abc'", "''", "'5.0'", "x'05'",
        ])
    func damagedSchemaVersion(value: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        try SQLiteJobStore(path: path).close()
        let queue = try DatabaseQueue(path: path)
        try await queue.write {
            try $0.execute(sql: "UPDATE baton_durable_meta SET value = \(value) WHERE key = 'schema'")
        }
        try queue.close()
        let error = try #require(throws: DurableError.self) { _ = try SQLiteJobStore(path: path) }
        #expect(error.code == .notAStore, "\(error)")
        #expect(error.message.contains("changed by hand or damaged"), "\(error.message)")
        let reading = try #require(throws: DurableError.self) { _ = try SQLiteJobStore(readingOnly: path) }
        #expect(reading.message.contains("changed by hand or damaged"), "\(reading.message)")
    }

    /// The prune goes in batches (a probe, 7 December 2026: one transaction of 80,000 runs held the
    /// file's write lock for 38 s, and every worker's renewals with it): every batch is taken, a run
    /// larger than a batch alone goes whole, and unfinished runs stay.
    @Test("a prune of more runs than a batch holds deletes them all, and only finished ones")
    func pruneInBatches() async throws {
        let store = try SQLiteJobStore.inMemory()
        func job(_ index: Int) -> JobSpec { JobSpec(name: "j\(index)", kind: "k", input: Data("1".utf8)) }
        for index in 0..<1_200 {
            _ = try await store.submit(GraphSpec(name: "r\(index)", jobs: [job(0)]), uniqueKey: nil)
        }
        let big = try await store.submit(GraphSpec(name: "big", jobs: (0..<6_000).map(job)), uniqueKey: nil)
        while true {
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 1_000, lease: .seconds(60))
            if claimed.isEmpty { break }
            _ = try await store.finish(
                claimed.map { AttemptReport(lease: $0.lease, outcome: .succeeded(output: Data("1".utf8))) })
        }
        let open = try await store.submit(GraphSpec(name: "open", jobs: [job(0)]), uniqueKey: nil)
        #expect(try await store.prune(finishedBefore: .distantFuture) == 1_201)
        let left = try await store.runs(RunFilter()).runs
        #expect(left.map(\.id) == [open.run], "\(left.map(\.name))")
        await #expect(throws: DurableError.self) { _ = try await store.snapshot(of: big.run) }
        #expect(try await store.snapshot(of: open.run).jobs.count == 1)
    }

    @Test(
        "a job whose stored retry policy is damaged fails with its error and the damage named when it fails, and its run can still be explained"
    )
    func damagedRetryPolicy() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        let store = try SQLiteJobStore(path: path)
        let run = try await store.submit(
            GraphSpec(
                name: "g",
                jobs: [
                    JobSpec(name: "a", kind: "k", input: Data("1".utf8), retry: .immediate(maxAttempts: 3)),
                    JobSpec(name: "b", kind: "k", input: Data("2".utf8), dependencies: [.init(index: 0)]),
                ]),
            uniqueKey: nil)
        let queue = try DatabaseQueue(path: path)
        try await queue.write { try $0.execute(sql: "UPDATE baton_jobs SET retry = 'not json'") }
        try queue.close()
        let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
        let results = try await store.finish([
            AttemptReport(lease: claimed[0].lease, outcome: .failed(message: "boom", retryable: true))
        ])
        #expect(results == [.accepted(.failed)])
        let explanation = try await store.explain(run: run.run)
        #expect(explanation.jobs[0].lastError?.hasPrefix("boom (not retried: the job's stored retry policy") == true)
        #expect(explanation.jobs.map(\.state) == [.failed, .cancelled])
        #expect(explanation.run.finished != nil)
    }

    @Test("a file that is not SQLite is refused with a clear error, and left as it was")
    func foreignFile() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        let garbage = Data(repeating: 0x5A, count: 8192)
        try garbage.write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: DurableError.self) { try SQLiteJobStore(path: path) }
        #expect(error?.code == .notAStore)
        #expect(error?.message.contains(path) == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == garbage)
    }

    @Test("closing writes the log into the file: no side file is left, the file alone holds the run")
    func closeLeavesNoLog() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        let store = try SQLiteJobStore(path: path)
        let run = try await store.submit(
            GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: "u")
        _ = try await store.record(of: run.run)  // a read too: the pool's reader connection is open
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))  // open: the rows are in the log
        try store.close()
        try store.close()  // a second close does nothing
        for suffix in ["-wal", "-shm"] {
            #expect(!FileManager.default.fileExists(atPath: path + suffix), "\(suffix) left")
        }
        let error = await #expect(throws: DurableError.self) { _ = try await store.record(of: run.run) }
        #expect(error?.code == .storeFailure)
        #expect(error?.message.contains("was closed") == true)
        await #expect(throws: DurableError.self) {
            _ = try await store.submit(GraphSpec(name: "h", jobs: [JobSpec(name: "b", kind: "k")]), uniqueKey: nil)
        }

        let copy = directory.path("copy.sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        #expect(try await SQLiteJobStore(path: copy).record(of: run.run).name == "g")
    }

    @Test("a store written by a newer schema is refused and not changed")
    func newerSchema() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        do {
            let store = try SQLiteJobStore(path: path)
            _ = try await store.submit(
                GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: "u")
        }
        do {
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                try db.execute(sql: "UPDATE baton_durable_meta SET value = '99' WHERE key = 'schema'")
            }
            try queue.close()  // the log is copied into the file: the file alone holds the store
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let error = #expect(throws: DurableError.self) { try SQLiteJobStore(path: path) }
        #expect(error?.code == .newerSchema)
        #expect(error?.message.contains("99") == true)
        // Not a byte written: the check reads the version before anything opens the file for writing.
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the refused file was written to")
        let log = (try? Data(contentsOf: URL(fileURLWithPath: path + "-wal"))) ?? Data()
        #expect(log.isEmpty, "the refused file has a write-ahead log of \(log.count) bytes")
        let queue = try DatabaseQueue(path: path)
        let jobs = try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM baton_jobs") }
        #expect(jobs == 1)
    }

    @Test("a store at schema version 2 gains the runs' counts and the attempts table; its runs are counted")
    func migratesFromVersion2() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        do {
            let store = try SQLiteJobStore(path: path)
            _ = try await store.submit(
                GraphSpec(
                    name: "old",
                    jobs: [
                        JobSpec(name: "a", kind: "k", input: Data("1".utf8)),
                        JobSpec(name: "b", kind: "other", input: Data("1".utf8)),
                    ]), uniqueKey: nil)
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
            _ = try await store.finish([
                AttemptReport(lease: claimed[0].lease, outcome: .failed(message: "no", retryable: false))
            ])
        }
        do {
            // As version 2 left it.
            let queue = try DatabaseQueue(path: path)
            try await queue.write { db in
                for index in ["open", "failed", "cancelled", "name", "created"] {
                    try db.execute(sql: "DROP INDEX baton_runs_\(index)")
                }
                for column in ["jobs", "failed", "cancelled"] {
                    try db.execute(sql: "ALTER TABLE baton_runs DROP COLUMN \(column)")
                }
                try db.execute(sql: "DROP TABLE baton_attempts")
                try db.execute(sql: "DROP TABLE baton_schedules")
                try db.execute(sql: "ALTER TABLE baton_jobs DROP COLUMN added_by")
                try db.execute(sql: "ALTER TABLE baton_edges DROP COLUMN includes_added")
                try db.execute(sql: "UPDATE baton_durable_meta SET value = '2' WHERE key = 'schema'")
            }
            try queue.close()
        }
        let store = try SQLiteJobStore(path: path)
        let summary = try #require(try await store.runs(RunFilter()).runs.first)
        #expect(summary.jobs == 2 && summary.unfinished == 1 && summary.failed == 1 && summary.cancelled == 0)
        let claimed = try await store.claim(worker: "w", kinds: ["other"], limit: 1, lease: .seconds(30))
        _ = try await store.finish([AttemptReport(lease: claimed[0].lease, outcome: .succeeded(output: Data("1".utf8)))]
        )
        #expect(try await store.runs(RunFilter(state: .failed)).runs.map(\.id) == [summary.id])
        #expect(try await store.attempts(of: claimed[0].lease.job).map(\.outcome) == [.succeeded])
    }

    @Test("a store reopened keeps its runs, and shares a file with an application's own tables")
    func reopen() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("app.sqlite")
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in try db.execute(sql: "CREATE TABLE quakes (id TEXT PRIMARY KEY)") }
        let run: SubmittedRun
        do {
            let store = try SQLiteJobStore(path: path)
            run = try await store.submit(
                GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: "u")
        }
        let store = try SQLiteJobStore(path: path)
        let again = try await store.submit(
            GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: "u")
        #expect(again.existing && again.run == run.run)
        #expect(try await store.claim(worker: "w", kinds: ["k"], limit: 5, lease: .seconds(5)).count == 1)
    }
}
