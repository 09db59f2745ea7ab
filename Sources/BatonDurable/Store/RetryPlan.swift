/// What a retry changes in a run: a pure computation over the run's jobs and edges, which each store
/// reads and writes in one transaction of its own.
///
/// A retried job runs again with its retry policy's attempts (numbered on from those it made), and so
/// do the jobs that were cancelled because of
/// it: its dependents in the cancelled state, transitively. A dependent that another failed or
/// cancelled job outside the retry would cancel again stays as it is, and so do its own dependents.
/// A job outside the retry that waits for a retried one (a dependent that runs regardless, pending or
/// ready) waits for its new outcome.
///
/// A job that would run again after a dependency that is still being cancelled (running, asked to
/// cancel: `cancel(run:)` just before `retry(run:)`) is refused with an error naming that dependency:
/// when its attempt ended it would be recorded cancelled and cancel the retried job again, so the retry
/// would be undone while it reported jobs running again.
package struct RetryPlan: Equatable {
    package struct Job: Equatable {
        package var name: String
        package var state: DurableJobState
        package var remaining: Int
        /// Running and asked to cancel: it will end cancelled.
        package var isBeingCancelled: Bool
        /// The attempts its retry policy allows (snoozes raised the stored count above it), or 0 when the
        /// stored policy does not read: a restart then gives it one attempt more (which fails it, naming
        /// the damage, if it fails).
        package var maxAttempts: Int
        package init(
            name: String, state: DurableJobState, remaining: Int, isBeingCancelled: Bool = false, maxAttempts: Int = 0
        ) {
            self.name = name
            self.state = state
            self.remaining = remaining
            self.isBeingCancelled = isBeingCancelled
            self.maxAttempts = maxAttempts
        }
    }

    package struct Edge: Equatable {
        package var dependency: Int64
        package var job: Int64
        package var runRegardless: Bool
        package init(dependency: Int64, job: Int64, runRegardless: Bool) {
            self.dependency = dependency
            self.job = job
            self.runRegardless = runRegardless
        }
    }

    /// A job's new state (pending or ready) and its count of unfinished dependencies; for a restarted
    /// job, the attempts it may make again (``Job/maxAttempts``; 0: as stored).
    package struct Change: Equatable {
        package var id: Int64
        package var state: DurableJobState
        package var remaining: Int
        package var maxAttempts = 0
    }

    /// The jobs that run again, in identity order, and what they were.
    package var restarted: [Change] = []
    /// How many of ``restarted`` had failed, and how many were cancelled.
    package var failed = 0
    package var cancelled = 0
    /// Jobs outside the retry that wait again for a restarted dependency.
    package var waiting: [Change] = []

    /// The plan for retrying `targets` (each failed or cancelled, none waiting on a failed or cancelled
    /// job outside the targets) in a run of `jobs` joined by `edges`.
    package static func make(targets: [Int64], jobs: [Int64: Job], edges: [Edge]) throws -> RetryPlan {
        var incoming: [Int64: [Edge]] = [:]
        var outgoing: [Int64: [Edge]] = [:]
        for edge in edges {
            incoming[edge.job, default: []].append(edge)
            outgoing[edge.dependency, default: []].append(edge)
        }
        let targetSet = Set(targets)
        func isStopped(_ id: Int64) -> Bool {
            let state = jobs[id]?.state
            return state == .failed || state == .cancelled
        }
        for target in targets {
            guard let job = jobs[target] else { continue }
            try RunQueries.checkRetryable(DurableJobID(target), name: job.name, state: job.state)
            for edge in incoming[target] ?? [] where !edge.runRegardless {
                guard isStopped(edge.dependency), !targetSet.contains(edge.dependency),
                    let dependency = jobs[edge.dependency]
                else { continue }
                throw RunQueries.blockedRetry(
                    DurableJobID(target), name: job.name, dependency: dependency.name, state: dependency.state)
            }
        }
        // The targets and their cancelled dependents, transitively.
        var members = targetSet
        var work = targets
        while let next = work.popLast() {
            for edge in outgoing[next] ?? []
            where jobs[edge.job]?.state == .cancelled && members.insert(edge.job).inserted {
                work.append(edge.job)
            }
        }
        // A job being cancelled will cancel its dependents when its attempt ends: the retry waits for it.
        for member in members.sorted() {
            for edge in incoming[member] ?? [] where !edge.runRegardless {
                guard let dependency = jobs[edge.dependency], dependency.isBeingCancelled,
                    let job = jobs[member]
                else { continue }
                throw RunQueries.retryWhileCancelling(
                    DurableJobID(member), name: job.name, dependency: dependency.name)
            }
        }
        // Without those that a stopped job outside the retry would cancel again, until none is left.
        var changed = true
        while changed {
            changed = false
            for member in members where !targetSet.contains(member) {
                let blocked = (incoming[member] ?? []).contains { edge in
                    !edge.runRegardless && isStopped(edge.dependency) && !members.contains(edge.dependency)
                }
                if blocked {
                    members.remove(member)
                    changed = true
                }
            }
        }
        var plan = RetryPlan()
        for member in members.sorted() {
            guard let job = jobs[member] else { continue }
            let remaining = (incoming[member] ?? []).filter { edge in
                members.contains(edge.dependency) || !(jobs[edge.dependency]?.state.isFinished ?? true)
            }.count
            plan.restarted.append(
                Change(
                    id: member, state: remaining == 0 ? .ready : .pending, remaining: remaining,
                    maxAttempts: job.maxAttempts))
            if job.state == .failed { plan.failed += 1 } else { plan.cancelled += 1 }
        }
        var again: [Int64: Int] = [:]
        for member in members {
            for edge in outgoing[member] ?? [] where !members.contains(edge.job) {
                let state = jobs[edge.job]?.state
                if state == .pending || state == .ready { again[edge.job, default: 0] += 1 }
            }
        }
        for (id, count) in again.sorted(by: { $0.key < $1.key }) {
            guard let job = jobs[id] else { continue }
            plan.waiting.append(Change(id: id, state: .pending, remaining: job.remaining + count))
        }
        return plan
    }

    /// The jobs of a run that a retry of the whole run starts from: each failed or cancelled job none of
    /// whose dependencies (other than those it runs regardless of) failed or was cancelled.
    package static func roots(jobs: [Int64: Job], edges: [Edge]) -> [Int64] {
        var blocked = Set<Int64>()
        for edge in edges where !edge.runRegardless {
            let state = jobs[edge.dependency]?.state
            if state == .failed || state == .cancelled { blocked.insert(edge.job) }
        }
        return jobs.filter { id, job in
            (job.state == .failed || job.state == .cancelled) && !blocked.contains(id)
        }.keys.sorted()
    }
}
