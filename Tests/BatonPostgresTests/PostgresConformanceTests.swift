import Baton
import BatonDurable
import JobStoreConformance
import Testing

@testable import BatonPostgres

/// The same checks as `SQLiteConformanceTests`: one suite, two backends.
@Suite("PostgresJobStore conformance", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresConformanceTests {
    @Test("PostgreSQL", arguments: JobStoreConformance.checks)
    func conformance(_ check: JobStoreConformance.Check) async throws {
        let configuration = try TestPostgres.configuration("conformance")
        let opened = Protected<PostgresJobStore?>(nil)
        defer {
            if let store = opened.withLock({ $0 }) { store.close() }
        }
        try await check.run { clock in
            let store = try await TestPostgres.open(
                configuration: configuration, clock: clock, logger: TestPostgres.logger)
            opened.withLock { $0 = store }
            return store
        }
        if let store = opened.withLock({ $0 }) { try await TestPostgres.drop(configuration.schema, using: store) }
    }
}
