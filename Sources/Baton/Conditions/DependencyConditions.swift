/// Satisfied when none of the job's dependencies failed — and, unless you pass
/// `ignoringCancellations: true`, none was cancelled either. Fails naming the first such dependency.
///
/// A dependency counts as cancelled when someone asked it to cancel (``Job/isCancelled``), even if its
/// body then completed and it ended ``JobOutcome/succeeded`` — as in ProcedureKit's
/// `NoFailedDependenciesCondition`: a job that depends on work someone called off does not run on
/// what that work left behind. Failures are looked for first, so a failed dependency is named even
/// when another was cancelled.
///
/// Without this condition a job runs whatever its dependencies' outcomes were. It answers at once.
public struct NoFailedDependencies: JobCondition {
    /// Whether cancelled dependencies are let through (only failures fail the condition).
    public let ignoresCancellations: Bool

    /// - Parameter ignoringCancellations: `true` to fail only on failed dependencies, letting through
    ///   dependencies that were cancelled (and did not fail).
    public init(ignoringCancellations: Bool = false) {
        ignoresCancellations = ignoringCancellations
    }

    public func evaluateImmediately(for job: Job) -> ConditionResult? {
        let dependencies = job.dependencies
        for dependency in dependencies {
            if let outcome = dependency.outcomeIfDecided, case .failed = outcome {
                return .failed(DependencyOutcomeError(dependencyName: dependency.name, outcome: outcome))
            }
        }
        if !ignoresCancellations, let error = firstCancelled(among: dependencies) { return .failed(error) }
        return .satisfied
    }
}

/// Satisfied when none of the job's dependencies was cancelled. Fails naming the first cancelled one.
///
/// A dependency counts as cancelled when someone asked it to cancel (``Job/isCancelled``), whatever its
/// outcome: one cancelled while running whose body then completed its work anyway ended
/// ``JobOutcome/succeeded``, yet it fails this condition (as PSOperations' `NoCancelledDependencies`
/// does). It answers at once.
public struct NoCancelledDependencies: JobCondition {
    public init() {}

    public func evaluateImmediately(for job: Job) -> ConditionResult? {
        firstCancelled(among: job.dependencies).map { .failed($0) } ?? .satisfied
    }
}

/// The error naming the first of `dependencies` that was asked to cancel, if any.
private func firstCancelled(among dependencies: [Job]) -> DependencyOutcomeError? {
    for dependency in dependencies where dependency.isCancelled || dependency.outcomeIfDecided?.isCancelled == true {
        return DependencyOutcomeError(
            dependencyName: dependency.name, outcome: dependency.outcomeIfDecided ?? .cancelled(CancellationError()),
            wasCancelled: true)
    }
    return nil
}

/// Why ``NoFailedDependencies`` or ``NoCancelledDependencies`` failed.
public struct DependencyOutcomeError: Error, Sendable, CustomStringConvertible {
    /// The name of the dependency.
    public let dependencyName: String
    /// How the dependency ended (failed or cancelled, with its error or reason — or succeeded, for one
    /// that was asked to cancel and completed its work anyway).
    public let outcome: JobOutcome
    /// Whether someone asked the dependency to cancel (whatever its outcome).
    public let wasCancelled: Bool

    init(dependencyName: String, outcome: JobOutcome, wasCancelled: Bool = false) {
        self.dependencyName = dependencyName
        self.outcome = outcome
        self.wasCancelled = wasCancelled || outcome.isCancelled
    }

    public var description: String {
        switch outcome {
        case .failed(let error): "dependency '\(dependencyName)' failed (\(error))"
        case .cancelled(let reason): "dependency '\(dependencyName)' was cancelled (\(reason))"
        case .succeeded:
            wasCancelled
                ? "dependency '\(dependencyName)' was cancelled (it was asked to cancel while it ran, and completed)"
                : "dependency '\(dependencyName)' succeeded"
        }
    }
}
