import Baton
import BatonDurable
import BatonTesting
import Foundation
import Testing

/// Snoozes until its attempt number passes its input, recording each attempt's number and maximum;
/// an input below zero snoozes with that many seconds (a wait no store keeps).
struct Snoozer: DurableJob {
    static let kind = "test.snoozer"
    let seen: Protected<[String]>
    func run(_ input: Int, context: DurableJobContext) async throws -> String {
        seen.withLock { $0.append("\(context.attempt)/\(context.maxAttempts)") }
        if input < 0 { throw Snooze(for: .seconds(input)) }
        if context.attempt <= input { throw Snooze(for: .zero) }
        return "done after \(context.attempt - 1) snoozes"
    }
}

@Suite("Snooze: a durable job that asks to run again later")
struct SnoozeTests {
    @Test("a job that snoozes runs again with attempt numbers of its own, its retry policy untouched")
    func snoozesThenSucceeds() async throws {
        let store = try SQLiteJobStore.inMemory()
        let seen = Protected<[String]>([])
        let ends = AttemptEnds()
        var graph = JobGraph(name: "snoozes")
        // No retry: a snooze that spent an attempt would fail the job at its first one.
        let snoozer = graph.add(Snoozer.self, input: 2, name: "snoozer", retry: .never)
        graph.add(Snoozer.self, input: 0, name: "after", after: [snoozer], retry: .never)
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Snoozer(seen: seen)], instruments: [ends])
        try await withDeadline(.seconds(30), "the run") { try await worker.run(until: run) }
        let explanation = try await store.explain(run: run.id)
        #expect(explanation["snoozer"]?.state == .succeeded)
        #expect(explanation["after"]?.state == .succeeded)
        #expect(explanation["snoozer"]?.attempts == 3)
        #expect(explanation["snoozer"]?.maxAttempts == 3)
        #expect(seen.current == ["1/1", "2/2", "3/3", "1/1"])
        #expect(ends.ends == ["snoozed", "snoozed", "succeeded", "succeeded"])
        let attempts = try await store.attempts(of: try #require(explanation["snoozer"]?.id))
        #expect(attempts.map(\.outcome) == [.snoozed, .snoozed, .succeeded])
        #expect(attempts.first?.error == "snoozed for 0 s")
        let output = try await store.output(of: snoozer, in: run)
        #expect(output == "done after 2 snoozes")
    }

    @Test("a snooze with a wait below zero fails its attempt, saying why")
    func negativeWait() async throws {
        let store = try SQLiteJobStore.inMemory()
        let seen = Protected<[String]>([])
        var graph = JobGraph(name: "bad snooze")
        graph.add(Snoozer.self, input: -5, name: "snoozer", retry: .immediate(maxAttempts: 2))
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Snoozer(seen: seen)])
        try await withDeadline(.seconds(30), "the run") { try await worker.run(until: run) }
        let explanation = try await store.explain(run: run.id)
        #expect(explanation["snoozer"]?.state == .failed)
        #expect(explanation["snoozer"]?.attempts == 2)
        #expect(
            explanation["snoozer"]?.lastError == "Snooze(for:) was given -5 s; a snooze waits zero seconds or more",
            "\(explanation["snoozer"]?.lastError ?? "nil")")
    }
}
