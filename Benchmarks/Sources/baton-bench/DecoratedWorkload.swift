import Baton

/// `decorated` (Baton only): as `independent`, but every job carries what real jobs carry: an
/// observer (`onFinish`), a condition that is evaluated (synchronously, as a condition that can answer at once is) and
/// an exclusivity category shared with 1/16 of the jobs (see ``Decorations/apply(to:index:)``). The
/// report shows its cost against plain `independent`.
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
                job.onFinish { _ in observed.increment() }
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

    @inline(__always)
    static func apply(to job: Job, index: Int) {
        job.addCondition(condition)
        job.addCondition(categories[index % exclusivityCategoryCount])
    }
}
