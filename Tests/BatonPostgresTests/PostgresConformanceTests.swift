import Baton
import BatonDurable
import JobStoreConformance
import Testing

@testable import BatonPostgres

/// The same checks as `SQLiteConformanceTests`: one suite, two backends. One check at a time: each
/// opens a store with its pools and listener, and the 50-odd checks at once, beside the other suites,
/// took more connections than the test server allows (300: "too many clients" failed other suites).
@Suite(
    "PostgresJobStore conformance", .serialized, .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
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
