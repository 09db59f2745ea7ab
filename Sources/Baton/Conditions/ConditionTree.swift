/// Which condition in a tree of composite conditions generated each dependency, and what those that
/// failed mean for the conditions above them.
///
/// The rule is "a failed generated dependency fails the condition that generated it". For a condition
/// added to a job that is the job's condition, and the job fails at once. Inside ``AllOfConditions``,
/// ``AnyOfConditions`` or ``NegatedCondition`` it is the inner condition that generated it: the
/// composite then combines that failure with its other conditions' answers as it combines any other
/// (`anyOf(signIn, alreadyAllowed)` is satisfied by the second; `not(signIn)` is satisfied). Each
/// condition is named by its path: its index among the job's conditions, then among each composite's.
///
/// Both halves ride on task-locals set only where they matter — while a composite added to a job
/// generates its dependencies, and while a condition is evaluated above a failed generated dependency —
/// so a job without composites pays nothing.
enum ConditionTree {
    /// The paths of the inner conditions that generated each job during one top-level
    /// `dependencies(for:)` call, by job (one job may come from several).
    final class Generation: @unchecked Sendable {
        // @unchecked Sendable: used only by the thread making the synchronous `dependencies(for:)` call.
        var paths: [ObjectIdentifier: [[Int]]] = [:]
        var current: [Int] = []
    }

    /// What a composite being evaluated knows: its own path, and the failures of generated dependencies
    /// (the error, by the path of the condition that generated it).
    struct Evaluation: Sendable {
        var path: [Int]
        var failures: [[Int]: any Error]
    }

    @TaskLocal static var generation: Generation?
    @TaskLocal static var evaluation: Evaluation?

    /// The jobs `condition` (one of the job's) generates, with the paths below it of the inner
    /// conditions that generated each (none: the condition itself).
    static func generate(
        _ condition: any JobCondition, for job: Job
    ) -> (jobs: [Job], paths: [ObjectIdentifier: [[Int]]]) {
        guard condition is any CompositeCondition else {
            // (Not inside an outer job's generation: a condition that adds jobs as it generates.)
            guard generation != nil else { return (condition.dependencies(for: job), [:]) }
            return ($generation.withValue(nil) { condition.dependencies(for: job) }, [:])
        }
        let generation = Generation()
        let jobs = $generation.withValue(generation) { condition.dependencies(for: job) }
        return (jobs, generation.paths)
    }

    /// A composite's generated dependencies: each child's, tagged with the child's path — unless an
    /// inner composite under that child tagged it already (the innermost condition that generated it
    /// is the one it fails). A job two children return is tagged with both.
    static func dependencies(of children: [any JobCondition], for job: Job) -> [Job] {
        guard let generation else { return children.flatMap { $0.dependencies(for: job) } }
        let parent = generation.current
        var all: [Job] = []
        for (index, child) in children.enumerated() {
            let path = parent + [index]
            generation.current = path
            let jobs = child.dependencies(for: job)
            for made in jobs {
                let tags = generation.paths[ObjectIdentifier(made), default: []]
                guard !tags.contains(where: { $0.starts(with: path) }) else { continue }
                generation.paths[ObjectIdentifier(made)] = tags + [path]
            }
            all += jobs
        }
        generation.current = parent
        return all
    }

    /// The failure of child `index` of the composite being evaluated, when a dependency it generated
    /// failed.
    static func failure(ofChild index: Int) -> (any Error)? {
        guard let evaluation else { return nil }
        return evaluation.failures[evaluation.path + [index]]
    }

    /// Whether a failed generated dependency lies under `path` (so the condition there is evaluated even
    /// if it asks for no evaluation).
    static func hasFailure(under path: [Int], in failures: [[Int]: any Error]) -> Bool {
        failures.keys.contains { $0.count > path.count && Array($0.prefix(path.count)) == path }
    }

    /// Whether child `index` of the composite being evaluated must be evaluated.
    static func mustEvaluate(_ child: any JobCondition, at index: Int) -> Bool {
        if child.requiresEvaluation { return true }
        guard let evaluation else { return false }
        return hasFailure(under: evaluation.path + [index], in: evaluation.failures)
    }

    /// Runs `body` (child `index`'s evaluation) as evaluated at the child's path.
    static func inChild<Result>(_ index: Int, _ body: () -> Result) -> Result {
        guard let evaluation else { return body() }
        return $evaluation.withValue(Evaluation(path: evaluation.path + [index], failures: evaluation.failures)) {
            body()
        }
    }

    static func inChild<Result: Sendable>(_ index: Int, _ body: () async -> Result) async -> Result {
        guard let evaluation else { return await body() }
        return await $evaluation.withValue(
            Evaluation(path: evaluation.path + [index], failures: evaluation.failures)
        ) { await body() }
    }
}

/// The composites Baton defines, whose inner conditions' generated dependencies are told apart.
protocol CompositeCondition {}
extension AllOfConditions: CompositeCondition {}
extension AnyOfConditions: CompositeCondition {}
extension NegatedCondition: CompositeCondition {}
