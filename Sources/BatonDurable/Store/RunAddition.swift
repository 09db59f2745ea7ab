import Foundation

/// Jobs that a running job adds to its own run, stored with its successful completion
/// (``DurableJobContext/add(_:after:)`` builds one; ``AttemptReport/additions`` carries it).
///
/// Stored in the completion's transaction, so they are added once however often the job's attempts
/// are retried: a failed, lost or stale attempt adds nothing. An added job whose name the run already
/// has is stored under the first free name `name #2`, `name #3`…
public struct RunAddition: Hashable, Codable, Sendable {
    /// The jobs; their dependencies and `inputFrom` are indexes into this list.
    public var jobs: [JobSpec]
    /// For each added job (by index), the jobs already in the run that it waits for as well; only jobs
    /// without a dependency among ``jobs`` have any.
    public var after: [[DurableJobID]]

    /// Jobs to add, each without a dependency among them waiting also for `after`.
    public init(jobs: [JobSpec], after: [DurableJobID] = []) {
        self.jobs = jobs
        self.after = jobs.map { $0.allDependencies.isEmpty ? after : [] }
    }

    /// Jobs to add, job `index` waiting also for `after[index]` (the jobs of several `add` calls, each
    /// with its own `after:`).
    public init(jobs: [JobSpec], afterByJob after: [[DurableJobID]]) {
        precondition(after.count == jobs.count, "RunAddition: one list of existing jobs to wait for per added job")
        self.jobs = jobs
        self.after = after
    }

    /// Every existing job that an added job waits for.
    public var existingDependencies: Set<DurableJobID> { Set(after.joined()) }

    /// Checks the jobs as a graph (``GraphSpec/validate()``), but for their names, which need not be
    /// unique: the store makes them so.
    public func validate() throws(DurableError) {
        guard after.count == jobs.count else {
            throw DurableError(
                code: .invalidGraph,
                message:
                    "a RunAddition has \(after.count) lists of existing jobs to wait for and \(jobs.count) jobs; give one list per job"
            )
        }
        var named = jobs
        for (index, name) in Self.uniqueNames(jobs.map(\.name), taken: []).enumerated() { named[index].name = name }
        try GraphSpec(name: "added jobs", jobs: named).validate()
    }

    /// `names`, each that is taken (or repeated) given the first free suffix ` #2`, ` #3`…
    ///
    /// Linear in the number of names: a name's search resumes at the number its previous search
    /// stopped at (every lower number is still taken), so 10,000 jobs named alike cost 10,000 probes,
    /// not 50 million.
    static func uniqueNames(_ names: [String], taken: Set<String>) -> [String] {
        var used = taken
        var next: [String: Int] = [:]
        return names.map { name in
            var unique = name
            var number = next[name] ?? 2
            while used.contains(unique) {
                unique = "\(name) #\(number)"
                number += 1
            }
            if unique != name { next[name] = number }
            used.insert(unique)
            return unique
        }
    }

}

/// What storing a ``RunAddition`` writes, computed from what the run holds: a pure function that both
/// stores apply in the completion's transaction.
package struct AdditionPlan: Equatable {
    /// An existing job as the plan needs it.
    package struct Existing: Equatable {
        package var run: Int64
        package var name: String
        package var state: DurableJobState
        package init(run: Int64, name: String, state: DurableJobState) {
            self.run = run
            self.name = name
            self.state = state
        }
    }

    /// A dependent of the adding job that waits for what it adds.
    package struct GroupDependent: Equatable {
        package var id: Int64
        package var runRegardless: Bool
        package init(id: Int64, runRegardless: Bool) {
            self.id = id
            self.runRegardless = runRegardless
        }
    }

    package struct ExistingEdge: Equatable {
        package var dependency: Int64
        /// The added job's index.
        package var job: Int
    }

    /// The added jobs' names as stored.
    package var names: [String] = []
    /// Each added job's count of unfinished dependencies (among the added and existing jobs).
    package var remaining: [Int] = []
    /// Edges from existing jobs to added ones.
    package var existingEdges: [ExistingEdge] = []
    /// The adding job's dependents that now wait for every added job too.
    package var groupDependents: [GroupDependent] = []
    /// Added jobs cancelled at once, with the reason: a dependency of theirs in the run had failed or
    /// was cancelled.
    package var cancelled: [(index: Int, reason: String)] = []

    package static func == (lhs: AdditionPlan, rhs: AdditionPlan) -> Bool {
        lhs.names == rhs.names && lhs.remaining == rhs.remaining && lhs.existingEdges == rhs.existingEdges
            && lhs.groupDependents == rhs.groupDependents
            && lhs.cancelled.map(\.index) == rhs.cancelled.map(\.index)
            && lhs.cancelled.map(\.reason) == rhs.cancelled.map(\.reason)
    }

    /// - Parameters:
    ///   - adder: the job adding, in run `run`.
    ///   - taken: the names its run's jobs have.
    ///   - existing: the jobs ``RunAddition/after`` names, as stored (missing: not in the store).
    ///   - downstream: the jobs that depend on the adder, transitively (an added job may not wait for one).
    ///   - groupDependents: the adder's dependents whose edge includes added jobs, whatever their state
    ///     (a cancelled one waits for the added jobs when its run is retried).
    /// - Throws: ``DurableError/Code/invalidGraph`` or ``DurableError/Code/dependencyCycle`` naming the
    ///   job that cannot be waited for; when there is none, ``DurableError/Code/conflict`` naming one that
    ///   is running now.
    package static func make(
        _ addition: RunAddition, adder: Int64, adderName: String, run: Int64, taken: Set<String>,
        existing: [Int64: Existing], downstream: Set<Int64>, groupDependents: [GroupDependent]
    ) throws -> AdditionPlan {
        var plan = AdditionPlan()
        plan.names = RunAddition.uniqueNames(addition.jobs.map(\.name), taken: taken)
        plan.remaining = addition.jobs.map { Set($0.allDependencies.map(\.index)).count }
        var blocked: [Int: String] = [:]
        let dependencies = addition.existingDependencies.map(\.rawValue).sorted().filter { $0 != adder }
        // Mistakes in the graph first, for every dependency: a running job met before them would make
        // an attempt that can never add retry as if it could.
        var conflict: DurableError?
        for dependency in dependencies {
            guard let job = existing[dependency], job.run == run else {
                throw DurableError(
                    code: .invalidGraph, jobs: [adderName],
                    message:
                        "job '\(adderName)' added jobs that wait for job \(dependency), which is not in its run (\(DurableRunID(run))); name jobs of the same run in after:."
                )
            }
            if downstream.contains(dependency) {
                throw DurableError(
                    code: .dependencyCycle, jobs: [adderName, job.name],
                    message:
                        "job '\(adderName)' added jobs that wait for '\(job.name)', which itself waits for '\(adderName)': that would be a cycle. Wait only for jobs that do not depend on the adding job."
                )
            }
        }
        for dependency in dependencies {
            guard let job = existing[dependency] else { continue }
            for index in addition.jobs.indices where addition.after[index].contains(DurableJobID(dependency)) {
                plan.existingEdges.append(ExistingEdge(dependency: dependency, job: index))
                switch job.state {
                case .pending, .ready: plan.remaining[index] += 1
                case .running:
                    // Its completion may be under way already, blind to an edge added now (PostgreSQL reads a
                    // statement's rows as they were when it began): refused on every store alike.
                    // A conflict of the moment, not a mistake in the graph: the adder's attempt fails as
                    // retryable, and its next attempt may find the job finished.
                    conflict =
                        conflict
                        ?? DurableError(
                            code: .conflict, jobs: [adderName, job.name],
                            message:
                                "job '\(adderName)' added jobs that wait for '\(job.name)', which is running now; an added job can wait only for jobs of the run that are pending, ready or finished, so this attempt fails and its retry policy decides whether it is tried again. To avoid it, add the waiting jobs from '\(job.name)' itself, or wait with afterAll: on a job that adds both."
                        )
                case .succeeded: break
                case .failed, .cancelled:
                    plan.remaining[index] += 1  // counted down by the cancellation that follows
                    blocked[index] =
                        blocked[index]
                        ?? "dependency '\(job.name)' \(job.state == .failed ? "failed" : "was cancelled")"
                }
            }
        }
        if let conflict { throw conflict }
        plan.cancelled = blocked.sorted { $0.key < $1.key }.map { (index: $0.key, reason: $0.value) }
        plan.groupDependents = groupDependents
        return plan
    }
}
