import BatonDurable
import Foundation
import JobStoreConformance
import Testing

@Suite("SQLiteJobStore conformance")
struct SQLiteConformanceTests {
    @Test("in memory", arguments: JobStoreConformance.checks)
    func inMemory(_ check: JobStoreConformance.Check) async throws {
        try await check.run { clock in try SQLiteJobStore.inMemory(clock: clock) }
    }

    @Test("in a WAL file", arguments: JobStoreConformance.checks)
    func file(_ check: JobStoreConformance.Check) async throws {
        let directory = try TemporaryDirectory()
        try await check.run { clock in try SQLiteJobStore(path: directory.path("jobs.sqlite"), clock: clock) }
    }
}

/// A directory removed when the value is released.
final class TemporaryDirectory: Sendable {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("baton-durable-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    deinit { try? FileManager.default.removeItem(at: url) }
}
