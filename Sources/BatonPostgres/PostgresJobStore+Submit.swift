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
        let channel = channel
        var remaining: [Int32] = []
        var inputs: [ByteBuffer] = []
        var hasInput: [Bool] = []
        var inputFrom: [Int32] = []
        var timeouts: [Double] = []
        var notBefore: [Double] = []
        var edgeFrom: [Int32] = []
        var edgeTo: [Int32] = []
        var edgeRegardless: [Bool] = []
        var categoryJob: [Int32] = []
        var categoryName: [String] = []
        var categoryLimit: [Int32] = []
        for (index, job) in jobs.enumerated() {
            let dependencies = job.allDependencies
            remaining.append(Int32(Set(dependencies.map(\.index)).count))
            inputs.append(ByteBuffer(bytes: job.input ?? Data()))
            hasInput.append(job.input != nil)
            inputFrom.append(job.inputFrom.map { Int32($0) } ?? -1)
            timeouts.append(job.timeout?.storeSeconds ?? -1)
            notBefore.append(job.notBefore?.storeTime ?? 0)
            var seen = Set<Int>()
            for dependency in dependencies where seen.insert(dependency.index).inserted {
                edgeFrom.append(Int32(dependency.index))
                edgeTo.append(Int32(index))
                edgeRegardless.append(dependency.runRegardless)
            }
            var seenCategories = Set<String>()
            for category in job.categories where seenCategories.insert(category.name).inserted {
                categoryJob.append(Int32(index))
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
        // One statement (one round trip): the run, its jobs (identities drawn in job order, so that
        // older means submitted first), their edges and categories by job index, and the wake-up.
        // With a unique key that an earlier run has, the run's insert does nothing, so nothing else
        // is inserted either, and the existing run is looked up.
        let rows = try await statement(
            "submit",
            """
            WITH new_run AS (
                INSERT INTO runs (name, unique_key, created, unfinished, finished, trace_context)
                VALUES (\(graph.name), \(uniqueKey), \(now), \(jobs.count), \(jobs.isEmpty ? now : nil), \(carrier))
                ON CONFLICT (unique_key) DO NOTHING RETURNING id
            ), ids AS MATERIALIZED (
                SELECT g.idx, nextval(pg_get_serial_sequence('jobs', 'id')) AS id
                FROM new_run, generate_series(0, \(jobs.count) - 1) AS g(idx) ORDER BY g.idx
            ), t AS (
                SELECT * FROM unnest(\(indexes), \(names), \(kinds), \(inputs), \(hasInput), \(inputFrom),
                    \(remaining), \(maxAttempts), \(retries), \(priorities), \(timeouts), \(hasCategories),
                    \(notBefore))
                AS t(idx, name, kind, input, has_input, input_from, remaining, max_attempts, retry, priority,
                    timeout, has_categories, not_before)
            ), inserted AS (
                INSERT INTO jobs (id, run, idx, name, kind, state, input, input_from, remaining, max_attempts, retry,
                    priority, timeout, has_categories, not_before)
                SELECT i.id, new_run.id, t.idx, t.name, t.kind,
                    CASE WHEN t.remaining = 0 THEN 'ready' ELSE 'pending' END,
                    CASE WHEN t.has_input THEN t.input END, source.id, t.remaining, t.max_attempts,
                    t.retry, t.priority, NULLIF(t.timeout, -1), t.has_categories, t.not_before
                FROM new_run, t JOIN ids i ON i.idx = t.idx LEFT JOIN ids source ON source.idx = t.input_from
                RETURNING id
            ), new_edges AS (
                INSERT INTO edges (dependency, job, run_regardless)
                SELECT a.id, b.id, e.regardless
                FROM unnest(\(edgeFrom), \(edgeTo), \(edgeRegardless)) AS e(dependency, job, regardless)
                    JOIN ids a ON a.idx = e.dependency JOIN ids b ON b.idx = e.job
            ), new_categories AS (
                INSERT INTO job_categories (job, category, max_holders)
                SELECT i.id, c.category, c.max_holders
                FROM unnest(\(categoryJob), \(categoryName), \(categoryLimit)) AS c(job, category, max_holders)
                    JOIN ids i ON i.idx = c.job
            ), woken AS (
                SELECT pg_notify(\(channel), '') FROM new_run WHERE \(jobs.count) > 0
            )
            SELECT new_run.id, (SELECT count(*) FROM woken) + (SELECT count(*) FROM inserted) AS done,
                (SELECT array_agg(id ORDER BY idx) FROM ids) AS jobs
            FROM new_run
            """)
        if let row = rows.first {
            let (run, _, ids) = try row.decode((Int64, Int64, [Int64]?).self)
            return SubmittedRun(
                run: DurableRunID(run), jobs: (ids ?? []).map { DurableJobID($0) }, existing: false)
        }
        guard let uniqueKey else {
            throw DurableError(code: .storeFailure, message: "PostgreSQL inserted no run for graph '\(graph.name)'")
        }
        return try await transaction("submit") { connection in
            let existing = try await connection.query(
                "SELECT id FROM runs WHERE unique_key = \(uniqueKey)", logger: logger
            ).collect()
            guard let first = existing.first else {
                throw DurableError(
                    code: .storeFailure,
                    message:
                        "the run with unique key '\(uniqueKey)' was deleted while graph '\(graph.name)' was submitted; submit again"
                )
            }
            let run = try first.decode(Int64.self)
            let ids = try await connection.query(
                "SELECT id FROM jobs WHERE run = \(run) ORDER BY idx", logger: logger
            ).collect().map { try $0.decode(Int64.self) }
            return SubmittedRun(run: DurableRunID(run), jobs: ids.map { DurableJobID($0) }, existing: true)
        }
    }
}
