// snippet: durable-example
import BatonDurable
import Foundation

struct Fetch: DurableJob {
    static let kind = "example.fetch"
    func run(_ url: URL, context: DurableJobContext) async throws -> Data {
        try Data(contentsOf: url)  // an attempt may run again: make effects idempotent
    }
}

struct CountLines: DurableJob {
    static let kind = "example.count"
    func run(_ data: Data, context: DurableJobContext) async throws -> Int {
        data.split(separator: UInt8(ascii: "\n")).count
    }
}
// end snippet

/// The README's and BatonDurable's example, run in a folder of its own (the snippet names a file in
/// the working directory).
func durableExample() async throws {
    // snippet: durable-example
    let store = try SQLiteJobStore(path: "jobs.sqlite")
    var graph = JobGraph(name: "count")
    let fetch = graph.add(Fetch.self, input: URL(fileURLWithPath: "/etc/hosts"), retry: .exponential(maxAttempts: 5))
    let count = graph.add(CountLines.self, inputFrom: fetch, categories: [.named("disk", limit: 1)])
    let run = try await store.submit(graph, uniqueKey: "count-hosts")  // submitted again: the same run
    let worker = try DurableWorker(store: store, jobs: [Fetch(), CountLines()])
    try await worker.run(until: run)  // or run() as a long-lived swift-service-lifecycle Service
    print(try await store.output(of: count, in: run) ?? 0)
    print(try await store.explain(run))  // per job: state, attempts, last error, what it waits for
    // end snippet
}

// The example of `PermanentFailure`'s documentation (a doc comment: compiled here, not checked by
// SnippetTests, which reads the articles).
struct ParseReport: DurableJob {
    static let kind = "reports.parse"
    func run(_ path: String, context: DurableJobContext) async throws -> Int {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))  // an I/O error is retried
        guard let text = String(data: data, encoding: .utf8) else {
            throw PermanentFailure("\(path) is not UTF-8 text; no retry will change that")
        }
        return text.split(separator: "\n").count
    }
}

// The example of `Snooze`'s documentation (a doc comment, as above).
struct SendDigest: DurableJob {
    static let kind = "mail.digest"
    func run(_ user: Int, context: DurableJobContext) async throws -> Bool {
        // Quiet hours: try again in an hour, without using up an attempt.
        if Calendar.current.component(.hour, from: Date()) < 7 { throw Snooze(for: .seconds(3_600)) }
        return true
    }
}
