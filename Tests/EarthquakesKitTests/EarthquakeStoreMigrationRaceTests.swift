import BatonTesting
import EarthquakesKit
import Foundation
import Testing

/// Issue 31, defect 2: two first refreshes into a new database race to create its schema. GRDB's
/// migrator reads which migrations are applied, then runs each one in a transaction of its own; two
/// connections that both read "none" both created the table, and the second failed with "table
/// earthquake already exists" (about 1 in 10 pairs of refreshes started together; far more often here,
/// where both opens start at one gate). The store now decides what to run under the write lock.
@Suite(.timeLimit(.minutes(1)))
struct EarthquakeStoreMigrationRaceTests {
    @Test("two stores opening one new file at once both open it, and the schema is made once")
    func twoFirstOpensAtOnce() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for round in 0..<40 {
            let path = directory.path("race-\(round).sqlite")
            let start = Gate()
            let results = Recorder<String>()
            let finished = [Gate(), Gate()]
            // Two threads of their own (not Swift concurrency's): each blocks on SQLite's lock.
            let threads = finished.map { done in
                Thread {
                    defer { done.open() }
                    start.wait()
                    do {
                        let store = try EarthquakeStore(path: path)
                        try store.close()
                        results.record("opened")
                    } catch {
                        results.record("\(error) \((error as? StoreError)?.underlying ?? "")")
                    }
                }
            }
            for thread in threads { thread.start() }
            start.open()
            try await withDeadline(.seconds(30), "both opens of round \(round) end") {
                for done in finished { await done.waitAsync() }
            }
            #expect(results.values == ["opened", "opened"], "round \(round)")
            let store = try EarthquakeStore(path: path, mode: .readOnly)
            #expect(try store.count() == 0)
            try store.close()
        }
    }
}
