import Baton
import BatonDurable
import BatonTesting
import JobStoreConformance
import PostgresNIO
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

@Suite(
    "PostgresJobStore through a worker: an addition waiting for a running job",
    .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresWorkerConflictTests {
    @Test(
        "an addition waiting for a running job fails that attempt as a conflict and the next adds, through a worker",
        arguments: [false, true])
    func anAdditionWaitingForARunningJobIsRetriedThroughAWorker(_ ownTransaction: Bool) async throws {
        let inTransaction: @Sendable (DurableJobContext, Int) async throws -> Int = { context, value in
            let writes: @Sendable (PostgresConnection) async throws -> Void = { _ in }
            return try await context.complete(returning: value, writes: writes)
        }
        try await withDeadline(.seconds(60), "the run whose adder conflicts with a running job") {
            try await TestPostgres.withStore("conflict") { store, _ in
                try await JobStoreConformance.additionWaitingForARunningJob(
                    on: store, completingWith: ownTransaction ? inTransaction : nil)
            }
        }
    }
}
