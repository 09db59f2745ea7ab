import BatonDurable
import Foundation
import GRDB
import Testing

/// Reads the store and the side log after a crash run and asserts the delivery guarantees.
struct CrashChecker {
    let store: SQLiteJobStore
    let log: DatabaseQueue
    let run: DurableRunID
    let kills: [(worker: String, at: Double)]

    struct Event {
        var job: Int64
        var attempt: Int
        var worker: String
        var event: String
        var at: Double
    }

    func check() async throws {
        let snapshot = try await store.snapshot(of: run)
        let events = try await log.read { db in
            try Row.fetchAll(
                db, sql: "SELECT job, attempt, worker, event, at FROM crash_log WHERE job IS NOT NULL ORDER BY id"
            ).map { row in
                Event(
                    job: row["job"], attempt: row["attempt"], worker: row["worker"], event: row["event"], at: row["at"])
            }
        }
        let (running, holders) = try await log.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM baton_jobs WHERE state = 'running'") ?? -1,
                try Int.fetchOne(db, sql: "SELECT count(*) FROM baton_holders") ?? -1
            )
        }

        // Every job succeeded, the run is finished, nothing is left claimed.
        let notSucceeded = snapshot.jobs.filter { $0.state != .succeeded }
        #expect(
            notSucceeded.isEmpty,
            "jobs not succeeded: \(notSucceeded.prefix(5).map { "\($0.name) \($0.state) \($0.lastError ?? "")" })")
        #expect(snapshot.run.finished != nil)
        #expect(running == 0 && holders == 0, "left claimed: \(running) running jobs, \(holders) category holders")

        // Exactly one accepted completion per job: the stored output names the attempt that produced it,
        // and that attempt ran to its end.
        struct Output: Decodable {
            var worker: String
            var attempt: Int
        }
        let ended = Set(events.filter { $0.event == "end" }.map { "\($0.job)/\($0.attempt)/\($0.worker)" })
        var unmatched: [String] = []
        for job in snapshot.jobs {
            guard let data = job.output, let output = try? JSONDecoder().decode(Output.self, from: data) else {
                unmatched.append("\(job.name): no output")
                continue
            }
            if !ended.contains("\(job.id.rawValue)/\(output.attempt)/\(output.worker)") {
                unmatched.append(
                    "\(job.name): output of attempt \(output.attempt) by \(output.worker), which did not end")
            }
        }
        #expect(unmatched.isEmpty, "completions without their attempt: \(unmatched.prefix(5))")

        // No attempt started before all its dependencies' completions.
        let byID = Dictionary(uniqueKeysWithValues: snapshot.jobs.map { ($0.id.rawValue, $0) })
        var early: [String] = []
        for start in events where start.event == "start" {
            guard let job = byID[start.job] else { continue }
            for dependency in job.dependencies {
                guard let finished = byID[dependency.job.rawValue]?.finished?.timeIntervalSince1970 else { continue }
                if finished > start.at {
                    early.append(
                        "\(job.name) attempt \(start.attempt) started before \(byID[dependency.job.rawValue]!.name) finished"
                    )
                }
            }
        }
        #expect(early.isEmpty, "attempts before their dependencies: \(early.prefix(5))")

        // No category held beyond its limit: each attempt holds from its start to its end (or cancel),
        // or to the kill of its process.
        let killedAt = Dictionary(kills.map { ($0.worker, $0.at) }, uniquingKeysWith: min)
        var ends: [String: Double] = [:]
        for event in events where event.event != "start" {
            ends["\(event.job)/\(event.attempt)/\(event.worker)"] = event.at
        }
        var overLimit: [String] = []
        for category in CrashTests.categories {
            var changes: [(at: Double, delta: Int)] = []
            for start in events where start.event == "start" {
                guard let job = byID[start.job], job.categories.contains(where: { $0.name == category.name }) else {
                    continue
                }
                let end = ends["\(start.job)/\(start.attempt)/\(start.worker)"] ?? killedAt[start.worker] ?? .infinity
                changes.append((start.at, 1))
                changes.append((end, -1))
            }
            // Releases before acquisitions at the same instant.
            changes.sort { $0.at != $1.at ? $0.at < $1.at : $0.delta < $1.delta }
            var held = 0
            var most = 0
            for change in changes {
                held += change.delta
                most = max(most, held)
            }
            if most > category.limit { overLimit.append("\(category.name): \(most) > \(category.limit)") }
        }
        #expect(overLimit.isEmpty, "categories over their limits: \(overLimit)")

        // Exactly-once effects: each odd job counted itself once, in its completion's transaction,
        // whatever the kills did to its attempts.
        let counts = try await log.read { db in
            try Row.fetchAll(db, sql: "SELECT job, count FROM crash_effects").map {
                ($0["job"] as Int64, $0["count"] as Int)
            }
        }
        let odd = snapshot.jobs.filter { $0.id.rawValue % 2 == 1 }.map(\.id.rawValue)
        #expect(Set(counts.map(\.0)) == Set(odd), "jobs that counted their effect: \(counts.count) of \(odd.count)")
        let twice = counts.filter { $0.1 != 1 }
        #expect(twice.isEmpty, "effects counted more than once: \(twice.prefix(5))")
        let retried = snapshot.jobs.filter { $0.attempts > 1 }.count
        #expect(retried > 0, "no job needed a second attempt: the kills hit nothing")
        print(
            "crash test: \(snapshot.jobs.count) jobs, \(kills.count) kills, \(events.filter { $0.event == "start" }.count) attempts, \(retried) jobs attempted more than once, \(counts.count) effects committed with their completions"
        )
    }
}
