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
        let store = try SQLiteJobStore.inMemory()
        let started = Gate()
        let endings = Protected<[String]>([])
        var graph = JobGraph(name: "g")
        graph.add(Blocker.self, input: "b")
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Blocker(started: started, endings: endings)], grace: .zero)
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
