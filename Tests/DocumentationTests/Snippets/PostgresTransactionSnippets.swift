// snippet: postgres-transactions
import BatonDurable
import BatonPostgres
import Logging
import PostgresNIO

func placeOrder(_ order: Int, connection: PostgresConnection, store: PostgresJobStore, logger: Logger) async throws {
    try await connection.query("BEGIN", logger: logger)
    do {
        try await connection.query("INSERT INTO orders (id) VALUES (\(order))", logger: logger)
        var graph = JobGraph(name: "ship order \(order)")
        _ = graph.add(ShipOrder.self, input: order)
        _ = try await store.submit(graph, uniqueKey: "ship-\(order)", on: connection)
        try await connection.query("COMMIT", logger: logger)  // workers are woken now, not before
    } catch {
        _ = try? await connection.query("ROLLBACK", logger: logger)
        throw error
    }
}

struct CountVisitInPostgres: DurableJob {
    static let kind = "shop.count-visit-pg"
    func run(_ page: String, context: DurableJobContext) async throws -> Int {
        let views = page.count  // the work: outside the transaction
        return try await context.complete(returning: views) { (connection: PostgresConnection) in
            try await connection.query(
                "UPDATE pages SET views = views + \(views) WHERE name = \(page)", logger: context.logger)
        }
    }
}
// end snippet
