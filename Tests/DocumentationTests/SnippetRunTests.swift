import Baton
import BatonDurable
import Foundation
import Testing

// Snippets that run, beside their compiled copies in Snippets/.

@Test("the README's first example runs: both jobs succeed", .timeLimit(.minutes(1)))
func readmeFirstExampleRuns() async {
    let (download, outcome) = await readmeFirstExample()
    #expect(outcome.isSucceeded)
    #expect(download.outcomeIfDecided?.isSucceeded == true)
}

@Test("the durable example's graph runs to the end")
func durableExampleRuns() async throws {
    // The same statements against an in-memory store (the snippet writes jobs.sqlite where it runs).
    let store = try SQLiteJobStore.inMemory()
    var graph = JobGraph(name: "count")
    let fetch = graph.add(Fetch.self, input: URL(fileURLWithPath: #filePath), retry: .exponential(maxAttempts: 5))
    let count = graph.add(CountLines.self, inputFrom: fetch, categories: [.named("disk", limit: 1)])
    let run = try await store.submit(graph, uniqueKey: "count-hosts")
    let worker = try DurableWorker(store: store, jobs: [Fetch(), CountLines()])
    try await worker.run(until: run)
    let lines = try await store.output(of: count, in: run)
    #expect((lines ?? 0) > 10)
    #expect(try await store.explain(run).counts == [.succeeded: 2])
}
