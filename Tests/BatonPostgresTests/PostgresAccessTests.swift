import Baton
import BatonDurable
import BatonTesting
import Foundation
import Logging
import NIOPosix
import PostgresNIO
import Testing

@testable import BatonPostgres

/// Roles with few privileges, errors that mean "try again elsewhere or later", and a closed store.
@Suite("PostgreSQL access and error handling", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresAccessTests {
    /// A login role of its own (dropped by `dropRole(_:using:)`), with `attributes` (`CONNECTION LIMIT 0`).
    static func createRole(using store: PostgresJobStore, attributes: String = "") async throws -> String {
        let role = "baton_role_\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
        try await store.client.query(PostgresQuery(unsafeSQL: "CREATE ROLE \(role) LOGIN \(attributes)"))
        return role
    }

    static func dropRole(_ role: String, using store: PostgresJobStore) async throws {
        try await store.client.query(PostgresQuery(unsafeSQL: "DROP OWNED BY \(role)"))
        try await store.client.query(PostgresQuery(unsafeSQL: "DROP ROLE IF EXISTS \(role)"))
    }

    /// `configuration` as `role` (the test server trusts local connections).
    static func configuration(
        _ configuration: PostgresStoreConfiguration, as role: String
    ) -> PostgresStoreConfiguration {
        var result = configuration
        result.username = role
        result.password = nil
        return result
    }

    @Test(
        "a role with only USAGE on the schema and DML on its tables (no CREATE on the database) opens a migrated store and works in it"
    )
    func leastPrivilegeRoleOpensMigratedStore() async throws {
        try await withDeadline(.seconds(120), "a least-privilege role opens and uses a store") {
            try await TestPostgres.withStore("leastprivilege") { store, configuration in
                let role = try await Self.createRole(using: store)
                do {
                    let schema = configuration.schema
                    for grant in [
                        "GRANT USAGE ON SCHEMA \"\(schema)\" TO \(role)",
                        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA \"\(schema)\" TO \(role)",
                        "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA \"\(schema)\" TO \(role)",
                    ] {
                        try await store.client.query(PostgresQuery(unsafeSQL: grant))
                    }
                    let canCreate = try await store.client.query(
                        PostgresQuery(
                            unsafeSQL: "SELECT has_database_privilege('\(role)', current_database(), 'CREATE')")
                    ).collect().first?.decode(Bool.self)
                    #expect(
                        canCreate == false, "the role must lack CREATE on the database for this test to mean anything")

                    let limited = try await TestPostgres.open(
                        configuration: Self.configuration(configuration, as: role), logger: TestPostgres.logger)
                    defer { limited.close() }
                    let run = try await limited.submit(
                        GraphSpec(
                            name: "g",
                            jobs: [
                                JobSpec(
                                    name: "a", kind: "k", input: Data("1".utf8),
                                    categories: [DurableCategory(name: "c", limit: 1)])
                            ]
                        ),
                        uniqueKey: "once")
                    let claimed = try await limited.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
                    #expect(claimed.map(\.lease.job) == run.jobs)
                    let results = try await limited.finish(
                        claimed.map { AttemptReport(lease: $0.lease, outcome: .succeeded(output: Data("2".utf8))) })
                    #expect(results == [.accepted(.succeeded)])
                } catch {
                    try? await Self.dropRole(role, using: store)
                    throw error
                }
                try await Self.dropRole(role, using: store)
            }
        }
    }

    /// The error a statement gets from the server, for `classify`.
    static func serverError(
        _ store: PostgresJobStore, _ body: @escaping @Sendable (PostgresConnection) async throws -> Void
    ) async throws -> (any Error)? {
        try await store.client.withConnection { connection in
            let failure: (any Error)?
            do {
                try await body(connection)
                failure = nil
            } catch {
                failure = error
            }
            // The connection goes back to the pool: never in a failed transaction.
            _ = try? await connection.query("ROLLBACK", logger: TestPostgres.logger)
            return failure
        }
    }

    @Test("a server that is read-only (a standby during a failover) or has no connection left is retried, not reported")
    func transientServerErrorsAreRetried() async throws {
        try await withDeadline(.seconds(60), "classifying read-only and too-many-connections errors") {
            try await TestPostgres.withStore("transient") { store, configuration in
                let readOnly = try await Self.serverError(store) { connection in
                    try await connection.query("BEGIN READ ONLY", logger: TestPostgres.logger)
                    try await connection.query("INSERT INTO workers VALUES ('x', '{}', 0)", logger: TestPostgres.logger)
                }
                let readOnlyState = (readOnly as? PSQLError)?.serverInfo?[.sqlState]
                #expect(readOnlyState == "25006")
                #expect(PostgresFailure.classify(try #require(readOnly)) == .unreachable)

                let role = try await Self.createRole(using: store, attributes: "CONNECTION LIMIT 0")
                do {
                    let refused: (any Error)?
                    do {
                        let connection = try await PostgresConnection.connect(
                            on: MultiThreadedEventLoopGroup.singleton.next(),
                            configuration: try Self.configuration(configuration, as: role).connectionConfiguration(),
                            id: 1, logger: TestPostgres.logger
                        ).get()
                        try? await connection.close()
                        refused = nil
                    } catch {
                        refused = error
                    }
                    #expect((refused as? PSQLError)?.serverInfo?[.sqlState] == "53300")
                    #expect(PostgresFailure.classify(try #require(refused)) == .unreachable)
                } catch {
                    try? await Self.dropRole(role, using: store)
                    throw error
                }
                try await Self.dropRole(role, using: store)
            }
        }
    }

    @Test("a call after close() throws PostgresStoreError.closed, saying to make a new store")
    func callsAfterCloseSayClosed() async throws {
        try await withDeadline(.seconds(60), "calls on a closed store") {
            let configuration = try TestPostgres.configuration("closed")
            let store = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            let other = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            store.close()
            let claimError = await #expect(throws: PostgresStoreError.self) {
                _ = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
            }
            #expect(claimError == .closed)
            #expect(claimError?.message.contains("create a new PostgresJobStore") == true)
            let submitError = await #expect(throws: PostgresStoreError.self) {
                _ = try await store.submit(
                    GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: nil)
            }
            #expect(submitError == .closed)
            try await TestPostgres.drop(configuration.schema, using: other)
            other.close()
        }
    }
}
