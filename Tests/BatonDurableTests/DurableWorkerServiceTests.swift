import Baton
import BatonDurable
import BatonTesting
import Foundation
import Logging
import ServiceLifecycle
import Testing

@Suite("DurableWorker as a Service")
struct DurableWorkerServiceTests {
    @Test("a service group's graceful shutdown stops the worker and gives its jobs back")
    func gracefulShutdown() async throws {
        let setup = try await BlockerSetup()
        let (store, run, worker, started, endings) = (
            setup.store, setup.run, setup.worker, setup.started, setup.endings
        )
        let group = ServiceGroup(
            configuration: .init(services: [worker], logger: Logger(label: "test.service-group")))
        let running = Task { try await group.run() }
        try await withDeadline(.seconds(30), "the job starts") { await started.waitAsync() }
        await group.triggerGracefulShutdown()
        try await withDeadline(.seconds(30), "the group stops") { try await running.value }
        #expect(endings.current == ["b: cancelled"])
        #expect(try await store.record(of: run.jobs[0]).state == .ready)
    }
}
