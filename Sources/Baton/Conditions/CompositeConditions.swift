/// Satisfied when the wrapped condition fails, and fails when it is satisfied.
///
/// The wrapped condition's generated dependencies and categories still apply.
public struct NegatedCondition<Wrapped: JobCondition>: JobCondition {
    public let wrapped: Wrapped

    public init(_ wrapped: Wrapped) {
        self.wrapped = wrapped
    }

    public var name: String { "not(\(wrapped.name))" }
    public func dependencies(for job: Job) -> [Job] { ConditionTree.dependencies(of: [wrapped], for: job) }
    public var exclusivityCategories: [ExclusivityCategory] { wrapped.exclusivityCategories }
    /// Only a condition that is evaluated can be negated; one that only adds categories stays that.
    public var requiresEvaluation: Bool { wrapped.requiresEvaluation }

    /// A dependency the wrapped condition generated that failed fails it: the negation is satisfied.
    public func evaluateImmediately(for job: Job) -> ConditionResult? {
        if let error = ConditionTree.failure(ofChild: 0) { return negate(.failed(error)) }
        return ConditionTree.inChild(0) { wrapped.evaluateImmediately(for: job) }.map(negate)
    }

    public func evaluate(for job: Job) async -> ConditionResult {
        if let error = ConditionTree.failure(ofChild: 0) { return negate(.failed(error)) }
        let wrapped = wrapped
        return negate(await ConditionTree.inChild(0) { await wrapped.evaluate(for: job) })
    }

    private func negate(_ result: ConditionResult) -> ConditionResult {
        switch result {
        case .satisfied: .failed(ConditionNotMet(condition: name, reason: "'\(wrapped.name)' was satisfied"))
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
    public var requiresEvaluation: Bool { wrapped.requiresEvaluation }
    public func evaluateImmediately(for job: Job) -> ConditionResult? { wrapped.evaluateImmediately(for: job) }
    public func evaluate(for job: Job) async -> ConditionResult { await wrapped.evaluate(for: job) }
}

/// Satisfied when every one of its conditions is; they are evaluated concurrently.
public struct AllOfConditions: JobCondition {
    public let conditions: [any JobCondition]

    public init(_ conditions: [any JobCondition]) {
        self.conditions = conditions
    }

    public var name: String { "allOf(\(conditions.map(\.name).joined(separator: ", ")))" }
    public func dependencies(for job: Job) -> [Job] { ConditionTree.dependencies(of: conditions, for: job) }
    public var exclusivityCategories: [ExclusivityCategory] { conditions.flatMap(\.exclusivityCategories) }
    public var requiresEvaluation: Bool { conditions.contains { $0.requiresEvaluation } }

    public func evaluateImmediately(for job: Job) -> ConditionResult? {
        evaluateAllImmediately(conditions, for: job).map(combine)
    }

    public func evaluate(for job: Job) async -> ConditionResult {
        combine(await evaluateAll(conditions, for: job))
    }

    private func combine(_ results: [ConditionResult]) -> ConditionResult {
        for (condition, result) in zip(conditions, results) {
            if case .failed(let error) = result {
                return .failed(ConditionNotMet(condition: name, reason: "'\(condition.name)' failed: \(error)"))
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
    public func dependencies(for job: Job) -> [Job] { ConditionTree.dependencies(of: conditions, for: job) }
    public var exclusivityCategories: [ExclusivityCategory] { conditions.flatMap(\.exclusivityCategories) }
    /// Satisfied at once (without evaluation) when one of its conditions needs none.
    public var requiresEvaluation: Bool { conditions.allSatisfy { $0.requiresEvaluation } }

    public func evaluateImmediately(for job: Job) -> ConditionResult? {
        evaluateAllImmediately(conditions, for: job).map(combine)
    }

    public func evaluate(for job: Job) async -> ConditionResult {
        combine(await evaluateAll(conditions, for: job))
    }

    private func combine(_ results: [ConditionResult]) -> ConditionResult {
        if results.contains(where: { if case .satisfied = $0 { true } else { false } }) { return .satisfied }
        let reasons = zip(conditions, results).map { condition, result in
            if case .failed(let error) = result { "'\(condition.name)': \(error)" } else { "'\(condition.name)'" }
        }
        return .failed(
            ConditionNotMet(condition: name, reason: "none was satisfied: \(reasons.joined(separator: "; "))"))
    }
}

/// A condition made of a closure: return `true` to satisfy it, `false` or throw to fail it.
///
/// ```swift
/// save.addCondition(ClosureCondition(name: "signed in") { _ in session.isSignedIn })   // answers at once
/// save.addCondition(ClosureCondition(name: "server up") { _ in try await ping() })     // asynchronous
/// ```
///
/// A synchronous closure is evaluated at once on the thread that released the job (no `Task`); an
/// `async` one in a `Task`.
public struct ClosureCondition: JobCondition {
    /// The name and the closure, in one shared object: the condition is one reference, which fits in
    /// an `any JobCondition` without a box of its own each time it is added to a job.
    private let storage: Storage

    private final class Storage: Sendable {
        let name: String
        let body: Body

        init(name: String, body: Body) {
            self.name = name
            self.body = body
        }
    }

    private enum Body: Sendable {
        case immediate(@Sendable (Job) throws -> Bool)
        case later(@Sendable (Job) async throws -> Bool)
    }

    public var name: String { storage.name }
    private var body: Body { storage.body }

    /// A condition answered at once, without a `Task`. Keep `body` quick and never block in it.
    public init(name: String, _ body: @escaping @Sendable (Job) throws -> Bool) {
        storage = Storage(name: name, body: .immediate(body))
    }

    /// A condition answered asynchronously.
    @_disfavoredOverload
    public init(name: String, _ body: @escaping @Sendable (Job) async throws -> Bool) {
        storage = Storage(name: name, body: .later(body))
    }

    public func evaluateImmediately(for job: Job) -> ConditionResult? {
        guard case .immediate(let body) = body else { return nil }
        do {
            return try body(job) ? .satisfied : .failed(ConditionNotMet(condition: name, reason: "it returned false"))
        } catch {
            return .failed(error)
        }
    }

    public func evaluate(for job: Job) async -> ConditionResult {
        switch body {
        case .immediate:
            return evaluateImmediately(for: job) ?? .satisfied
        case .later(let body):
            do {
                return try await body(job)
                    ? .satisfied : .failed(ConditionNotMet(condition: name, reason: "it returned false"))
            } catch {
                return .failed(error)
            }
        }
    }
}

/// A condition was not met: which one, and why.
public struct ConditionNotMet: Error, Sendable, CustomStringConvertible {
    /// The condition's name.
    public let condition: String
    /// Why it was not met.
    public let reason: String

    public init(condition: String, reason: String) {
        self.condition = condition
        self.reason = reason
    }

    public var description: String { reason }
}

/// The answers of a composite's conditions, each given at once, or `nil` if one cannot answer at once.
/// One whose generated dependency failed has failed (see ``ConditionTree``).
func evaluateAllImmediately(_ conditions: [any JobCondition], for job: Job) -> [ConditionResult]? {
    var results: [ConditionResult] = []
    for (index, condition) in conditions.enumerated() {
        if let error = ConditionTree.failure(ofChild: index) {
            results.append(.failed(error))
            continue
        }
        guard ConditionTree.mustEvaluate(condition, at: index) else {
            results.append(.satisfied)
            continue
        }
        guard let result = ConditionTree.inChild(index, { condition.evaluateImmediately(for: job) }) else { return nil }
        results.append(result)
    }
    return results
}

func evaluateAll(_ conditions: [any JobCondition], for job: Job) async -> [ConditionResult] {
    await withTaskGroup(of: (Int, ConditionResult).self) { group in
        var results = [ConditionResult](repeating: .satisfied, count: conditions.count)
        for (index, condition) in conditions.enumerated() {
            if let error = ConditionTree.failure(ofChild: index) {
                results[index] = .failed(error)
                continue
            }
            guard ConditionTree.mustEvaluate(condition, at: index) else { continue }
            group.addTask { (index, await ConditionTree.inChild(index) { await condition.evaluate(for: job) }) }
        }
        for await (index, result) in group { results[index] = result }
        return results
    }
}
