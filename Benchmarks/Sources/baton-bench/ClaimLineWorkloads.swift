import Baton
import Dispatch
import Foundation

/// Exclusivity lines under the two loads that were quadratic (issue 30). Each workload times only n
/// jobs of one category coming and going; what is set up before (claims that gave up, claims that wait)
/// is not timed. The `-none` workloads are the same n jobs without it: the targets compare the two.
///
/// - `lines-dead`: a claim for {x (limit 3), y} waits at the front of x's line (y is held); n claims for
///   x join behind it while two jobs hold x's other units, and are cancelled; then n x-only jobs run.
/// - `lines-wide`: n/5 claims for {io, db} wait while db is held (io's limit above n/5); then n io-only
///   jobs run.
enum ClaimLineWorkloads {
    static var dead: Workload { workload("lines-dead", "n x-jobs behind n cancelled waiters", dead: true) }
    static var deadNone: Workload {
        workload("lines-dead-none", "the same n x-jobs, no cancelled waiters", dead: false)
    }
    static var wide: Workload { workload("lines-wide", "n io-jobs beside n/5 waiting {io, db} claims", wide: true) }
    static var wideNone: Workload { workload("lines-wide-none", "the same n io-jobs, nobody waiting", wide: false) }

    private static func workload(_ name: String, _ summary: String, dead: Bool) -> Workload {
        Workload(name: name, summary: summary, runners: [.baton: { n in deadLines(n, withDead: dead) }])
    }

    private static func workload(_ name: String, _ summary: String, wide: Bool) -> Workload {
        Workload(name: name, summary: summary, runners: [.baton: { n in wideLines(n, withWaiters: wide) }])
    }

    static func deadLines(_ n: Int, withDead: Bool) -> Sample {
        let x = ExclusivityCategory("x", limit: 3)
        return scenario(n, holding: "y") { queue in
            let front = job([x, "y"])
            queue.add(front)
            waitUntilBlocked(queue, count: 1)
            guard withDead else { return }
            // Two jobs hold x's other units while n claims for x join the line and give up.
            let hogsGo = DispatchSemaphore(value: 0)
            let hogs = (0..<2).map { _ in
                let hog = BlockJob { hogsGo.wait() }
                hog.addCondition(MutuallyExclusive(x))
                return hog
            }
            queue.add(hogs)
            let waiting = (0..<n).map { _ in job([x]) }
            queue.add(waiting)
            waitUntilBlocked(queue, count: 1 + n)
            for job in waiting { job.cancel() }
            for job in waiting { job.waitUntilFinished() }
            hogsGo.signal()
            hogsGo.signal()
            for hog in hogs { hog.waitUntilFinished() }
        } timed: { [x] in
            job([x])
        }
    }

    static func wideLines(_ n: Int, withWaiters: Bool) -> Sample {
        let waiters = n / 5
        let io = ExclusivityCategory("io", limit: waiters + 1_000)
        return scenario(n, holding: "db") { queue in
            guard withWaiters else { return }
            queue.add((0..<waiters).map { _ in job([io, "db"]) })
            waitUntilBlocked(queue, count: waiters)
        } timed: { [io] in
            job([io])
        }
    }

    /// A queue with room for every job, a job holding `held` until the end, `setUp` (not timed), then n
    /// jobs made by `make` added and waited for (timed).
    private static func scenario(
        _ n: Int, holding held: ExclusivityCategory, setUp: (JobQueue) -> Void, timed make: () -> Job
    ) -> Sample {
        let queue = JobQueue(
            name: "lines", maxConcurrentJobs: 2 * n + 8, exclusivityScope: ExclusivityScope(name: "bench.lines"))
        let started = DispatchSemaphore(value: 0)
        let letGo = DispatchSemaphore(value: 0)
        let holder = BlockJob {
            started.signal()
            letGo.wait()
        }
        holder.addCondition(MutuallyExclusive(held))
        queue.add(holder)
        started.wait()
        setUp(queue)

        let jobs = (0..<n).map { _ in make() }
        let clock = ContinuousClock()
        let start = clock.now
        queue.add(jobs)
        for job in jobs { job.waitUntilFinished() }
        let ran = clock.now - start

        letGo.signal()
        queue.waitUntilAllJobsAreFinished()
        let failed = jobs.filter { $0.state != .finished || $0.isCancelled }.count
        return Sample(run: ran, release: .zero, problem: failed == 0 ? nil : "\(failed) timed jobs did not run")
    }

    private static func job(_ categories: [ExclusivityCategory]) -> Job {
        let job = BlockJob {}
        for category in categories { job.addCondition(MutuallyExclusive(category)) }
        return job
    }

    /// Waits (not timed) until `count` jobs of the queue wait for an exclusivity category.
    private static func waitUntilBlocked(_ queue: JobQueue, count: Int) {
        while true {
            let blocked = queue.diagnose().jobs.filter { job in
                job.blockers.contains { if case .exclusivity = $0 { true } else { false } }
            }.count
            if blocked >= count { return }
            usleep(2_000)
        }
    }
}
