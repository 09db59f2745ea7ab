import BatonDurable
import Foundation

// snippet: growing-pages
/// One page of a paged listing: it lists its page, then adds the page's import and the next page.
struct ListEvents: DurableJob {
    static let kind = "quakes.list"
    struct Page: Codable, Sendable {
        var offset: Int
        var total: Int
    }

    func run(_ page: Page, context: DurableJobContext) async throws -> Int {
        let size = 100
        let events = Array(page.offset..<min(page.offset + size, page.total))  // the listing's "work"
        var more = JobGraph(name: "after offset \(page.offset)")
        more.add(ImportEvents.self, input: events, name: "import")
        if page.offset + size < page.total {
            more.add(ListEvents.self, input: Page(offset: page.offset + size, total: page.total), name: "list")
        }
        try context.add(more)  // stored with this attempt's success, once
        return events.count
    }
}

struct ImportEvents: DurableJob {
    static let kind = "quakes.import-page"
    func run(_ events: [Int], context: DurableJobContext) async throws -> Int { events.count }
}

struct Report: DurableJob {
    static let kind = "quakes.report"
    func run(_ input: String, context: DurableJobContext) async throws -> String { "all pages imported" }
}

func importAllPages(store: some JobStore) async throws -> DurableRun {
    var graph = JobGraph(name: "import all pages")
    let first = graph.add(ListEvents.self, input: ListEvents.Page(offset: 0, total: 450), name: "list")
    // Waits for the first page and everything it adds, and everything those add.
    graph.add(Report.self, input: "done", name: "report", afterAll: [first])
    let run = try await store.submit(graph)
    let worker = try DurableWorker(store: store, jobs: [ListEvents(), ImportEvents(), Report()])
    try await worker.run(until: run)
    return run
}
// end snippet

// snippet: operating-runs
func repairFailedRuns(store: some JobStore) async throws {
    var filter = RunFilter(state: .failed, limit: 100)
    repeat {
        let page = try await store.runs(filter)
        for run in page.runs {
            print("\(run.id) \(run.name): \(run.failed) of \(run.jobs) jobs failed")
            try await store.retry(run: run.id)  // failed jobs and the ones they cancelled, in place
        }
        filter.before = page.next
    } while filter.before != nil
}

func whyDidItFail(_ job: DurableJobID, store: some JobStore) async throws {
    for attempt in try await store.attempts(of: job) {
        print("attempt \(attempt.attempt) on \(attempt.worker ?? "?"): \(attempt.outcome) \(attempt.error ?? "")")
    }
}

func failedJobs(of run: DurableRunID, store: some JobStore) async throws -> [JobSummary] {
    var filter = JobFilter(run: run, state: .failed, limit: 1_000)
    var failed: [JobSummary] = []
    repeat {
        let page = try await store.jobs(filter)  // in the order they were added, from the run's index
        failed += page.jobs
        filter.after = page.next
    } while filter.after != nil
    return failed
}
// end snippet
