import Baton
import Foundation

/// `decorated` (Baton only): as `independent`, but every job carries what real jobs carry: an
/// observer (`onFinish`), a condition that is evaluated (synchronously, as a condition that can answer at once is) and
/// an exclusivity category shared with 1/16 of the jobs (see ``Decorations/apply(to:index:)``). The
/// report shows its cost against plain `independent`.
///
/// To take the cost apart, `BATON_BENCH_DECORATIONS` picks the decorations: any of `o` (observer), `c`
/// (condition) and `x` (exclusivity category); `ocx`, all three, when unset. The report's ratio is then
/// that of the decorations chosen.
enum DecoratedWorkload {
    static var decorated: Workload {
        Workload(
            name: "decorated",
            summary:
                "Baton only: as independent, each job with an onFinish observer, a condition and 1 of 16 categories",
            runners: [.baton: baton]
        )
    }

    static func baton(_ n: Int) -> Sample {
        let counter = Counter()
        let observed = Counter()
        var sample = measure {
            let queue = JobQueue(name: "decorated")
            for index in 0..<n {
                let job = BlockJob { counter.increment() }
                if Decorations.observer {
                    job.onFinish { _ in observed.increment() }
                } else {
                    observed.increment()
                }
                Decorations.apply(to: job, index: index)
                queue.add(job)
            }
            queue.waitUntilAllJobsAreFinished()
            return queue
        }
        sample.problem = counter.check(n) ?? observed.check(n, "finish observers ran")
        return sample
    }
}

/// What `decorated` adds to each job beyond its observer.
enum Decorations {
    /// Number of exclusivity categories the jobs share (job `i` uses category `i % count`), once
    /// exclusivity exists: enough that most jobs can run, few enough that the categories are contended.
    static let exclusivityCategoryCount = 16

    /// A condition that always passes and answers at once (no `Task`), like `NoFailedDependencies`.
    static let condition = ClosureCondition(name: "bench.always") { _ in true }
    static let categories = (0..<exclusivityCategoryCount).map { MutuallyExclusive(category: "bench.\($0)") }

    /// The decorations chosen (see ``DecoratedWorkload``).
    static let chosen = ProcessInfo.processInfo.environment["BATON_BENCH_DECORATIONS"] ?? "ocx"
    static let observer = chosen.contains("o")
    static let withCondition = chosen.contains("c")
    static let withCategory = chosen.contains("x")

    @inline(__always)
    static func apply(to job: Job, index: Int) {
        if withCondition { job.addCondition(condition) }
        if withCategory { job.addCondition(categories[index % exclusivityCategoryCount]) }
    }
}
