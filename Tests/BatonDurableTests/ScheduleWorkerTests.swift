import Baton
import BatonDurable
import BatonTesting
import Foundation
import Testing

/// Workers fire their store's schedules while they run.
@Suite("Schedules on workers")
struct ScheduleWorkerTests {
    struct Beat: DurableJob {
        static let kind = "test.schedule.beat"
        static let beats = AsyncStream<Int>.makeStream()
        func run(_ input: Int, context: DurableJobContext) async throws -> Int {
            Self.beats.continuation.yield(Int(context.run.rawValue))
            return input
        }
    }

    @Test("two workers running a one-second schedule make one run per tick, and run them")
    func workersFireTicks() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "beat")
        graph.add(Beat.self, input: 1)
        try await store.schedule(name: "beat", every: .seconds(1), graph: graph, catchUp: .all)
        let workers = try (1...2).map { index in
            try DurableWorker(
                store: store, jobs: [Beat()],
                configuration: .init(id: "w\(index)", pollInterval: .milliseconds(100), retention: nil))
        }
        let running = workers.map { worker in Task { try await worker.run() } }
        let seen = Protected<[Int]>([])
        try await withDeadline(.seconds(30), "three scheduled runs") {
            for await run in Beat.beats.stream {
                if seen.withLock({
                    $0.append(run); return $0.count
                }) == 3 {
                    break
                }
            }
        }
        for worker in workers { worker.shutdown() }
        for task in running { try await task.value }
        #expect(Set(seen.current).count == 3, "each tick's run ran once: \(seen.current)")
        let runs = try await store.runs(RunFilter(name: "beat", limit: 100)).runs
        #expect(Set(runs.compactMap(\.uniqueKey)).count == runs.count, "one run per tick")
        #expect(try await store.schedules().first?.lastTick != nil)
    }
}
