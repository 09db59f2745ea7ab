import Baton
import BatonTesting
import Dispatch
import Testing

/// Jobs on several queues with random sets of categories (some counted) and random cancels: a
/// category never has more holders than its limit, and everything drains.
@Suite struct ExclusivityStressTests {
    @Test(arguments: [11, 12, 13])
    func categoriesNeverExceedTheirLimits(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let scope = ExclusivityScope(name: "stress")
        let queues = [1, 3, 8].enumerated().map {
            JobQueue(name: "q\($0.offset)", maxConcurrentJobs: $0.element, exclusivityScope: scope)
        }
        let categories = [
            ExclusivityCategory("a"), ExclusivityCategory("b"), ExclusivityCategory("c", limit: 2),
            ExclusivityCategory("d", limit: 3),
        ]
        let gauges = categories.map { _ in ConcurrencyGauge() }
        let count = 1_500 * RandomGraphStressTests.scale
        var jobs: [Job] = []
        for i in 0..<count {
            var mine = categories.indices.filter { _ in rng.next() % 3 == 0 }
            if mine.isEmpty { mine = [Int(rng.next() % UInt64(categories.count))] }
            let held = mine
            let body: @Sendable () -> Void = {
                for c in held { gauges[c].enter() }
                for c in held { gauges[c].leave() }
            }
            let job: Job =
                rng.next() % 3 == 0
                ? AsyncJob(name: "j\(i)") { _ in
                    for c in held { gauges[c].enter() }
                    await Task.yield()
                    for c in held { gauges[c].leave() }
                }
                : BlockJob(name: "j\(i)", body)
            // Random order of categories per job: the arbiter must not care.
            for c in held.shuffled(using: &rng) { job.addCondition(MutuallyExclusive(categories[c])) }
            if i > 0 && rng.next() % 4 == 0 { job.addDependency(jobs[Int(rng.next() % UInt64(i))]) }
            jobs.append(job)
        }
        let toCancel = jobs.filter { _ in rng.next() % 8 == 0 }
        let all = jobs
        let assignment = jobs.map { _ in Int(rng.next() % UInt64(queues.count)) }
        DispatchQueue.global().async {
            for job in toCancel { job.cancel() }
        }
        for (job, q) in zip(all, assignment) { queues[q].add(job) }
        // Slow progress on a loaded machine is not a failure; no progress for 30 s is (a lost grant).
        try await withStallDeadline(
            stalledFor: .seconds(30), atMost: .seconds(600), "the exclusivity stress graph draining",
            progress: { queues.reduce(0) { $0 + $1.jobCount } },
            report: { queues.map { $0.diagnose().description }.joined(separator: "\n") }
        ) {
            for queue in queues { await queue.waitUntilAllJobsAreFinished() }
        }
        for (category, gauge) in zip(categories, gauges) {
            #expect(gauge.highest <= category.limit, "\(category)")
        }
        #expect(jobs.allSatisfy { $0.isFinished })
        for category in categories { #expect(scope.holders(of: category).isEmpty) }
    }
}
