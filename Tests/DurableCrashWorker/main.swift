// A worker process for the crash test (Tests/BatonDurableTests/CrashTests.swift): it runs `crash.node`
// jobs from the store in --db until it is killed. Each attempt writes a start and an end line to the
// side log table `crash_log` (each in its own transaction), which the test's checker reads afterwards.
// Odd jobs complete in one transaction with an increment of their row in `crash_effects`.
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
    store: store, jobs: [Node(log: log, worker: id)],
    configuration: .init(
        id: id, maxConcurrentJobs: 8, leaseDuration: .milliseconds(lease), renewInterval: .milliseconds(renew),
        pollInterval: .milliseconds(100)))
FileHandle.standardOutput.write(Data("ready \(id)\n".utf8))
try await worker.run()
