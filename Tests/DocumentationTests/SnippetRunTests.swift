import Baton
import BatonDurable
import Foundation
import GRDB
import Testing

// Snippets that run, beside their compiled copies in Snippets/.

@Test("the README's first example runs: both jobs succeed", .timeLimit(.minutes(1)))
func readmeFirstExampleRuns() async {
    let (download, outcome) = await readmeFirstExample()
    #expect(outcome.didSucceed)
    #expect(download.outcomeIfDecided?.didSucceed == true)
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

@Test("the Transactions article's SQLite examples run: an order and its run commit together, a visit counts once")
func transactionsExampleRuns() async throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("baton-tx-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let path = folder.appendingPathComponent("shop.sqlite").path
    let store = try SQLiteJobStore(path: path)
    let database = try DatabasePool(path: path)
    try await database.write { db in
        try db.execute(sql: "CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        try db.execute(sql: "CREATE TABLE pages (name TEXT PRIMARY KEY, views INTEGER NOT NULL)")
        try db.execute(sql: "INSERT INTO pages VALUES ('home', 0)")
    }
    let ship = try await placeOrder(7, database: database, store: store)
    // The same order again: the insert fails, and the transaction (with its submission) rolls back.
    await #expect(throws: DatabaseError.self) { _ = try await placeOrder(7, database: database, store: store) }
    var graph = JobGraph(name: "visits")
    let visit = graph.add(CountVisit.self, input: "home")
    let visits = try await store.submit(graph)
    let worker = try DurableWorker(store: store, jobs: [ShipOrder(), CountVisit()])
    try await worker.run(until: ship)
    try await worker.run(until: visits)
    #expect(try await store.output(of: visit, in: visits) == 4)
    #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT views FROM pages") } == 4)
    #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM baton_runs") } == 2)
}

@Test("the growing-run example imports every page once and reports after all of them")
func growingRunExampleRuns() async throws {
    let store = try SQLiteJobStore.inMemory()
    let run = try await importAllPages(store: store)
    let explanation = try await store.explain(run)
    // 5 pages of 100 (450 events): 5 listings, 5 imports, the report.
    #expect(explanation.counts == [.succeeded: 11])
    #expect(explanation.jobs.filter { $0.name.hasPrefix("import") }.count == 5)
    #expect(explanation.description.contains("+ list #2"))
}

@Test("the operating example retries a failed run in place")
func operatingExampleRuns() async throws {
    let store = try SQLiteJobStore.inMemory()
    let run = try await store.submit(
        GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8), retry: .never)]),
        uniqueKey: nil)
    let claimed = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(30))
    _ = try await store.finish([
        AttemptReport(lease: claimed[0].lease, outcome: .failed(message: "no", retryable: false))
    ])
    try await whyDidItFail(claimed[0].job, store: store)
    try await repairFailedRuns(store: store)
    #expect(try await store.runs(RunFilter()).runs.map(\.state) == [.running])
    _ = run
}

@Test("the schedules example stores two schedules and pauses one")
func schedulesExampleRuns() async throws {
    let store = try SQLiteJobStore.inMemory()
    try await scheduleRefreshes(store: store)
    let records = try await store.schedules()
    #expect(records.map(\.schedule.name) == ["hourly feed", "monthly feed"])
    #expect(records.map(\.paused) == [false, true])
}
