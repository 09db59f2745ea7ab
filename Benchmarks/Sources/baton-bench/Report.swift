import Foundation

/// Prints what a run measured: the table of medians and ratios, one JSON line per workload and size,
/// and the issue's targets, met or missed. Nothing here fails the program: the numbers are reported,
/// never asserted (CI machines are noisy).
struct Report {
    var results: [WorkloadResult] = []
    var summaries: [(name: String, summary: String)] = []
    /// Memory readings by job count.
    var memory: [(count: Int, readings: [Peer: MemoryReading])] = []
    /// Back-pressure readings (`addWhenRoom` under ``bound``), by job count.
    var bounded: [MemoryReading] = []
    /// The bound of the back-pressure probe.
    static let bound = 10_000
    var runs = 0
    var environment = ""

    func result(_ workload: String, _ n: Int) -> WorkloadResult? {
        results.first { $0.workload == workload && $0.n == n }
    }

    func median(_ workload: String, _ n: Int, _ peer: Peer) -> Double? {
        result(workload, n)?.median[peer]
    }

    // MARK: Table

    func printTable() {
        print("")
        print(
            "Baton benchmark: medians of up to \(runs) alternating runs per peer; seconds for build + run + wait + release."
        )
        print("Ratios are Baton/peer from the same run (below 1: Baton is faster; 0.20 = 5× faster).")
        if !environment.isEmpty { print(environment) }
        print("")
        let peers = Peer.allCases
        var header = pad("workload", 13) + pad("n", 10, right: true)
        for peer in peers { header += pad(peer.title, 12, right: true) }
        for peer in peers.dropFirst() { header += pad(peer.ratioTitle, 9, right: true) }
        header += pad("Baton µs/job", 14, right: true) + "  notes"
        print(header)
        print(String(repeating: "-", count: header.count + 20))
        var footnotes: [String] = []
        for result in results {
            var line = pad(result.workload, 13) + pad(grouped(result.n), 10, right: true)
            for peer in peers {
                let cell: String
                if let value = result.median[peer] {
                    cell = seconds(value) + (result.runsDone[peer] ?? runs < result.runs ? "*" : "")
                } else if let why = result.absent[peer] {
                    cell = why == "HANG" ? "HANG" : why.hasPrefix("skipped") ? "skip" : "n/a"
                } else {
                    cell = "?"
                }
                line += pad(cell, 12, right: true)
            }
            let baton = result.median[.baton]
            for peer in peers.dropFirst() {
                let ratio = baton.flatMap { b in result.median[peer].map { b / $0 } }
                line += pad(ratio.map(formatRatio) ?? "—", 9, right: true)
            }
            line += pad(baton.map { String(format: "%.3f", $0 / Double(result.n) * 1e6) } ?? "—", 14, right: true)
            var notes: [String] = []
            for peer in peers {
                if let done = result.runsDone[peer], done < result.runs {
                    notes.append("*\(peer.title) \(done)/\(result.runs) runs (time budget)")
                }
                if let run = result.medianRun[peer], let release = result.medianRelease[peer], release > run {
                    notes.append("\(peer.title) release \(seconds(release)) s > run \(seconds(run)) s")
                }
                if let why = result.absent[peer], why.hasPrefix("skipped") {
                    let note = "\(peer.title) \(why)"
                    if !footnotes.contains(note) { footnotes.append(note) }
                }
            }
            if ["decorated", "group"].contains(result.workload), let plain = median("independent", result.n, .baton),
                let baton
            {
                notes.append(String(format: "%.2f× plain independent", baton / plain))
            }
            notes.append(contentsOf: result.problems.map { "PROBLEM: \($0)" })
            line += "  " + notes.joined(separator: "; ")
            print(line)
        }
        print("")
        print("n/a: the peer cannot express the workload. skip: see below. *: fewer runs (per-peer time budget).")
        if results.contains(where: { $0.absent.values.contains("HANG") }) {
            print(
                "HANG: a run did not finish within the time limit; it was abandoned (stacks on stderr), the exit status is 3."
            )
        }
        for note in footnotes { print("skip: \(note)") }
        print("")
        print("Workloads:")
        for (name, summary) in summaries { print("  \(pad(name, 13)) \(summary)") }
        printMemoryTable()
        printBoundedTable()
    }

    func printBoundedTable() {
        guard !bounded.isEmpty else { return }
        print("")
        print(
            "Back-pressure: one producer adds n jobs through addWhenRoom under maxUnfinishedJobs \(grouped(Self.bound)) (child process each):"
        )
        print(
            pad("jobs", 14) + pad("peak RSS growth", 18, right: true) + pad("seconds", 10, right: true)
                + pad("µs/job", 10, right: true))
        for reading in bounded {
            let seconds = reading.seconds ?? 0
            print(
                pad(grouped(reading.count), 14)
                    + pad(String(format: "%.1f MB", Double(reading.peak) / 1e6), 18, right: true)
                    + pad(String(format: "%.2f", seconds), 10, right: true)
                    + pad(String(format: "%.2f", seconds * 1e6 / Double(reading.count)), 10, right: true))
        }
    }

    func printMemoryTable() {
        guard !memory.isEmpty else { return }
        print("")
        print("Memory per pending job (empty bodies on a suspended queue; one child process per reading):")
        print(
            "bytes/job: resident growth (/proc/self/statm) [peak: VmHWM, reset before the baseline, minus the baseline]"
        )
        var header = pad("pending jobs", 14)
        for peer in MemoryProbe.peers { header += pad(peer.title, 22, right: true) }
        print(header)
        for (count, readings) in memory {
            var line = pad(grouped(count), 14)
            for peer in MemoryProbe.peers {
                let cell =
                    readings[peer].map { String(format: "%.0f [%.0f]", $0.residentPerJob, $0.peakPerJob) } ?? "failed"
                line += pad(cell, 22, right: true)
            }
            print(line)
        }
    }

    // MARK: JSON

    func printJSON() {
        print("")
        for result in results {
            var fields = ["\"workload\":\"\(result.workload)\"", "\"n\":\(result.n)", "\"runs\":\(result.runs)"]
            for peer in Peer.allCases {
                fields.append("\"\(peer.rawValue)\":" + (result.median[peer].map(json) ?? "null"))
            }
            let hung = Peer.allCases.filter { result.absent[$0] == "HANG" }
            if !hung.isEmpty {
                fields.append("\"hung\":[" + hung.map { "\"\($0.rawValue)\"" }.joined(separator: ",") + "]")
            }
            print("{" + fields.joined(separator: ",") + "}")
        }
        for (count, readings) in memory {
            var fields = [
                "\"workload\":\"memory-pending\"", "\"n\":\(count)", "\"runs\":1", "\"unit\":\"bytes per pending job\"",
            ]
            for peer in Peer.allCases {
                fields.append("\"\(peer.rawValue)\":" + (readings[peer].map { json($0.residentPerJob) } ?? "null"))
            }
            for peer in MemoryProbe.peers {
                fields.append("\"\(peer.rawValue)_peak\":" + (readings[peer].map { json($0.peakPerJob) } ?? "null"))
            }
            print("{" + fields.joined(separator: ",") + "}")
        }
        for reading in bounded {
            print(
                "{\"workload\":\"back-pressure\",\"n\":\(reading.count),\"bound\":\(Self.bound),"
                    + "\"peak_bytes\":\(reading.peak),\"seconds\":\(json(reading.seconds ?? 0))}")
        }
    }

    // MARK: Targets

    /// The targets of issue 5, evaluated on this run's numbers. Informational only.
    func printTargets() {
        print("")
        print("Targets (issue 5), from this run's medians; informational, never asserted:")
        var lines: [String] = []
        func ratio(_ workload: String, _ n: Int, _ peer: Peer, atMost limit: Double, _ label: String) {
            guard let b = median(workload, n, .baton) else { return }
            guard let p = median(workload, n, peer) else {
                lines.append("  \(label): no \(peer.title) number at n=\(grouped(n))")
                return
            }
            lines.append("  " + verdict(label, b / p, atMost: limit, unit: "Baton/\(peer.title)"))
        }
        for n in [100_000, 1_000_000] {
            ratio("independent", n, .foundation, atMost: 0.2, "independent \(grouped(n)): ≤ 1/5 Foundation")
            ratio("independent", n, .gcd, atMost: 1.0, "independent \(grouped(n)): ≤ GCD")
        }
        for result in results where result.workload == "serial" {
            ratio("serial", result.n, .foundation, atMost: 0.2, "serial \(grouped(result.n)): ≤ 1/5 Foundation")
        }
        for workload in ["chain", "fan-in", "dag"] {
            let sizes = results.filter { $0.workload == workload && $0.median[.baton] != nil }.map(\.n).sorted()
            for (small, large) in zip(sizes, sizes.dropFirst()) {
                let perJobSmall = median(workload, small, .baton)! / Double(small)
                let perJobLarge = median(workload, large, .baton)! / Double(large)
                let exponent =
                    log(median(workload, large, .baton)! / median(workload, small, .baton)!)
                    / log(Double(large) / Double(small))
                lines.append(
                    "  "
                        + verdict(
                            "\(workload) linear \(grouped(small))→\(grouped(large)): per-job time grows ≤ 2×",
                            perJobLarge / perJobSmall,
                            atMost: 2.0, unit: String(format: "per-job growth (time ∝ n^%.2f)", exponent)
                        )
                )
            }
        }
        if let chain = median("chain", 1_000_000, .baton) {
            lines.append("  " + verdict("chain 1M < 2 s", chain, atMost: 2.0, unit: "seconds"))
        }
        ratio("chain", 10_000, .foundation, atMost: 0.01, "chain 10k: ≥ 100× faster than Foundation")
        for result in results where result.workload == "chain-serial" && result.median[.foundation] != nil {
            ratio(
                "chain-serial", result.n, .foundation, atMost: 0.2,
                "chain-serial \(grouped(result.n)): ≤ 1/5 Foundation width 1")
        }
        ratio("cancel-all", 100_000, .foundation, atMost: 0.2, "cancel-all 100k: ≤ 1/5 Foundation")
        for result in results where result.workload == "async" {
            ratio("async", result.n, .taskgroup, atMost: 1.5, "async \(grouped(result.n)): ≤ 1.5× TaskGroup")
        }
        // Issue 13: instruments against plain `independent` of the same run.
        for result in results where result.workload == "independent" {
            guard let plain = result.median[.baton] else { continue }
            for (workload, limit, label) in [
                ("metrics-off", 1.1, "no metrics backend: same time as no instrument"),
                ("metrics-on", 3.0, "metrics on (atomic backend): cost"),
                ("timeline", 3.0, "timeline recorder: cost"),
            ] {
                guard let value = median(workload, result.n, .baton) else { continue }
                lines.append(
                    "  "
                        + verdict(
                            "\(workload) \(grouped(result.n)): \(label)", value / plain, atMost: limit,
                            unit: "time/independent"))
            }
        }
        // Issue 30: exclusivity lines with dead or waiting entries against the same jobs without them.
        for (workload, label) in [
            ("lines-dead", "behind n cancelled waiters: ≤ 3× without them"),
            ("lines-wide", "beside n/5 waiting claims: ≤ 3× with nobody waiting"),
        ] {
            for result in results where result.workload == workload {
                guard let value = result.median[.baton], let plain = median(workload + "-none", result.n, .baton)
                else { continue }
                lines.append(
                    "  "
                        + verdict("\(workload) \(grouped(result.n)): \(label)", value / plain, atMost: 3, unit: "ratio")
                )
            }
        }
        for (count, readings) in memory {
            if let baton = readings[.baton] {
                lines.append(
                    "  "
                        + verdict(
                            "memory \(grouped(count)) pending: ≤ 256 B/job", baton.residentPerJob, atMost: 256,
                            unit: "bytes/job"))
            }
        }
        // Issue 30: back-pressure keeps memory flat: the largest run's peak within 1.5× the smallest's.
        if let small = bounded.min(by: { $0.count < $1.count }), let large = bounded.max(by: { $0.count < $1.count }),
            large.count > small.count
        {
            lines.append(
                "  "
                    + verdict(
                        "back-pressure \(grouped(small.count))→\(grouped(large.count)) jobs under \(grouped(Self.bound)): peak RSS flat (≤ 1.5×)",
                        Double(large.peak) / Double(max(small.peak, 1)), atMost: 1.5, unit: "peak ratio"))
        }
        if lines.isEmpty { lines.append("  (none of the targets' sizes were run)") }
        for line in lines { print(line) }
    }

    private func verdict(_ label: String, _ value: Double, atMost limit: Double, unit: String) -> String {
        let shown = value < 0.01 ? String(format: "%.5f", value) : String(format: "%.3f", value)
        if value <= limit {
            return
                "MET     \(label): \(unit) = \(shown) (limit \(limit); margin \(String(format: "%.1f", limit / value))×)"
        }
        return
            "MISSED  \(label): \(unit) = \(shown) (limit \(limit); over by \(String(format: "%.2f", value / limit))×)"
    }

    // MARK: Formatting

    private func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let count = text.count
        guard count < width else { return right ? " " + text : text + " " }
        let spaces = String(repeating: " ", count: width - count)
        return right ? spaces + text : text + spaces
    }

    private func seconds(_ value: Double) -> String {
        switch value {
        case 1...: String(format: "%.2f", value)
        case 0.1...: String(format: "%.3f", value)
        case 0.01...: String(format: "%.4f", value)
        default: String(format: "%.5f", value)
        }
    }

    private func formatRatio(_ value: Double) -> String {
        value < 0.01 ? String(format: "%.4f", value) : String(format: "%.3f", value)
    }

    private func json(_ value: Double) -> String {
        String(format: "%.6g", value)
    }
}

/// `1000000` as `1,000,000`.
func grouped(_ n: Int) -> String {
    let digits = Array(String(n))
    var text = ""
    for (index, digit) in digits.enumerated() {
        if index > 0, (digits.count - index) % 3 == 0 { text += "," }
        text.append(digit)
    }
    return text
}
