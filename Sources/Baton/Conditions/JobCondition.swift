/// The result of evaluating a ``JobCondition``.
public enum ConditionResult: Sendable {
    case satisfied
    case failed(any Error)
}

/// A precondition of a job, evaluated after its dependencies finished and before it becomes ready.
///
/// A condition may
/// - generate dependency jobs that must finish first (``dependencies(for:)``; for example a "sign in"
///   job before "save favourite"); those it made (in no queue yet) are added to the guarded job's queue
///   together with it, wait for the guarded job's own dependencies (except those they are upstream
///   of), and are cancelled if the guarded job is cancelled before it runs. If a generated dependency
///   fails or is cancelled, the condition fails (the guarded job does not run without it); inside
///   ``AllOfConditions``, ``AnyOfConditions`` or ``NegatedCondition`` it is the inner condition that
///   generated it that fails, and the composite combines that with its other answers
///   (`AnyOfConditions([signIn, alreadyAllowed])` is satisfied by the second, `NegatedCondition(signIn)`
///   is satisfied);
/// - ask for exclusivity categories (``exclusivityCategories``), claimed when the job is otherwise
///   ready to run;
/// - decide whether the job may run: at once, on the thread that released the job
///   (``evaluateImmediately(for:)``), or asynchronously (``evaluate(for:)``). A job's asynchronous
///   conditions are evaluated concurrently with each other, in one `Task`; a job whose conditions all
///   answer at once costs no `Task` at all.
///
/// If a condition fails, the job finishes **failed** without running its body, with a ``JobError``
/// whose code is ``JobError/Code/conditionFailed``, whose message names the condition, and whose
/// ``JobError/underlying`` is the condition's error. (Failed rather than cancelled: nobody asked the
/// job to stop; it could not run.)
///
/// Conditions are evaluated outside every lock. If a dependency is added to the job before it starts,
/// its conditions are evaluated again once that dependency finished.
public protocol JobCondition: Sendable {
    /// Names the condition in errors and diagnostics.
    var name: String { get }
    /// Jobs to run before the guarded job (default: none).
    func dependencies(for job: Job) -> [Job]
    /// Exclusivity categories the guarded job must hold while it executes (default: none).
    var exclusivityCategories: [ExclusivityCategory] { get }
    /// Whether the job must evaluate the condition before it may run. `false` for a condition that only
    /// contributes categories or dependencies (like ``MutuallyExclusive``): the job then claims its
    /// categories as soon as its queue starts it, in the order its queue started jobs. Default: `true`.
    var requiresEvaluation: Bool { get }
    /// Decides at once, if the condition can, whether the guarded job may run; `nil` means "ask
    /// ``evaluate(for:)``". Called outside every lock, on the thread that released the job: keep it
    /// quick and never block. The default returns `nil`.
    func evaluateImmediately(for job: Job) -> ConditionResult?
    /// Decides whether the guarded job may run, when ``evaluateImmediately(for:)`` returned `nil`.
    /// The default is satisfied.
    func evaluate(for job: Job) async -> ConditionResult
}

extension JobCondition {
    public var name: String { "\(type(of: self))" }
    public func dependencies(for job: Job) -> [Job] { [] }
    public var exclusivityCategories: [ExclusivityCategory] { [] }
    public var requiresEvaluation: Bool { true }
    public func evaluateImmediately(for job: Job) -> ConditionResult? { nil }
    public func evaluate(for job: Job) async -> ConditionResult { evaluateImmediately(for: job) ?? .satisfied }
}

extension Job {
    /// Adds a condition; see ``JobCondition``.
    ///
    /// - Precondition: The job has not been added to a queue or started. Adding a condition later is a
    ///   bug in the calling code and stops the program with a message naming the job.
    public func addCondition(_ condition: some JobCondition) {
        // Read once, outside the lock (user code): what the condition needs from the job's lifecycle.
        let categories = condition.exclusivityCategories
        let evaluated = condition.requiresEvaluation
        let state: JobState = withCore { core in
            if case .initialized = core.lifecycle.state {
                let extras = core.extrasForWriting()
                if extras.conditions.isEmpty { extras.conditions.reserveCapacity(2) }
                extras.conditions.append(condition)
                if evaluated { extras.evaluatedConditions += 1 }
                if extras.categories.isEmpty && categories.count == 1 {
                    extras.categories = categories  // shares the condition's array
                } else {
                    for category in categories where !extras.categories.contains(where: { $0.key == category.key }) {
                        extras.categories.append(category)
                    }
                }
            }
            return core.lifecycle.publicState
        }
        if state != .initialized {
            fatalError(
                "Baton: cannot add condition '\(condition.name)' to job '\(name)': it is already \(state). Add conditions before adding the job to a queue."
            )
        }
    }

    /// The job's conditions (empty once it finished).
    public var conditions: [any JobCondition] { withCore { $0.extras?.conditions ?? [] } }

    /// The categories the job's conditions ask for (each key once), as they said when they were added.
    var categoriesOfConditions: [ExclusivityCategory] { withCore { $0.extras?.categories ?? [] } }
}
