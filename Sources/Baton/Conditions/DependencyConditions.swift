/// Satisfied when none of the job's dependencies failed. Fails naming the first failed dependency.
///
/// Without this condition a job runs whatever its dependencies' outcomes were. It answers at once.
public struct NoFailedDependencies: JobCondition {
    public init() {}

    public func evaluateImmediately(for job: Job) -> ConditionResult? {
        for dependency in job.dependencies {
            if case .failed? = dependency.outcomeIfDecided {
                return .failed(
                    DependencyOutcomeError(dependencyName: dependency.name, outcome: dependency.outcomeIfDecided!))
            }
        }
        return .satisfied
    }
}

/// Satisfied when none of the job's dependencies was cancelled. Fails naming the first cancelled one.
/// It answers at once.
public struct NoCancelledDependencies: JobCondition {
    public init() {}

    public func evaluateImmediately(for job: Job) -> ConditionResult? {
        for dependency in job.dependencies {
            if case .cancelled? = dependency.outcomeIfDecided {
                return .failed(
                    DependencyOutcomeError(dependencyName: dependency.name, outcome: dependency.outcomeIfDecided!))
            }
        }
        return .satisfied
    }
}

/// Why ``NoFailedDependencies`` or ``NoCancelledDependencies`` failed.
public struct DependencyOutcomeError: Error, Sendable, CustomStringConvertible {
    /// The name of the dependency.
    public let dependencyName: String
    /// How the dependency ended (failed or cancelled, with its error or reason).
    public let outcome: JobOutcome

    public var description: String {
        switch outcome {
        case .failed(let error): "dependency '\(dependencyName)' failed (\(error))"
        case .cancelled(let reason): "dependency '\(dependencyName)' was cancelled (\(reason))"
        case .succeeded: "dependency '\(dependencyName)' succeeded"
        }
    }
}
