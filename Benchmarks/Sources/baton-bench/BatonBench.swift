import ArgumentParser
import Foundation

/// `baton-bench`: Baton against Foundation's OperationQueue, raw GCD and task groups. See README.md.
@main
struct BatonBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "baton-bench",
        abstract: "Benchmarks Baton against Foundation OperationQueue, raw GCD and withTaskGroup.",
        subcommands: [RunBenchmarks.self, MemoryProbeCommand.self, DurableBenchCommand.self],
        defaultSubcommand: RunBenchmarks.self
    )
}

struct RunBenchmarks: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Runs the workloads and prints a table of medians, JSON lines and the targets."
    )

    static let allWorkloads = [
        "independent", "serial", "chain", "chain-serial", "chain-cross", "fan-in", "dag", "cancel-all", "async",
        "decorated", "group",
        "metrics-off", "metrics-on", "timeline", "lines-dead", "lines-dead-none", "lines-wide", "lines-wide-none",
    ]

    @Flag(help: "Small sizes (1k, 10k), 3 runs, Foundation graphs up to 2k, memory at 10k: well under a minute.")
    var quick = false

    @Option(help: "Comma-separated job counts, e.g. 10k,100k,1M. Default 10k,100k,1M (quick: 1k,10k).")
    var sizes: String?

    @Option(help: "Timed runs per peer (default 5; quick: 3).")
    var runs: Int?

    @Option(help: "Comma-separated workloads to run (default all): \(allWorkloads.joined(separator: ", ")).")
    var workloads: String?

    @Option(help: "Comma-separated peers to run (default all): baton, foundation, gcd, taskgroup.")
    var peers: String?

    @Option(
        help:
            "Comma-separated pending-job counts for the memory probes (default 100k,1M; quick: 10k). 'none' skips them."
    )
    var memorySizes: String?

    @Option(
        help:
            "Comma-separated job counts for the back-pressure probe: one producer through addWhenRoom under a bound of 10,000 (default 1M,10M; quick: 100k,1M). 'none' skips it."
    )
    var boundedSizes: String?

    @Option(
        help: "Largest Foundation chain or DAG (default 20k; quick: 2k). Longer ones take minutes or crash on release.")
    var foundationGraphLimit: Int?

    @Option(help: "Largest Foundation fan-in (default 100k; quick: 10k).")
    var foundationFanInLimit: Int?

    @Option(
        help:
            "Seconds one peer may spend on one workload and size before its remaining runs are skipped (default 60; quick: 10)."
    )
    var peerBudget: Double?

    @Option(
        help:
            "Seconds after which a single run counts as hung: it is reported with stacks and abandoned, and the program exits 3 at the end (default 300; quick: 30; warm-ups: 15)."
    )
    var timeout: Double?

    func validate() throws {
        if let runs, runs < 1 { throw ValidationError("--runs must be at least 1") }
        for name in try parseList(workloads) ?? [] where !Self.allWorkloads.contains(name) {
            throw ValidationError("unknown workload '\(name)'; known: \(Self.allWorkloads.joined(separator: ", "))")
        }
        for name in try parseList(peers) ?? [] where Peer(rawValue: name) == nil {
            throw ValidationError("unknown peer '\(name)'; known: baton, foundation, gcd, taskgroup")
        }
        _ = try parseSizes(sizes)
        if memorySizes != "none" { _ = try parseSizes(memorySizes) }
        if boundedSizes != "none" { _ = try parseSizes(boundedSizes) }
    }

    func run() throws {
        let sizes = try parseSizes(sizes) ?? (quick ? [1_000, 10_000] : [10_000, 100_000, 1_000_000])
        let runs = runs ?? (quick ? 3 : 5)
        let memorySizes =
            memorySizes == "none" ? [] : try parseSizes(memorySizes) ?? (quick ? [10_000] : [100_000, 1_000_000])
        let boundedSizes =
            boundedSizes == "none"
            ? [] : try parseSizes(boundedSizes) ?? (quick ? [100_000, 1_000_000] : [1_000_000, 10_000_000])
        var limits = Limits()
        limits.foundationGraph = foundationGraphLimit ?? (quick ? 2_000 : 20_000)
        limits.foundationFanIn = foundationFanInLimit ?? (quick ? 10_000 : 100_000)
        limits.peerBudget = .milliseconds(Int((peerBudget ?? (quick ? 10 : 60)) * 1000))
        let watchdog = Watchdog(timeout: .milliseconds(Int((timeout ?? (quick ? 30 : 300)) * 1000)))
        let selected = try parseList(workloads) ?? Self.allWorkloads

        let all: [Workload] = [
            IndependentWorkloads.independent, IndependentWorkloads.serial,
            ChainWorkloads.chain, ChainWorkloads.chainSerial, ChainWorkloads.chainCross,
            GraphWorkloads.fanIn, GraphWorkloads.dag,
            CancelWorkload.cancelAll, AsyncWorkload.async, DecoratedWorkload.decorated, GroupWorkload.group,
            InstrumentWorkloads.metricsOff, InstrumentWorkloads.metricsOn, InstrumentWorkloads.timeline,
            ClaimLineWorkloads.dead, ClaimLineWorkloads.deadNone, ClaimLineWorkloads.wide, ClaimLineWorkloads.wideNone,
        ]
        let peers = try parseList(peers)?.compactMap(Peer.init(rawValue:)) ?? Peer.allCases
        var harness = Harness(sizes: sizes, runs: runs, limits: limits, peers: peers, watchdog: watchdog)
        var report = Report()
        report.runs = runs
        report.environment = environmentLine()
        progress(
            "baton-bench: sizes \(sizes.map(grouped).joined(separator: ", ")), \(runs) runs, \(ProcessInfo.processInfo.activeProcessorCount) cores"
        )
        for workload in all where selected.contains(workload.name) {
            report.summaries.append((workload.name, workload.summary))
            for n in sizes {
                progress("\(workload.name) n=\(grouped(n))")
                report.results.append(harness.run(workload, n: n))
            }
        }
        for count in memorySizes {
            var readings: [Peer: MemoryReading] = [:]
            for peer in MemoryProbe.peers {
                progress("memory \(peer.title) n=\(grouped(count))")
                readings[peer] = MemoryProbe.measure(peer: peer, count: count, timeout: watchdog.timeout)
            }
            report.memory.append((count, readings))
        }
        for count in boundedSizes {
            progress("back-pressure n=\(grouped(count)), bound \(grouped(Report.bound))")
            if let reading = MemoryProbe.measure(
                peer: .baton, count: count, bound: Report.bound, timeout: watchdog.timeout)
            {
                report.bounded.append(reading)
            }
        }
        report.printTable()
        report.printJSON()
        report.printTargets()
        if !watchdog.hangs.isEmpty {
            progress(
                "baton-bench: \(watchdog.hangs.count) run(s) hung: \(watchdog.hangs.joined(separator: "; ")). Exit status 3."
            )
            throw ExitCode(3)
        }
    }

    private func environmentLine() -> String {
        let info = ProcessInfo.processInfo
        var load = ""
        if let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) {
            load = ", load average at start " + text.split(separator: " ").prefix(3).joined(separator: " ")
        }
        #if DEBUG
        let build = "DEBUG build (numbers meaningless; use -c release)"
        #else
        let build = "release build"
        #endif
        return "\(build), \(info.activeProcessorCount) cores, \(info.physicalMemory >> 30) GiB\(load)"
    }
}

struct MemoryProbeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "memory-probe",
        abstract: "Internal: measures pending-job memory of one peer in this process and prints JSON.",
        shouldDisplay: false
    )

    @Option var peer: String
    @Option var count: Int
    /// Measures back-pressure instead: Baton's `addWhenRoom` under this bound.
    @Option var bound: Int?

    func run() throws {
        guard let peer = Peer(rawValue: peer), MemoryProbe.peers.contains(peer) else {
            throw ValidationError("unknown peer '\(peer)'")
        }
        let reading =
            if let bound { MemoryProbe.probeBounded(count: count, bound: bound) } else {
                MemoryProbe.probe(peer: peer, count: count)
            }
        let data = try JSONEncoder().encode(reading)
        FileHandle.standardOutput.write(data)
        // Leave without draining or releasing the pending jobs: the parent only wants the numbers.
        Foundation.exit(0)
    }
}

func parseList(_ text: String?) throws -> [String]? {
    guard let text else { return nil }
    return text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
}

/// `10k,100k,1M` or plain numbers.
func parseSizes(_ text: String?) throws -> [Int]? {
    guard let items = try parseList(text) else { return nil }
    return try items.map { item in
        var digits = Substring(item.lowercased())
        var scale = 1
        if digits.hasSuffix("k") {
            scale = 1_000
            digits = digits.dropLast()
        } else if digits.hasSuffix("m") {
            scale = 1_000_000
            digits = digits.dropLast()
        }
        guard let value = Int(digits.replacingOccurrences(of: "_", with: "")), value > 0 else {
            throw ValidationError("'\(item)' is not a job count (examples: 500, 10k, 1M)")
        }
        return value * scale
    }
}
