import Logging
import PostgresNIO
import Testing

@testable import BatonPostgres

@Suite("PostgreSQL schema and migrations", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresSchemaTests {
    @Test("a new schema is created at the current version, and reopening leaves it there")
    func createsAndReopens() async throws {
        try await TestPostgres.withStore("create") { store, configuration in
            let version = try await store.client.query("SELECT version FROM baton_schema_version")
                .collect().first?.decode(Int.self)
            #expect(version == PostgresJobStore.schemaVersion)
            let tables = try await store.client.query(
                "SELECT table_name::text FROM information_schema.tables WHERE table_schema = \(configuration.schema)"
            ).collect().map { try $0.decode(String.self) }
            #expect(Set(tables).isSuperset(of: ["runs", "jobs", "edges", "holders", "baton_schema_version"]))

            let again = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            again.close()
            let after = try await store.client.query("SELECT count(*)::int FROM baton_schema_version")
                .collect().first?.decode(Int.self)
            #expect(after == 1)
        }
    }

    @Test("a schema written by a newer version is refused with an error saying so")
    func refusesNewerSchema() async throws {
        try await TestPostgres.withStore("newer") { store, configuration in
            let newer = PostgresJobStore.schemaVersion + 1
            try await store.client.query("UPDATE baton_schema_version SET version = \(newer)")
            let error = await #expect(throws: PostgresStoreError.self) {
                _ = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            }
            #expect(error?.isNewerSchema == true)
            #expect(error?.message.contains("version \(newer), newer than") == true)
            #expect(error?.message.contains(configuration.schema) == true)
        }
    }

    @Test("a schema holding someone else's tables is refused, not written into")
    func refusesForeignSchema() async throws {
        try await TestPostgres.withStore("foreign") { store, _ in
            let configuration = try TestPostgres.configuration("foreign2")
            try await store.client.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \"\(configuration.schema)\""))
            try await store.client.query(
                PostgresQuery(unsafeSQL: "CREATE TABLE \"\(configuration.schema)\".orders (id int)"))
            let error = await #expect(throws: PostgresStoreError.self) {
                _ = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            }
            #expect(error?.message.contains("'orders'") == true)
            let count = try await store.client.query(
                "SELECT count(*)::int FROM information_schema.tables WHERE table_schema = \(configuration.schema)"
            ).collect().first?.decode(Int.self)
            #expect(count == 1)
            try await TestPostgres.drop(configuration.schema, using: store)
        }
    }

    @Test("stores opening at once on a new schema migrate it once")
    func concurrentOpen() async throws {
        let configuration = try TestPostgres.configuration("race")
        let stores = try await withThrowingTaskGroup(of: PostgresJobStore.self) { group in
            for _ in 0..<4 {
                group.addTask { try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let versions = try await stores[0].client.query("SELECT version FROM baton_schema_version")
            .collect().map { try $0.decode(Int.self) }
        #expect(versions == [PostgresJobStore.schemaVersion])
        try await TestPostgres.drop(configuration.schema, using: stores[0])
        for store in stores { store.close() }
    }
}

@Suite("PostgreSQL store configuration")
struct PostgresStoreConfigurationTests {
    @Test("an address gives host, port, user, password and database")
    func parsesURL() throws {
        let configuration = try PostgresStoreConfiguration(url: "postgres://ann:secret@db.local:6543/jobs")
        #expect(configuration.host == "db.local")
        #expect(configuration.port == 6543)
        #expect(configuration.username == "ann")
        #expect(configuration.password == "secret")
        #expect(configuration.database == "jobs")
        #expect(configuration.schema == "baton")
    }

    @Test(
        "a bad address or schema name is an error saying what to write",
        arguments: [
            ("mysql://a@b/c", "not a PostgreSQL address"),
            ("postgres://host/db", "names no user"),
            ("postgres://ann@host", "names no database"),
        ])
    func badURL(url: String, expected: String) throws {
        let error = #expect(throws: PostgresStoreError.self) { _ = try PostgresStoreConfiguration(url: url) }
        #expect(error?.message.contains(expected) == true)
    }

    @Test("a schema name that is not a plain identifier is refused before connecting")
    func badSchema() throws {
        let configuration = try PostgresStoreConfiguration(url: "postgres://a@127.0.0.1/b", schema: "x\"; DROP")
        let error = #expect(throws: PostgresStoreError.self) { try configuration.validate() }
        #expect(error?.message.contains("lowercase letters") == true)
    }
}
