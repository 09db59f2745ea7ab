import Baton
import BatonTesting
import Dispatch
import Foundation
import Testing

/// Random dependency graphs across several queues with different limits, with random cancels, checked
/// for the invariants that matter: every job finishes exactly once, no job starts before all its
/// dependencies finished, no queue runs more than its limit, and the whole graph drains.
///
/// Scale with `BATON_STRESS_SCALE` (default 1; CI under ThreadSanitizer uses the default).
@Suite struct RandomGraphStressTests {
    static let scale = Int(ProcessInfo.processInfo.environment["BATON_STRESS_SCALE"] ?? "") ?? 1

    struct Violation: Sendable, CustomStringConvertible {
        let description: String
    }

    @Test(arguments: [1, 2, 3])
    func randomGraphsDrainWithEveryInvariantKept(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let jobCount = 3_000 * Self.scale
        let limits = [1, 2, 3, 8]
        let queues = limits.enumerated().map { JobQueue(name: "q\($0.offset)", maxConcurrentJobs: $0.element) }
        let gauges = limits.map { _ in ConcurrencyGauge() }
        let violations = Recorder<Violation>()
        let finishes = Recorder<UInt64>()
        let bodies = Recorder<UInt64>()

        var jobs: [Job] = []
        var queueOf: [Int] = []
        var dependenciesOf: [[Job]] = []
        for index in 0..<jobCount {
            let q = Int(rng.next() % UInt64(queues.count))
            let gauge = gauges[q]
            let limit = limits[q]
            let depCount = index == 0 ? 0 : Int(rng.next() % 5)
            let deps = (0..<depCount).map { _ in jobs[Int(rng.next() % UInt64(index))] }
            let box = StressBox()
            let check: @Sendable () -> Void = {
                let job = box.job!
                bodies.record(job.id)
                if gauge.enter() > limit { violations.record(Violation(description: "queue q\(q) exceeded \(limit)")) }
                for dep in box.dependencies where !dep.isFinished {
                    violations.record(Violation(description: "\(job.name) started before \(dep.name) finished"))
                }
            }
            let job: Job
            if rng.next() % 4 == 0 {
                job = AsyncJob(name: "j\(index)") { _ in
                    check()
                    await Task.yield()
                    gauge.leave()
                }
            } else {
                job = BlockJob(name: "j\(index)") {
                    check()
                    gauge.leave()
                }
            }
            job.priority = JobPriority(rawValue: Int(rng.next() % 5))!
            box.job = job
            box.dependencies = deps
            job.addDependencies(deps)
            job.onFinish { [id = job.id] _ in finishes.record(id) }
            jobs.append(job)
            queueOf.append(q)
            dependenciesOf.append(deps)
        }

        // Add in random batches, in creation order (so no cycles), while another thread cancels.
        let toCancel = jobs.filter { _ in rng.next() % 10 == 0 }
        let all = jobs
        let assignment = queueOf
        let canceller = Thread {
            for job in toCancel { job.cancel() }
        }
        var start = 0
        while start < jobCount {
            let end = min(jobCount, start + 1 + Int(rng.next() % 200))
            for q in queues.indices {
                queues[q].add((start..<end).filter { assignment[$0] == q }.map { all[$0] })
            }
            if start == 0 { canceller.start() }
            start = end
        }

        try await withStallDeadline(
            stalledFor: .seconds(30), atMost: .seconds(600 * Self.scale),
            "the random graph of \(jobCount) jobs (seed \(seed)) draining",
            progress: { queues.reduce(0) { $0 + $1.jobCount } },
            report: { queues.map { $0.diagnose().description }.joined(separator: "\n") }
        ) {
            for queue in queues { await queue.waitUntilAllJobsAreFinished() }
        }

        #expect(violations.values.isEmpty, "\(violations.values.prefix(5))")
        let finished = finishes.values
        #expect(finished.count == jobCount)
        #expect(Set(finished).count == jobCount)
        #expect(Set(bodies.values).count == bodies.count)
        for (job, deps) in zip(jobs, dependenciesOf) {
            #expect(job.isFinished)
            if job.outcomeIfDecided?.didSucceed == true {
                #expect(deps.allSatisfy { $0.isFinished })
            }
        }
        for (gauge, limit) in zip(gauges, limits) { #expect(gauge.highest <= limit) }
    }

    @Test func deepChainsAcrossQueuesReleaseIteratively() async throws {
        let count = 100_000 * Self.scale
        let queues = [JobQueue(name: "a"), JobQueue(name: "b", maxConcurrentJobs: 1)]
        var previous: Job?
        var jobs: [Job] = []
        jobs.reserveCapacity(count)
        for i in 0..<count {
            let job = BlockJob {}
            if let previous { job.addDependency(previous) }
            previous = job
            jobs.append(job)
            if i % 1000 == 999 {
                queues[(i / 1000) % 2].add(jobs)
                jobs.removeAll(keepingCapacity: true)
            }
        }
        queues[0].add(jobs)
        let last = previous!
        previous = nil
        jobs = []
        try await withStallDeadline(
            stalledFor: .seconds(30), atMost: .seconds(600 * Self.scale), "the chain draining",
            progress: { queues.reduce(0) { $0 + $1.jobCount } }
        ) {
            #expect(await last.outcome.didSucceed)
        }
    }
}

final class StressBox: @unchecked Sendable {
    // @unchecked Sendable: written before the job is added to a queue, then only read.
    var job: Job?
    var dependencies: [Job] = []
}
