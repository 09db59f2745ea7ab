import Baton
import BatonTesting
import Foundation
import GRDB
import JobStoreConformance
import Testing

@testable import BatonDurable

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

    @Test("due schedules this program cannot fire are reported and left; the others fire")
    func unreadableScheduleIsReported() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("jobs.sqlite")
        let clock = ManualDurableClock()
        let store = try SQLiteJobStore(path: path, clock: clock.clock)
        for name in ["future", "plain"] {
            _ = try await store.schedule(
                Schedule(
                    name: name, timing: .every(.seconds(60)),
                    graph: GraphSpec(name: name, jobs: [JobSpec(name: "j", kind: "k", input: Data("1".utf8))])))
        }
        // As a newer version might write it: a timing this one does not know; and a graph this
        // version's rules refuse (stored by an older, laxer one).
        let refused = Schedule(
            name: "refused", timing: .every(.seconds(60)),
            graph: GraphSpec(name: "refused", jobs: [JobSpec(name: "j", kind: "k")]))
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(
                sql: "UPDATE baton_schedules SET definition = ? WHERE name = 'future'",
                arguments: [#"{"name":"future","timing":{"fortnightly":{}},"catchUp":"skip"}"#])
            try db.execute(
                sql:
                    "INSERT INTO baton_schedules (name, definition, next_tick, paused) SELECT 'refused', ?, next_tick, 0 FROM baton_schedules WHERE name = 'plain'",
                arguments: [try refused.stored()])
        }
        try queue.close()
        clock.advance(by: .seconds(61))
        let fired = try await store.fireDueSchedules()
        #expect(fired.runs.map(\.schedule) == ["plain"], "the others fire")
        #expect(fired.unfired.keys.sorted() == ["future", "refused"])
        #expect(fired.unfired["future"]?.contains("future") == true, "names it: \(fired.unfired)")
        #expect(fired.unfired["refused"]?.contains("no input") == true, "says why: \(fired.unfired)")
        // Still due (left for a worker that can fire them), but the next tick given is that of the
        // schedule this program fires: a worker waits for it, not calling again at once.
        let again = try await store.fireDueSchedules()
        #expect(again.runs.isEmpty && again.unfired.keys.sorted() == ["future", "refused"])
        let next = try #require(again.nextTick)
        #expect(next == fired.runs[0].tick.addingTimeInterval(60), "plain's next tick")
        #expect(
            DurableWorker.scheduleWait(after: again, asked: clock.now, now: clock.now, poll: .seconds(5))
                == .seconds(5))
        // One that cannot be read can still be paused (then it is not reported), and removed.
        try await store.setSchedule(named: "future", paused: true)
        #expect(try await store.fireDueSchedules().unfired.keys.sorted() == ["refused"])
        let resumed = await #expect(throws: DurableError.self) {
            try await store.setSchedule(named: "future", paused: false)
        }
        #expect(resumed?.message.contains("cannot read") == true, "says why: \(resumed?.message ?? "")")
        try await store.removeSchedule(named: "future")
    }

    @Test("the schedule loop waits for the next tick, at most a poll; at once only after firing a backlog")
    func scheduleLoopWaits() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let run = SubmittedRun(run: DurableRunID(1), jobs: [], existing: false)
        // `next` relative to `now`; the call was made `took` seconds before `now`.
        func wait(_ next: Double?, fired: Bool, took: Double = 0) -> Duration {
            DurableWorker.scheduleWait(
                after: FiredSchedules(
                    runs: fired ? [(schedule: "s", tick: now, run: run)] : [],
                    nextTick: next.map { now.addingTimeInterval($0) }),
                asked: now.addingTimeInterval(-took), now: now, poll: .seconds(1))
        }
        #expect(wait(nil, fired: false) == .seconds(1))
        #expect(wait(0.25, fired: false) == .milliseconds(250))
        #expect(wait(5, fired: false) == .seconds(1))
        #expect(wait(-3, fired: false) == .seconds(1), "due before the call, not fired: not a loop without a pause")
        #expect(wait(-3, fired: true) == .zero, "a backlog (catch-up .all) goes on at once")
        #expect(wait(-0.002, fired: false, took: 0.005) == .zero, "a tick that came due during the call: at once")
    }
}
