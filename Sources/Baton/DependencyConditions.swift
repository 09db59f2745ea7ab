/// Satisfied when none of the job's dependencies failed. Fails naming the first failed dependency.
///
/// Without this condition a job runs whatever its dependencies' outcomes were.
public struct NoFailedDependencies: JobCondition {
    public init() {}

    public func evaluate(for job: Job) async -> ConditionResult {
        for dependency in job.dependencies {
            if case .failed(let error)? = dependency.finishedOutcome {
                return .failed(DependencyOutcomeError(dependency: dependency.name, outcome: "failed", reason: error))
            }
        }
        return .satisfied
    }
}

/// Satisfied when none of the job's dependencies was cancelled. Fails naming the first cancelled one.
public struct NoCancelledDependencies: JobCondition {
    public init() {}

    public func evaluate(for job: Job) async -> ConditionResult {
        for dependency in job.dependencies {
            if case .cancelled(let reason)? = dependency.finishedOutcome {
                return .failed(
                    DependencyOutcomeError(dependency: dependency.name, outcome: "was cancelled", reason: reason))
            }
        }
        return .satisfied
    }
}

/// Why ``NoFailedDependencies`` or ``NoCancelledDependencies`` failed.
public struct DependencyOutcomeError: Error, Sendable, CustomStringConvertible {
    /// The name of the dependency.
    public let dependency: String
    /// "failed" or "was cancelled".
    public let outcome: String
    /// The dependency's error or cancellation reason.
    public let reason: any Error

    public var description: String { "dependency '\(dependency)' \(outcome) (\(reason))" }
}
