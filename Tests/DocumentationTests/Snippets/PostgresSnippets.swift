// snippet: postgres-example
import BatonDurable
import BatonPostgres

func work(graph: JobGraph, jobs: [any DurableJob]) async throws {
    try await withPostgresJobStore(url: "postgres://app@db.internal/app") { store in
        _ = try await store.submit(graph, uniqueKey: "nightly-2026-11-27")  // from any machine
        try await DurableWorker(store: store, jobs: jobs).run()  // on every worker machine
    }
}
// end snippet
