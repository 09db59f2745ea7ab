import Dispatch
import Foundation

// The measuring loop: every workload, at every size, for Baton and each peer that can express it,
// alternating between them, several runs each; the medians go to the report.

/// Who runs a workload.
enum Peer: String, CaseIterable, Sendable {
    case baton
    case foundation
    case gcd
    case taskgroup

    var title: String {
        switch self {
        case .baton: "Baton"
        case .foundation: "Foundation"
        case .gcd: "GCD"
        case .taskgroup: "TaskGroup"
        }
    }

    /// Short column label for ratios: Baton/peer.
    var ratioTitle: String {
        switch self {
        case .baton: "B/B"
        case .foundation: "B/F"
        case .gcd: "B/G"
        case .taskgroup: "B/T"
        }
    }
}

/// One timed run: building, running and waiting (`run`), then dropping every reference to what was
/// built (`release`). The reported time is the sum.
struct Sample {
    var run: Duration
    var release: Duration
    /// Set when the run's work was wrong (a body did not run, ran twice or too early).
    var problem: String?

    var total: Duration { run + release }
}

/// Times `work` (which builds, runs and waits for its jobs and returns whatever it built), then the
/// release of what it returned.
func measure<Built>(_ work: () -> Built) -> Sample {
    let clock = ContinuousClock()
    let start = clock.now
    let built = work()
    let ran = withExtendedLifetime(built) { clock.now }
    release(consume built)
    let end = clock.now
    return Sample(run: ran - start, release: end - ran, problem: nil)
}

/// Runs `body` in a detached task and blocks the calling (main) thread until it returns. The main
/// thread is not one of Swift concurrency's threads, so blocking it takes nothing from the tasks.
func blockingWait(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await body()
        done.signal()
    }
    done.wait()
}

/// Limits that keep a full run within minutes. A peer beyond a limit is skipped (`null` in JSON).
struct Limits {
    /// Largest Foundation chain or random DAG. Foundation's dependency handling is quadratic at default
    /// width (10k: ~24 s, 20k: ~93 s), and releasing a finished chain of ~40k+ operations overflows
    /// the stack (recursive deinit), so longer chains are never run.
    var foundationGraph = 20_000
    /// Largest Foundation fan-in (1 operation depending on n): superlinear, ~2.7 s at 100k.
    var foundationFanIn = 100_000
    /// A peer stops its remaining runs of one workload and size once its runs took this long in total.
    var peerBudget: Duration = .seconds(60)
}

/// A workload and how each peer runs it once at size `n`. A peer without a runner cannot express it.
struct Workload {
    let name: String
    let summary: String
    let runners: [Peer: (Int) -> Sample]
    /// Why `peer` is skipped at size `n` although it could express the workload, or `nil` to run it.
    var skipReason: (Peer, Int, Limits) -> String? = { _, _, _ in nil }
}

/// The medians of one workload at one size.
struct WorkloadResult {
    let workload: String
    let n: Int
    let runs: Int
    /// Median total seconds per peer that ran.
    var median: [Peer: Double] = [:]
    var medianRelease: [Peer: Double] = [:]
    var medianRun: [Peer: Double] = [:]
    var runsDone: [Peer: Int] = [:]
    /// Why a peer has no number: cannot express the workload, or skipped and why.
    var absent: [Peer: String] = [:]
    var problems: [String] = []
}

enum Statistics {
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number (the benchmarks' one conversion).
    var seconds: Double { self / .seconds(1) }
}

/// Runs the workloads.
struct Harness {
    let sizes: [Int]
    let runs: Int
    let limits: Limits
    /// The peers asked for; the others are reported as not run.
    let peers: [Peer]
    let watchdog: Watchdog

    /// Size of the untimed warm-up run of each peer before the timed runs of each workload and size.
    static let warmUpSize = 1_000
    /// A warm-up takes milliseconds; one that takes this long has hung (found quickly, so that a hang
    /// costs seconds rather than the full time limit of a large run).
    static let warmUpLimit: Duration = .seconds(15)

    /// Workload/peer pairs that hung: not run again in this process (their thread is still stuck).
    private(set) var hung: Set<String> = []

    mutating func run(_ workload: Workload, n: Int) -> WorkloadResult {
        var result = WorkloadResult(workload: workload.name, n: n, runs: runs)
        var active: [Peer] = []
        for peer in Peer.allCases {
            if workload.runners[peer] == nil {
                result.absent[peer] = "cannot express"
            } else if !peers.contains(peer) {
                result.absent[peer] = "skipped: not selected (--peers)"
            } else if hung.contains("\(workload.name)/\(peer)") {
                result.absent[peer] = "HANG"
                result.problems.append("\(peer.title) hung at a smaller size; not run again")
            } else if let reason = workload.skipReason(peer, n, limits) {
                result.absent[peer] = "skipped: \(reason)"
            } else {
                active.append(peer)
            }
        }
        for peer in active {
            let size = min(n, Harness.warmUpSize)
            let runner = workload.runners[peer]!
            if watchdog.run(
                "\(workload.name) n=\(size) \(peer.title) warm-up", limit: Harness.warmUpLimit, { runner(size) }) == nil
            {
                markHung(peer, of: workload, in: &result, during: "warm-up at n=\(size)")
            }
        }
        active.removeAll { hung.contains("\(workload.name)/\($0)") }
        var samples: [Peer: [Sample]] = [:]
        var spent: [Peer: Duration] = [:]
        for round in 0..<runs {
            // Alternate: each round starts with a different peer, so none always runs first or last.
            let order = active.indices.map { active[($0 + round) % active.count] }
            for peer in order
            where spent[peer, default: .zero] < limits.peerBudget && !hung.contains("\(workload.name)/\(peer)") {
                let runner = workload.runners[peer]!
                guard let sample = watchdog.run("\(workload.name) n=\(n) \(peer.title) run \(round + 1)", { runner(n) })
                else {
                    markHung(peer, of: workload, in: &result, during: "run \(round + 1)")
                    continue
                }
                samples[peer, default: []].append(sample)
                spent[peer, default: .zero] += sample.total
                if let problem = sample.problem {
                    result.problems.append("\(peer.title) run \(round + 1): \(problem)")
                }
                progress(
                    "  \(workload.name) n=\(n) \(peer.title.padding(toLength: 10, withPad: " ", startingAt: 0)) run \(round + 1): "
                        + "\(format(sample.run.seconds)) s + release \(format(sample.release.seconds)) s"
                        + (sample.problem.map { "  PROBLEM: \($0)" } ?? "")
                )
            }
        }
        for (peer, list) in samples where result.absent[peer] == nil {
            result.median[peer] = Statistics.median(list.map(\.total.seconds))
            result.medianRun[peer] = Statistics.median(list.map(\.run.seconds))
            result.medianRelease[peer] = Statistics.median(list.map(\.release.seconds))
            result.runsDone[peer] = list.count
        }
        return result
    }

    private mutating func markHung(_ peer: Peer, of workload: Workload, in result: inout WorkloadResult, during: String)
    {
        hung.insert("\(workload.name)/\(peer)")
        result.absent[peer] = "HANG"
        result.problems.append("\(peer.title) HUNG during \(during) (stacks on stderr)")
    }
}

/// Progress goes to standard error so that standard output holds only the report.
func progress(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

func format(_ seconds: Double) -> String {
    String(format: "%.4f", seconds)
}
