/// Satisfied when the wrapped condition fails, and fails when it is satisfied.
///
/// The wrapped condition's generated dependencies and categories still apply.
public struct NegatedCondition<Wrapped: JobCondition>: JobCondition {
    public let wrapped: Wrapped

    public init(_ wrapped: Wrapped) {
        self.wrapped = wrapped
    }

    public var name: String { "not(\(wrapped.name))" }
    public func dependencies(for job: Job) -> [Job] { wrapped.dependencies(for: job) }
    public var exclusivityCategories: [ExclusivityCategory] { wrapped.exclusivityCategories }

    public func evaluate(for job: Job) async -> ConditionResult {
        switch await wrapped.evaluate(for: job) {
        case .satisfied: .failed(ConditionNotMet(message: "'\(wrapped.name)' was satisfied"))
        case .failed: .satisfied
        }
    }
}

/// The wrapped condition without the dependencies it would generate: "only if already signed in,
/// don't ask".
public struct SilentCondition<Wrapped: JobCondition>: JobCondition {
    public let wrapped: Wrapped

    public init(_ wrapped: Wrapped) {
        self.wrapped = wrapped
    }

    public var name: String { "silent(\(wrapped.name))" }
    public var exclusivityCategories: [ExclusivityCategory] { wrapped.exclusivityCategories }
    public func evaluate(for job: Job) async -> ConditionResult { await wrapped.evaluate(for: job) }
}

/// Satisfied when every one of its conditions is; they are evaluated concurrently.
public struct AllOfConditions: JobCondition {
    public let conditions: [any JobCondition]

    public init(_ conditions: [any JobCondition]) {
        self.conditions = conditions
    }

    public var name: String { "allOf(\(conditions.map(\.name).joined(separator: ", ")))" }
    public func dependencies(for job: Job) -> [Job] { conditions.flatMap { $0.dependencies(for: job) } }
    public var exclusivityCategories: [ExclusivityCategory] { conditions.flatMap(\.exclusivityCategories) }

    public func evaluate(for job: Job) async -> ConditionResult {
        let results = await evaluateAll(conditions, for: job)
        for (condition, result) in zip(conditions, results) {
            if case .failed(let error) = result {
                return .failed(ConditionNotMet(message: "'\(condition.name)' failed: \(error)"))
            }
        }
        return .satisfied
    }
}

/// Satisfied when at least one of its conditions is; they are evaluated concurrently.
public struct AnyOfConditions: JobCondition {
    public let conditions: [any JobCondition]

    public init(_ conditions: [any JobCondition]) {
        self.conditions = conditions
    }

    public var name: String { "anyOf(\(conditions.map(\.name).joined(separator: ", ")))" }
    public func dependencies(for job: Job) -> [Job] { conditions.flatMap { $0.dependencies(for: job) } }
    public var exclusivityCategories: [ExclusivityCategory] { conditions.flatMap(\.exclusivityCategories) }

    public func evaluate(for job: Job) async -> ConditionResult {
        let results = await evaluateAll(conditions, for: job)
        if results.contains(where: { if case .satisfied = $0 { true } else { false } }) { return .satisfied }
        let reasons = zip(conditions, results).map { condition, result in
            if case .failed(let error) = result { "'\(condition.name)': \(error)" } else { "'\(condition.name)'" }
        }
        return .failed(ConditionNotMet(message: "none was satisfied: \(reasons.joined(separator: "; "))"))
    }
}

/// A condition made of a closure: return `true` to satisfy it, `false` or throw to fail it.
public struct ClosureCondition: JobCondition {
    public let name: String
    private let body: @Sendable (Job) async throws -> Bool

    public init(name: String, _ body: @escaping @Sendable (Job) async throws -> Bool) {
        self.name = name
        self.body = body
    }

    public func evaluate(for job: Job) async -> ConditionResult {
        do {
            return try await body(job) ? .satisfied : .failed(ConditionNotMet(message: "'\(name)' returned false"))
        } catch {
            return .failed(error)
        }
    }
}

/// A condition was not met (the message says which and why).
public struct ConditionNotMet: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

func evaluateAll(_ conditions: [any JobCondition], for job: Job) async -> [ConditionResult] {
    await withTaskGroup(of: (Int, ConditionResult).self) { group in
        for (index, condition) in conditions.enumerated() {
            group.addTask { (index, await condition.evaluate(for: job)) }
        }
        var results = [ConditionResult](repeating: .satisfied, count: conditions.count)
        for await (index, result) in group { results[index] = result }
        return results
    }
}
