// snippet: transactions-submit
import BatonDurable
import GRDB

struct ShipOrder: DurableJob {
    static let kind = "shop.ship"
    func run(_ order: Int, context: DurableJobContext) async throws -> String { "shipped \(order)" }
}

/// The order and the run that ships it are stored together, or not at all.
func placeOrder(_ order: Int, database: DatabasePool, store: SQLiteJobStore) async throws -> DurableRun {
    try await database.write { db in
        try db.execute(sql: "INSERT INTO orders (id) VALUES (?)", arguments: [order])
        var graph = JobGraph(name: "ship order \(order)")
        _ = graph.add(ShipOrder.self, input: order)
        return try store.submit(graph, uniqueKey: "ship-\(order)", in: db)
    }
}
// end snippet

// snippet: transactions-complete
struct CountVisit: DurableJob {
    static let kind = "shop.count-visit"
    func run(_ page: String, context: DurableJobContext) async throws -> Int {
        let views = page.count  // the work: outside the transaction
        return try await context.complete(returning: views) { db in
            try db.execute(sql: "UPDATE pages SET views = views + ? WHERE name = ?", arguments: [views, page])
        }
    }
}
// end snippet

// snippet: transactions-complete-output
struct ImportCustomers: DurableJob {
    static let kind = "shop.import-customers"
    func run(_ names: [String], context: DurableJobContext) async throws -> Int {
        let cleaned = Set(names.map { $0.trimmingCharacters(in: .whitespaces) })  // outside the transaction
        return try await context.complete { db in
            var added = 0
            for name in cleaned.sorted() {
                try db.execute(sql: "INSERT OR IGNORE INTO customers (name) VALUES (?)", arguments: [name])
                added += db.changesCount
            }
            return added  // the output: what the writes did
        }
    }
}
// end snippet
