import BatonDurable
import BatonPostgres
import Logging

/// Opens a store for the harness's coordinator and benchmarks, which hold several stores with lifetimes
/// of their own: run in a task of its own until its `close()`. A program scopes a store with
/// `withPostgresJobStore` (the chaos worker processes do) or runs it in a `ServiceGroup`.
func openStore(url: String, schema: String, logger: Logger) async throws -> PostgresJobStore {
    let store = try PostgresJobStore(url: url, schema: schema, logger: logger)
    let running = Task { try await store.run() }
    // The first call waits for the store to open, and throws what made it fail.
    do {
        _ = try await store.nextDueDate(kinds: ["-"])
    } catch {
        store.close()
        _ = await running.result
        throw error
    }
    return store
}
