import Baton

/// `decorated` (Baton only): as `independent`, but every job carries what real jobs carry: an
/// observer (`onFinish`) today, and a condition and an exclusivity category once those APIs exist
/// (see ``Decorations/apply(to:index:)``). The report shows its cost against plain `independent`.
enum DecoratedWorkload {
    static var decorated: Workload {
        Workload(
            name: "decorated",
            summary: "Baton only: as independent, each job with an onFinish observer (+ condition, exclusivity: hooks)",
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

    @inline(__always)
    static func apply(to job: Job, index: Int) {
        // ┌──────────────────────────────────────────────────────────────────────────────────────────┐
        // │ HOOK(conditions): when `JobCondition` lands, give every job one condition that always   │
        // │ passes, e.g.                                                                             │
        // │     job.addCondition(BlockCondition { _ in .satisfied })                                 │
        // │ HOOK(exclusivity): when exclusivity categories land, give every job one category,        │
        // │     job.addExclusivityCategory("bench.\(index % exclusivityCategoryCount)")              │
        // │ Then update the summary of `decorated` and README.md ("decorated").                       │
        // └──────────────────────────────────────────────────────────────────────────────────────────┘
        _ = job
        _ = index
    }
}
