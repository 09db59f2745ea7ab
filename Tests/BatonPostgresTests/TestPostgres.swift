import BatonDurable
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import BatonPostgres

/// The PostgreSQL server the tests use: `BATON_POSTGRES_URL`, set by `source .ci/postgres`.
///
/// Without it the PostgreSQL suites are skipped with a message saying how to run them — unless
/// `BATON_CI` is set: in CI a missing server is a failure, not a skip.
enum TestPostgres {
    static let environment = ProcessInfo.processInfo.environment
    static var url: String? { environment["BATON_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 } }
    static var required: Bool { (environment["BATON_CI"] ?? "").isEmpty == false }
    /// Whether the PostgreSQL suites run (and fail when the server is missing under CI).
    static var enabled: Bool { url != nil || required }
    static let skipMessage: Comment =
        "PostgreSQL tests skipped: BATON_POSTGRES_URL is not set (run `source .ci/postgres` first)"

    struct Missing: Error, CustomStringConvertible {
        var description: String {
            "BATON_CI is set but BATON_POSTGRES_URL is not: CI must start PostgreSQL (source .ci/postgres)"
        }
    }

    /// A configuration on a schema of its own, so tests running at once never see each other's rows.
    static func configuration(_ name: String) throws -> PostgresStoreConfiguration {
        guard let url else { throw Missing() }
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        var configuration = try PostgresStoreConfiguration(url: url, schema: "t_\(name.lowercased())_\(suffix)")
        configuration.maximumConnections = maximumConnections
        return configuration
    }

    /// The pool size of the tests' stores: the suites run at once against one stock server (100
    /// connections), and a store's default (8, with 4 more for submissions and its listener) made them
    /// run out of connections ("too many clients") once there were enough of them.
    static let maximumConnections = 3

    static let logger: Logger = {
        var logger = Logger(label: "baton.postgres.tests")
        logger.logLevel = .warning
        return logger
    }()

    /// Opens a store as the tests use it: run in a task of its own until its `close()` (tests only: a
    /// program runs it inside `withPostgresJobStore` or in a `ServiceGroup`).
    static func open(
        configuration: PostgresStoreConfiguration, clock: DurableClock = .system, logger: Logger = logger
    ) async throws -> PostgresJobStore {
        let store = try PostgresJobStore(configuration: configuration, clock: clock, logger: logger)
        let running = Task { try await store.run() }
        do {
            try await store.waitUntilOpen()
        } catch {
            store.close()
            _ = await running.result
            throw error
        }
        return store
    }

    /// A connection of the test's own (an application's, or a stuck session), tried again while the
    /// server has no connection to spare (SQLSTATE 53300, "too many clients": the suites run at once and
    /// their stores' pools come and go), as the stores' own connections are, for up to 60 s.
    static func connect(
        _ configuration: PostgresStoreConfiguration, id: Int
    ) async throws -> PostgresConnection {
        let start = ContinuousClock.now
        while true {
            do {
                return try await PostgresConnection.connect(
                    on: MultiThreadedEventLoopGroup.singleton.next(),
                    configuration: try configuration.connectionConfiguration(), id: id, logger: logger)
            } catch let error as PSQLError
                where error.serverInfo?[.sqlState] == "53300" && ContinuousClock.now - start < .seconds(60)
            {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// Runs `body` with a store on a fresh schema and drops the schema afterwards.
    static func withStore<T>(
        _ name: String, _ body: (PostgresJobStore, PostgresStoreConfiguration) async throws -> T
    ) async throws -> T {
        let configuration = try configuration(name)
        let store = try await TestPostgres.open(configuration: configuration, logger: logger)
        do {
            let result = try await body(store, configuration)
            try await drop(configuration.schema, using: store)
            store.close()
            return result
        } catch {
            try? await drop(configuration.schema, using: store)
            store.close()
            // postgres-nio's errors describe themselves generically; a failing test names the server's words.
            if let error = error as? PSQLError { throw Described(text: String(reflecting: error)) }
            throw error
        }
    }

    /// An error shown as its full text.
    struct Described: Error, CustomStringConvertible {
        var text: String
        var description: String { text }
    }

    static func drop(_ schema: String, using store: PostgresJobStore) async throws {
        try await store.client.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE"))
        // The application's schema of the transaction tests, when there is one.
        try await store.client.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \"\(schema)_app\" CASCADE"))
    }
}
