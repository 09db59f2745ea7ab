import Baton
import BatonDurable
import BatonTesting
import Foundation
import JobStoreConformance
import NIOPosix
import PostgresNIO
import Testing

@testable import BatonPostgres

/// Submissions in the application's own transaction, on the application's own connection: the
/// transactional checks of `JobStoreConformance`, and what only PostgreSQL has (search paths).
@Suite(
    "PostgresJobStore: submissions in the application's transaction",
    .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresTransactionTests {
    @Test("conformance", arguments: JobStoreConformance.transactionChecks)
    func conformance(_ check: JobStoreConformance.TransactionCheck) async throws {
        try await TestPostgres.withStore("tx") { store, configuration in
            let application = try await Self.applicationConnection(configuration)
            do {
                try await check.run(store: store) {
                    try await PostgresApplicationTransaction(store: store, connection: application)
                }
                try await application.close()
            } catch {
                try? await application.close()
                throw error
            }
        }
    }

    @Test("the application's rows and the run commit together; its search path is left as it was")
    func rowsAndRunTogether() async throws {
        try await TestPostgres.withStore("txrows") { store, configuration in
            let application = try await Self.applicationConnection(configuration)
            defer { Task { try? await application.close() } }
            try await application.query("CREATE TABLE orders (id int PRIMARY KEY)", logger: TestPostgres.logger)
            try await application.query("BEGIN", logger: TestPostgres.logger)
            try await application.query("INSERT INTO orders VALUES (1)", logger: TestPostgres.logger)
            _ = try await store.submit(
                GraphSpec(name: "ship 1", jobs: [JobSpec(name: "ship", kind: "k", input: Data("1".utf8))]),
                uniqueKey: "ship-1",
                on: application)
            try await application.query("ROLLBACK", logger: TestPostgres.logger)
            try await application.query("BEGIN", logger: TestPostgres.logger)
            try await application.query("INSERT INTO orders VALUES (2)", logger: TestPostgres.logger)
            let run = try await store.submit(
                GraphSpec(name: "ship 2", jobs: [JobSpec(name: "ship", kind: "k", input: Data("1".utf8))]),
                uniqueKey: "ship-2",
                on: application)
            // The application's own tables named `jobs` and `runs` are untouched, and still first on its path.
            let own = try await application.query("SELECT count(*) FROM jobs", logger: TestPostgres.logger)
                .collect().first?.decode(Int.self)
            #expect(own == 0)
            try await application.query("COMMIT", logger: TestPostgres.logger)
            let orders = try await application.query("SELECT id FROM orders", logger: TestPostgres.logger)
                .collect().map { try $0.decode(Int.self) }
            #expect(orders == [2])
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 10, lease: .seconds(30))
            #expect(claimed.map(\.job) == run.jobs)
            #expect(try await store.submit(GraphSpec(name: "again", jobs: []), uniqueKey: "ship-1").existing == false)
        }
    }

    @Test("a connection to a database without the store is refused with a clear error")
    func noStoreThere() async throws {
        try await TestPostgres.withStore("txnone") { store, configuration in
            var other = configuration
            other.schema = configuration.schema + "_none"
            let elsewhere = try PostgresJobStore(configuration: other, logger: TestPostgres.logger)
            let application = try await Self.applicationConnection(configuration)
            defer { Task { try? await application.close() } }
            let error = try await #require(throws: DurableError.self) {
                _ = try await elsewhere.submit(
                    GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: nil,
                    on: application)
            }
            #expect(error.code == .misuse)
            #expect(error.message.contains(other.schema), "\(error.message)")
            _ = store
        }
    }

    /// The application's connection: to the store's database, with a search path of its own whose
    /// schema has tables named like the store's.
    static func applicationConnection(_ configuration: PostgresStoreConfiguration) async throws -> PostgresConnection {
        let connection = try await TestPostgres.connect(configuration, id: 1)
        let schema = configuration.schema + "_app"
        for statement in [
            "CREATE SCHEMA \"\(schema)\"", "SET search_path TO \"\(schema)\"", "CREATE TABLE runs (id int)",
            "CREATE TABLE jobs (id int)",
        ] {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestPostgres.logger)
        }
        return connection
    }
}

/// A transaction of the application's own connection, held open across calls.
final class PostgresApplicationTransaction: ApplicationTransaction {
    let store: PostgresJobStore
    let connection: PostgresConnection

    init(store: PostgresJobStore, connection: PostgresConnection) async throws {
        self.store = store
        self.connection = connection
        try await connection.query("BEGIN", logger: TestPostgres.logger)
    }

    func submit(_ graph: GraphSpec, uniqueKey: String?) async throws -> SubmittedRun {
        try await store.submit(graph, uniqueKey: uniqueKey, on: connection)
    }

    func commit() async throws { try await connection.query("COMMIT", logger: TestPostgres.logger) }
    func rollback() async throws { try await connection.query("ROLLBACK", logger: TestPostgres.logger) }
}

@Suite(
    "PostgresJobStore: completions in one transaction with the application's writes",
    .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresCompletionTests {
    @Test("conformance", arguments: JobStoreConformance.completionChecks)
    func conformance(_ check: JobStoreConformance.CompletionCheck) async throws {
        try await TestPostgres.withStore("fx") { store, configuration in
            try await check.run(store: store, effects: try await PostgresEffects(store: store))
        }
    }

    @Test("a completion whose reply is lost at COMMIT is recognised when tried again: the writes ran once")
    func lostReplyRunsWritesOnce() async throws {
        try await TestPostgres.withStore("fxlost") { store, _ in
            let effects = try await PostgresEffects(store: store)
            let run = try await store.submit(
                GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: nil)
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
            store.faults.loseReply(of: "complete")
            #expect(try await effects.complete(claimed[0].lease, output: Data("1".utf8), row: "a", fail: false))
            #expect(try await effects.rows() == ["a"])
            #expect(try await store.record(of: run.jobs[0]).state == .succeeded)
        }
    }

    @Test("a completion refused because its job was asked to cancel is not taken for a success when retried")
    func lostReplyOfACancelledCompletion() async throws {
        try await TestPostgres.withStore("fxcancel") { store, _ in
            let effects = try await PostgresEffects(store: store)
            let run = try await store.submit(
                GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: nil)
            let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
            try await store.cancel(job: run.jobs[0], reason: "stop")
            store.faults.loseReply(of: "complete")
            let recorded = try await effects.complete(
                claimed[0].lease, output: Data("1".utf8), row: "a", fail: false,
                additions: RunAddition(jobs: [JobSpec(name: "more", kind: "k", input: Data("1".utf8))]))
            #expect(!recorded, "the writes were not made: not reported as recorded")
            #expect(try await effects.rows() == [])
            #expect(try await store.record(of: run.jobs[0]).state == .cancelled)
        }
    }

    @Test("the writes run with PostgreSQL's default search path: an unqualified table of public is the application's")
    func writesSeeThePublicSchema() async throws {
        try await TestPostgres.withStore("fxpath") { store, configuration in
            let table = "\(configuration.schema)_public_probe"
            try await store.query(PostgresQuery(unsafeSQL: "CREATE TABLE public.\(table) (n int)"))
            do {
                let run = try await store.submit(
                    GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]),
                    uniqueKey: nil)
                let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
                let recorded = try await store.complete(claimed[0].lease, output: Data("1".utf8)) { connection in
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "INSERT INTO \(table) VALUES (1)"), logger: TestPostgres.logger)
                }
                #expect(recorded)
                #expect(try await store.record(of: run.jobs[0]).state == .succeeded)
                let rows = try await store.query(PostgresQuery(unsafeSQL: "SELECT count(*)::int FROM public.\(table)"))
                #expect(try rows.first?.decode(Int.self) == 1)
                // The store's own statements afterwards still find its tables.
                #expect(try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30)).isEmpty)
            } catch {
                _ = try? await store.query(PostgresQuery(unsafeSQL: "DROP TABLE public.\(table)"))
                throw error
            }
            try await store.query(PostgresQuery(unsafeSQL: "DROP TABLE public.\(table)"))
        }
    }

    @Test("a worker's job counts each run once, in the completion's transaction")
    func workerCountsOnce() async throws {
        try await TestPostgres.withStore("fxworker") { store, _ in
            let table = "\(store.configuration.schema)_app"
            try await store.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \"\(table)\""))
            try await store.query(
                PostgresQuery(unsafeSQL: "CREATE TABLE \"\(table)\".counters (name text PRIMARY KEY, count int)"))
            var graph = JobGraph(name: "count")
            for index in 0..<20 { _ = graph.add(PostgresCounted.self, input: .init(table: table, name: "c\(index)")) }
            let run = try await store.submit(graph)
            let worker = try DurableWorker(
                store: store, jobs: [PostgresCounted()],
                configuration: .init(id: "counter", maxConcurrentJobs: 4, pollInterval: .milliseconds(200)))
            try await withDeadline(.seconds(60), "the counting run") { try await worker.run(until: run) }
            let counts = try await store.query(
                PostgresQuery(unsafeSQL: "SELECT count FROM \"\(table)\".counters")
            ).map { try $0.decode(Int.self) }
            #expect(counts.count == 20)
            #expect(counts.allSatisfy { $0 == 1 }, "\(counts)")
        }
    }
}

extension PostgresTransactionTests {
    /// A runtime probe (7 December 2026): a job whose writes failed on the server was recorded with
    /// postgres-nio's "Generic description to prevent accidental leakage of sensitive data", hiding the
    /// cause from `explain` and `baton job`. The store now says what the server said.
    @Test("a PostgreSQL error of a job's writes is recorded with what the server said")
    func aWritesErrorIsRecordedWithTheServersWords() async throws {
        try await TestPostgres.withStore("fxerror") { store, _ in
            var graph = JobGraph(name: "missing table")
            let job = graph.add(
                PostgresCounted.self, input: .init(table: "\(store.configuration.schema)_nowhere", name: "n"),
                retry: .never)
            let run = try await store.submit(graph)
            let worker = try DurableWorker(
                store: store, jobs: [PostgresCounted()],
                configuration: .init(id: "w", pollInterval: .milliseconds(200)))
            try await withDeadline(.seconds(60), "the run") { try await worker.run(until: run) }
            let record = try await store.record(of: run[job])
            #expect(record.state == .failed)
            let error = record.lastError ?? ""
            #expect(error.contains("does not exist (SQLSTATE 42P01)"), "\(error)")
            #expect(!error.contains("Generic description"), "\(error)")
        }
    }
}

/// The PostgreSQL form of a completion asked of a worker whose store is SQLite (no server needed).
@Test("a job asking for a PostgreSQL completion on a SQLite worker fails with a clear message")
func postgresCompletionOnASQLiteWorker() async throws {
    let store = try SQLiteJobStore.inMemory()
    var graph = JobGraph(name: "wrong store")
    let job = graph.add(PostgresCounted.self, input: .init(table: "t", name: "n"), retry: .never)
    let run = try await store.submit(graph)
    let worker = try DurableWorker(
        store: store, jobs: [PostgresCounted()], configuration: .init(id: "w", pollInterval: .milliseconds(200)))
    try await withDeadline(.seconds(60), "the run") { try await worker.run(until: run) }
    let record = try await store.record(of: run[job])
    #expect(record.state == .failed)
    #expect(
        record.lastError?.contains(
            "asked for a PostgreSQL completion transaction, but its worker's store is SQLiteJobStore")
            == true, "\(record.lastError ?? "")")
}

/// Counts its input's name in the application's `counters` table, in the completion's transaction.
struct PostgresCounted: DurableJob {
    struct Input: Codable, Sendable {
        var table: String
        var name: String
    }
    static let kind = "test.pg-counted"
    func run(_ input: Input, context: DurableJobContext) async throws -> Int {
        try await context.complete(returning: 1) { (connection: PostgresConnection) in
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        INSERT INTO "\(input.table)".counters (name, count) VALUES ($1, 1)
                        ON CONFLICT (name) DO UPDATE SET count = counters.count + 1
                        """,
                    binds: {
                        var b = PostgresBindings(); b.append(input.name); return b
                    }()),
                logger: TestPostgres.logger)
        }
    }
}

/// The application's table `effects`, in a schema of its own, written in the store's completion transaction.
final class PostgresEffects: ApplicationEffects {
    let store: PostgresJobStore
    let table: String

    init(store: PostgresJobStore) async throws {
        self.store = store
        table = "\"\(store.configuration.schema)_app\".effects"
        try await store.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \"\(store.configuration.schema)_app\""))
        try await store.query(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (seq serial, row text NOT NULL)"))
    }

    func complete(_ lease: Lease, output: Data, row: String, fail: Bool, additions: RunAddition?) async throws -> Bool {
        let table = table
        return try await store.complete(lease, output: output, additions: additions) { connection in
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "INSERT INTO \(table) (row) VALUES ($1)",
                    binds: {
                        var b = PostgresBindings(); b.append(row); return b
                    }()),
                logger: TestPostgres.logger)
            if fail { throw EffectsRefused() }
        }
    }

    func rows() async throws -> [String] {
        try await store.query(PostgresQuery(unsafeSQL: "SELECT row FROM \(table) ORDER BY seq")).map {
            try $0.decode(String.self)
        }
    }
}
