public import BatonDurable
import Foundation
import NIOCore
import PostgresNIO

extension PostgresJobStore {
    public func submit(_ graph: GraphSpec, uniqueKey: String?) async throws -> SubmittedRun {
        try graph.validate()
        let now = clock.now().storeTime
        let encoder = JSONEncoder()
        let jobs = graph.jobs
        let retries = try jobs.map { String(decoding: try encoder.encode($0.retry), as: UTF8.self) }
        let carrier = TraceCarrierCoding.encode(graph.carrierToStore())
        let logger = logger
        let notify = notifySQL()
        return try await transaction("submit") { connection in
            // One run per unique key: the insert either creates it or finds the existing one.
            let runID: Int64
            if let uniqueKey {
                let inserted = try await connection.query(
                    """
                    INSERT INTO runs (name, unique_key, created, unfinished, trace_context)
                    VALUES (\(graph.name), \(uniqueKey), \(now), \(jobs.count), \(carrier))
                    ON CONFLICT (unique_key) DO NOTHING RETURNING id
                    """, logger: logger
                ).collect()
                if let row = inserted.first {
                    runID = try row.decode(Int64.self)
                } else {
                    let existing = try await connection.query(
                        "SELECT id FROM runs WHERE unique_key = \(uniqueKey)", logger: logger
                    ).collect()
                    let run = try existing[0].decode(Int64.self)
                    let ids = try await connection.query(
                        "SELECT id FROM jobs WHERE run = \(run) ORDER BY idx", logger: logger
                    ).collect().map { try $0.decode(Int64.self) }
                    return SubmittedRun(run: DurableRunID(run), jobs: ids.map { DurableJobID($0) }, existing: true)
                }
            } else {
                runID = try await connection.query(
                    """
                    INSERT INTO runs (name, created, unfinished, trace_context)
                    VALUES (\(graph.name), \(now), \(jobs.count), \(carrier)) RETURNING id
                    """, logger: logger
                ).collect()[0].decode(Int64.self)
            }
            guard !jobs.isEmpty else {
                try await connection.query("UPDATE runs SET finished = \(now) WHERE id = \(runID)", logger: logger)
                return SubmittedRun(run: DurableRunID(runID), jobs: [], existing: false)
            }
            // Identities first, so jobs, edges and categories go in as three array statements.
            let ids = try await connection.query(
                "SELECT nextval(pg_get_serial_sequence('jobs', 'id')) FROM generate_series(1, \(jobs.count))",
                logger: logger
            ).collect().map { try $0.decode(Int64.self) }
            var remaining: [Int32] = []
            var inputs: [ByteBuffer] = []
            var hasInput: [Bool] = []
            var inputFrom: [Int64] = []
            var timeouts: [Double] = []
            var notBefore: [Double] = []
            var edgeFrom: [Int64] = []
            var edgeTo: [Int64] = []
            var edgeRegardless: [Bool] = []
            var categoryJob: [Int64] = []
            var categoryName: [String] = []
            var categoryLimit: [Int32] = []
            for (index, job) in jobs.enumerated() {
                let dependencies = job.allDependencies
                remaining.append(Int32(Set(dependencies.map(\.index)).count))
                inputs.append(ByteBuffer(bytes: job.input ?? Data()))
                hasInput.append(job.input != nil)
                inputFrom.append(job.inputFrom.map { ids[$0] } ?? 0)
                timeouts.append(job.timeout?.storeSeconds ?? -1)
                notBefore.append(job.notBefore?.storeTime ?? 0)
                var seen = Set<Int>()
                for dependency in dependencies where seen.insert(dependency.index).inserted {
                    edgeFrom.append(ids[dependency.index])
                    edgeTo.append(ids[index])
                    edgeRegardless.append(dependency.runRegardless)
                }
                var seenCategories = Set<String>()
                for category in job.categories where seenCategories.insert(category.name).inserted {
                    categoryJob.append(ids[index])
                    categoryName.append(category.name)
                    categoryLimit.append(Int32(category.limit))
                }
            }
            let names = jobs.map(\.name)
            let kinds = jobs.map(\.kind)
            let indexes = (0..<jobs.count).map { Int32($0) }
            let priorities = jobs.map { Int32($0.priority) }
            let maxAttempts = jobs.map { Int32($0.retry.maxAttempts) }
            let hasCategories = jobs.map { !$0.categories.isEmpty }
            try await connection.query(
                """
                INSERT INTO jobs (id, run, idx, name, kind, state, input, input_from, remaining, max_attempts, retry,
                    priority, timeout, has_categories, not_before)
                SELECT t.id, \(runID), t.idx, t.name, t.kind, CASE WHEN t.remaining = 0 THEN 'ready' ELSE 'pending' END,
                    CASE WHEN t.has_input THEN t.input END, NULLIF(t.input_from, 0), t.remaining, t.max_attempts,
                    t.retry, t.priority, NULLIF(t.timeout, -1), t.has_categories, t.not_before
                FROM unnest(\(ids), \(indexes), \(names), \(kinds), \(inputs), \(hasInput), \(inputFrom), \(remaining),
                    \(maxAttempts), \(retries), \(priorities), \(timeouts), \(hasCategories), \(notBefore))
                    AS t(id, idx, name, kind, input, has_input, input_from, remaining, max_attempts, retry, priority,
                        timeout, has_categories, not_before)
                """, logger: logger)
            if !edgeFrom.isEmpty {
                try await connection.query(
                    """
                    INSERT INTO edges (dependency, job, run_regardless)
                    SELECT * FROM unnest(\(edgeFrom), \(edgeTo), \(edgeRegardless))
                    """, logger: logger)
            }
            if !categoryJob.isEmpty {
                try await connection.query(
                    """
                    INSERT INTO job_categories (job, category, max_holders)
                    SELECT * FROM unnest(\(categoryJob), \(categoryName), \(categoryLimit))
                    """, logger: logger)
            }
            try await connection.query(PostgresQuery(unsafeSQL: "SELECT \(notify)"), logger: logger)
            return SubmittedRun(run: DurableRunID(runID), jobs: ids.map { DurableJobID($0) }, existing: false)
        }
    }
}
