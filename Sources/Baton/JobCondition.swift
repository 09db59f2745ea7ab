/// The result of evaluating a ``JobCondition``.
public enum ConditionResult: Sendable {
    case satisfied
    case failed(any Error)
}

/// A precondition of a job, evaluated after its dependencies finished and before it becomes ready.
///
/// A condition may
/// - generate dependency jobs that must finish first (``dependencies(for:)``; for example a "sign in"
///   job before "save favourite"); they are added to the guarded job's queue together with it;
/// - ask for exclusivity categories (``exclusivityCategories``), claimed when the job is otherwise
///   ready to run;
/// - evaluate asynchronously to satisfied or failed (``evaluate(for:)``). A job's conditions are
///   evaluated concurrently with each other.
///
/// If a condition fails, the job finishes **failed** without running its body, with a ``JobError``
/// whose code is ``JobError/Code/conditionFailed``, whose message names the condition, and whose
/// ``JobError/underlying`` is the condition's error. (Failed rather than cancelled: nobody asked the
/// job to stop; it could not run.)
///
/// Conditions are evaluated outside every lock, on Swift concurrency's pool.
public protocol JobCondition: Sendable {
    /// Names the condition in errors and diagnostics.
    var name: String { get }
    /// Jobs to run before the guarded job (default: none).
    func dependencies(for job: Job) -> [Job]
    /// Exclusivity categories the guarded job must hold while it executes (default: none).
    var exclusivityCategories: [ExclusivityCategory] { get }
    /// Decides whether the guarded job may run. Called once, after its dependencies finished.
    func evaluate(for job: Job) async -> ConditionResult
}

extension JobCondition {
    public var name: String { "\(type(of: self))" }
    public func dependencies(for job: Job) -> [Job] { [] }
    public var exclusivityCategories: [ExclusivityCategory] { [] }
}

/// A condition that is always satisfied and only contributes categories or dependencies (like
/// ``MutuallyExclusive``): the job skips the asynchronous evaluation step for it, so it claims its
/// categories as soon as it is otherwise ready, in the order jobs became ready.
protocol SatisfiedWithoutEvaluation {}

extension Job {
    /// Adds a condition; see ``JobCondition``.
    ///
    /// - Precondition: The job has not been added to a queue or started. Adding a condition later is a
    ///   bug in the calling code and stops the program with a message naming the job.
    public func addCondition(_ condition: some JobCondition) {
        let state: JobState = mutex.withLock {
            if machine.state == .initialized { conditionList.append(condition) }
            return machine.state
        }
        precondition(
            state == .initialized,
            "Baton: cannot add condition '\(condition.name)' to job '\(name)': it is already \(state). Add conditions before adding the job to a queue."
        )
    }

    /// The job's conditions (empty once it finished).
    public var conditions: [any JobCondition] { mutex.withLock { conditionList } }

    /// The categories the job's conditions ask for.
    var exclusivityCategoriesOfConditions: [ExclusivityCategory] {
        var seen = Set<String>()
        var categories: [ExclusivityCategory] = []
        for condition in conditions {
            for category in condition.exclusivityCategories where seen.insert(category.key).inserted {
                categories.append(category)
            }
        }
        return categories
    }

    /// Evaluates every condition concurrently, then moves on (lock not held).
    func evaluateConditions() {
        let conditions: [any JobCondition] = mutex.withLock {
            let toEvaluate = conditionList.filter { !($0 is any SatisfiedWithoutEvaluation) }
            conditionsEvaluating = toEvaluate.map(\.name)
            return toEvaluate
        }
        let task = Task(priority: priority.taskPriority) {
            let results = await withTaskGroup(of: (Int, ConditionResult).self) { group in
                for (index, condition) in conditions.enumerated() {
                    group.addTask {
                        let result = await condition.evaluate(for: self)
                        self.mutex.withLock {
                            if let at = self.conditionsEvaluating.firstIndex(of: condition.name) {
                                self.conditionsEvaluating.remove(at: at)
                            }
                        }
                        return (index, result)
                    }
                }
                var results = [ConditionResult?](repeating: nil, count: conditions.count)
                for await (index, result) in group { results[index] = result }
                return results
            }
            // The first failure in the order the conditions were added, so the error is deterministic.
            var failure: (any Error)?
            for (condition, result) in zip(conditions, results) {
                if case .failed(let error)? = result {
                    failure = JobError(
                        code: .conditionFailed, jobs: [self.name],
                        message: "job '\(self.name)' did not run: condition '\(condition.name)' failed: \(error)",
                        underlying: error
                    )
                    break
                }
            }
            self.conditionsEvaluated(failure: failure)
        }
        let cancelled = mutex.withLock {
            if machine.state == .evaluatingConditions { conditionTask = task }
            return machine.state != .evaluatingConditions
        }
        if cancelled { task.cancel() }
    }
}
