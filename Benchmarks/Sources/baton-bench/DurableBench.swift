import ArgumentParser
import BatonDurable
import Dispatch
import Foundation

/// `baton-bench durable`: the SQLite job store and its workers against huey (Python, SqliteHuey) in the
/// same run, on the same disk. Prints one JSON line per measurement, then the ratios.
///
/// - burndown: N no-op durable jobs submitted first (one graph), then W workers in this process drain
///   them; rate = N / drain time.
/// - chain: N jobs, each depending on the one before; one worker.
/// - latency: one idle worker; a one-job graph submitted at a time; submit (before the transaction) →
///   job body start, p50/p99.
/// - idle-look: N ready jobs of another kind; the time of one look for work (a claim that finds nothing,
///   then the next due time) by a worker of a kind with none, p50/p90.
/// - claim-behind-waiting: N jobs of the worker's own kind waiting for their time (an hour away), then
///   5,000 ready ones; the time of a claim of 100, p50/p90.
struct DurableBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "durable",
        abstract: "Durable graphs on SQLite: burn-down, chain and submit→start latency, beside huey (SqliteHuey)."
    )

    @Flag(help: "Small sizes (5k burn-down, 1k chain, 50 latency samples): well under a minute.")
    var quick = false

    @Option(
        help:
            "Comma-separated workloads to run: burndown, chain, latency, idle-look, claim-behind-waiting (default: all five)."
    )
    var workloads = "burndown,chain,latency,idle-look,claim-behind-waiting"

    @Option(help: "Comma-separated worker counts for the burn-down (default: 1,2,4).")
    var workers = "1,2,4"

    @Option(help: "Python with huey installed (default: Benchmarks/peers/huey-setup.sh makes one; 'none' skips huey).")
    var huey: String?

    func run() throws {
        let burn = quick ? 5_000 : 100_000
        let chain = quick ? 1_000 : 10_000
        let samples = quick ? 50 : 500
        let selected = Set(workloads.split(separator: ",").map { String($0) })
        let counts = workers.split(separator: ",").compactMap { Int($0) }
        var lines: [[String: Any]] = []
        let semaphore = DispatchSemaphore(value: 0)
        let box = ResultBox()
        Task {
            do {
                var measured: [[String: Any]] = []
                if selected.contains("burndown") {
                    for workers in counts {
                        measured.append(try await DurableWorkloads.burndown(n: burn, workers: workers))
                    }
                }
                if selected.contains("chain") { measured.append(try await DurableWorkloads.chain(n: chain)) }
                if selected.contains("latency") {
                    measured.append(try await DurableWorkloads.latency(samples: samples))
                }
                if selected.contains("idle-look") {
                    measured.append(try await DurableWorkloads.idleLook(backlog: burn))
                }
                if selected.contains("claim-behind-waiting") {
                    measured.append(try await DurableWorkloads.claimBehindWaiting(backlog: burn))
                }
                box.set(.success(measured.map(SendableLine.init)))
            } catch {
                box.set(.failure(error))
            }
            semaphore.signal()
        }
        semaphore.wait()
        lines = try box.get().map(\.fields)
        for line in lines { printLine(line) }

        var peerLines: [[String: Any]] = []
        if huey != "none" {
            peerLines = runHuey(burn: burn, chain: chain, samples: samples)
            for line in peerLines { printLine(line) }
        }
        printRatios(lines, peerLines)
    }

    private func runHuey(burn: Int, chain: Int, samples: Int) -> [[String: Any]] {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let peers = here.appendingPathComponent("../../peers").standardizedFileURL
        var python = huey
        if python == nil {
            let setup = Process()
            setup.executableURL = URL(fileURLWithPath: "/bin/bash")
            setup.arguments = [peers.appendingPathComponent("huey-setup.sh").path]
            let pipe = Pipe()
            setup.standardOutput = pipe
            do {
                try setup.run()
                setup.waitUntilExit()
            } catch {
                progress("huey: setup failed to start: \(error)")
                return []
            }
            let venv = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            guard setup.terminationStatus == 0, !venv.isEmpty else {
                progress("huey: setup failed (no PyPI?); huey skipped")
                return []
            }
            python = venv + "/bin/python"
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python!)
        process.arguments = [
            peers.appendingPathComponent("huey_bench.py").path, "--burn", "\(burn)", "--chain", "\(chain)",
            "--samples", "\(samples)",
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        do {
            try process.run()
        } catch {
            progress("huey: \(error)")
            return []
        }
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: output, as: UTF8.self).split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    private func printLine(_ fields: [String: Any]) {
        if let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) {
            print(String(decoding: data, as: UTF8.self))
        }
    }

    private func printRatios(_ baton: [[String: Any]], _ peer: [[String: Any]]) {
        print("")
        print(
            "durable on SQLite (Baton vs huey SqliteHuey, same run; ratio = Baton rate / huey rate, above 1: Baton faster)"
        )
        for line in baton {
            let workload = line["workload"] as? String ?? ""
            let workers = line["workers"] as? Int
            let match = peer.first { ($0["workload"] as? String) == workload && ($0["workers"] as? Int) == workers }
            var text = "  \(workload)" + (workers.map { " ×\($0)" } ?? "")
            if let rate = line["jobs_per_s"] as? Double {
                text += String(format: ": Baton %.0f jobs/s", rate)
                if let other = match?["jobs_per_s"] as? Double {
                    text += String(format: ", huey %.0f jobs/s, ratio %.2f", other, rate / other)
                }
            }
            if let p50 = line["p50_ms"] as? Double, let p90 = line["p90_ms"] as? Double, let n = line["n"] as? Int {
                let behind =
                    workload == "claim-behind-waiting"
                    ? "of 100 behind %d jobs of its own kind waiting for their time"
                    : "behind %d ready jobs of another kind"
                text += String(format: " \(behind): Baton p50 %.3f ms, p90 %.3f ms", n, p50, p90)
            }
            if let p50 = line["p50_ms"] as? Double, let p99 = line["p99_ms"] as? Double {
                text += String(format: ": Baton p50 %.2f ms, p99 %.2f ms", p50, p99)
                if let other = match?["p50_ms"] as? Double, let otherP99 = match?["p99_ms"] as? Double {
                    text += String(
                        format: "; huey p50 %.2f ms, p99 %.2f ms; p50 ratio (huey/Baton) %.1f", other, otherP99,
                        other / p50)
                }
            }
            print(text)
        }
        let burndowns = baton.compactMap { $0["workload"] as? String == "burndown" ? $0["jobs_per_s"] as? Double : nil }
        if let worst = burndowns.min() {
            // The target holds for every worker count measured, so the slowest one decides.
            print(
                String(
                    format: "  target ≥ 20,000 jobs/s burn-down (every worker count): %@ (slowest %.0f)",
                    worst >= 20_000 ? "met" : "MISSED", worst))
        }
        if let p50 = baton.first(where: { $0["workload"] as? String == "latency" })?["p50_ms"] as? Double {
            print(String(format: "  target p50 submit→start < 2 ms: %@ (%.2f ms)", p50 < 2 ? "met" : "MISSED", p50))
        }
    }
}

/// A JSON line carried across the task boundary (its values are plain numbers and strings).
struct SendableLine: @unchecked Sendable {
    // @unchecked Sendable: the dictionary holds only numbers and strings, never mutated after creation.
    let fields: [String: Any]
    init(_ fields: [String: Any]) { self.fields = fields }
}

final class ResultBox: @unchecked Sendable {
    // @unchecked Sendable: written once before the semaphore is signalled, read after it.
    private var result: Result<[SendableLine], any Error>?
    func set(_ value: Result<[SendableLine], any Error>) { result = value }
    func get() throws -> [SendableLine] { try result!.get() }
}
