// TEMPORARY — delete at merge.
//
// A local copy of the condition API that is being built in `main` (Baton's `JobCondition`), so that
// ``ReachabilityCondition`` compiles on this branch. When the branch is merged, delete this file:
// `ReachabilityCondition` then conforms to Baton's own `JobCondition`, and callers can write
// `download.addCondition(ReachabilityCondition(url: url))`.

public import Baton

/// The result of evaluating a condition. (TEMPORARY copy of Baton's type; see the file comment.)
public enum ConditionResult: Sendable {
    case satisfied
    case failed(any Error)
}

/// A precondition of a job. (TEMPORARY copy of Baton's protocol; see the file comment.)
public protocol JobCondition: Sendable {
    /// Used in error messages.
    var name: String { get }
    /// A job that must finish before the condition is evaluated; `nil` by default.
    func dependency(for job: Job) -> Job?
    /// Categories of mutual exclusion the job joins; empty by default.
    var exclusivityCategories: [String] { get }
    /// Decides whether the job may run.
    func evaluate(for job: Job) async -> ConditionResult
}

extension JobCondition {
    public func dependency(for job: Job) -> Job? { nil }
    public var exclusivityCategories: [String] { [] }
}
