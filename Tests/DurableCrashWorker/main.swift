// A worker process for the crash test (Tests/BatonDurableTests/CrashTests.swift): it runs `crash.node`
// jobs from the store in --db until it is killed. Each attempt writes a start and an end line to the
// side log table `crash_log` (each in its own transaction), which the test's checker reads afterwards.
// Odd jobs complete in one transaction with an increment of their row in `crash_effects`. The
// `pages.*` jobs are a paged listing whose pages add their imports and the next page to the run. The
// workers fire the store's schedules; `schedule.beat` is the job of each tick of the schedule test.
//
//     durable-crash-worker --db PATH --id NAME [--lease-ms 2000] [--renew-ms 400]
import BatonDurable
import Foundation
import GRDB

struct NodeOutput: Codable, Sendable {
    var worker: String
    var attempt: Int
}

/// One node of the crash graph: logs its start, works for a few milliseconds, logs its end.
struct Node: DurableJob {
    static let kind = "crash.node"
    let log: DatabasePool
    let worker: String

    func run(_ workMicroseconds: Int, context: DurableJobContext) async throws -> NodeOutput {
        try await append("start", context)
        do {
            try await Task.sleep(for: .microseconds(workMicroseconds))  // the job's "work"
        } catch {
            try? await append("cancelled", context)
            throw error
        }
        try await append("end", context)
        let output = NodeOutput(worker: worker, attempt: context.attempt)
        guard context.job.rawValue % 2 == 1 else { return output }
        // Odd jobs: the application's effect commits with the completion, or not at all.
        let job = context.job.rawValue
        return try await context.complete(returning: output) { db in
            try db.execute(
                sql:
                    "INSERT INTO crash_effects (job, count) VALUES (?, 1) ON CONFLICT (job) DO UPDATE SET count = count + 1",
                arguments: [job])
        }
    }

    private func append(_ event: String, _ context: DurableJobContext) async throws {
        let worker = worker
        let at = Date().timeIntervalSince1970
        try await log.write { db in
            try db.execute(
                sql: "INSERT INTO crash_log (job, attempt, worker, event, at) VALUES (?, ?, ?, ?, ?)",
                arguments: [context.job.rawValue, context.attempt, worker, event, at])
        }
    }
}

/// A page of a paged listing (the FDSN event service's `offset`/`limit` style): lists its page for a
/// few milliseconds, then adds the import of that page and the next page, with its success.
struct ListPage: DurableJob {
    static let kind = "pages.list"
    struct Input: Codable, Sendable {
        var page: Int
        var pages: Int
    }

    func run(_ input: Input, context: DurableJobContext) async throws -> Int {
        try await Task.sleep(for: .milliseconds(Int.random(in: 5...40)))  // the listing's "work"
        var more = JobGraph(name: "page \(input.page)")
        more.add(ImportPage.self, input: input.page, name: "import \(input.page)")
        if input.page < input.pages {
            more.add(
                ListPage.self, input: Input(page: input.page + 1, pages: input.pages), name: "page \(input.page + 1)")
        }
        try context.add(more)
        return input.page
    }
}

/// The import of one page: counts it in `page_imports` in its completion's transaction.
struct ImportPage: DurableJob {
    static let kind = "pages.import"
    func run(_ page: Int, context: DurableJobContext) async throws -> Int {
        try await Task.sleep(for: .milliseconds(Int.random(in: 5...40)))
        return try await context.complete(returning: page) { db in
            try db.execute(
                sql:
                    "INSERT INTO page_imports (page, count) VALUES (?, 1) ON CONFLICT (page) DO UPDATE SET count = count + 1",
                arguments: [page])
        }
    }
}

/// Runs after the first page and everything it added (afterAll): records how many pages were imported.
struct PagesDone: DurableJob {
    static let kind = "pages.done"
    func run(_ input: Int, context: DurableJobContext) async throws -> Int {
        try await context.complete(returning: input) { db in
            let imported = try Int.fetchOne(db, sql: "SELECT count(*) FROM page_imports") ?? -1
            try db.execute(sql: "INSERT INTO pages_done (imported) VALUES (?)", arguments: [imported])
        }
    }
}

/// The job of each tick of the `beat` schedule: counts its run in `beats`, in its completion's transaction.
struct Beat: DurableJob {
    static let kind = "schedule.beat"
    func run(_ input: Int, context: DurableJobContext) async throws -> Int {
        try await Task.sleep(for: .milliseconds(Int.random(in: 1...30)))
        let run = context.run.rawValue
        return try await context.complete(returning: input) { db in
            try db.execute(
                sql: "INSERT INTO beats (run, count) VALUES (?, 1) ON CONFLICT (run) DO UPDATE SET count = count + 1",
                arguments: [run])
        }
    }
}

func argument(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

guard let path = argument("--db"), let id = argument("--id") else {
    FileHandle.standardError.write(
        Data("usage: durable-crash-worker --db PATH --id NAME [--lease-ms N] [--renew-ms N]\n".utf8))
    exit(2)
}
let lease = Int(argument("--lease-ms") ?? "") ?? 2000
let renew = Int(argument("--renew-ms") ?? "") ?? 400

var configuration = Configuration()
configuration.busyMode = .timeout(30)
let log = try DatabasePool(path: path, configuration: configuration)
let store = try SQLiteJobStore(path: path, busyTimeout: 30)
let worker = try DurableWorker(
    store: store, jobs: [Node(log: log, worker: id), ListPage(), ImportPage(), PagesDone(), Beat()],
    configuration: .init(
        id: id, maxConcurrentJobs: 8, leaseDuration: .milliseconds(lease), renewInterval: .milliseconds(renew),
        pollInterval: .milliseconds(100)))
FileHandle.standardOutput.write(Data("ready \(id)\n".utf8))
try await worker.run()
