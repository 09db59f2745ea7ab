/// Lets at most one job (or ``ExclusivityCategory/limit`` jobs) of a category execute at once, across
/// every queue of an ``ExclusivityScope``.
///
/// ```swift
/// enum Alert {}
/// showAlert.addCondition(MutuallyExclusive<Alert>())          // one alert at a time
/// download.addCondition(MutuallyExclusive(category: "downloads", limit: 2))
/// ```
///
/// The category is claimed when the job's queue starts it (the job holds its slot while it waits for
/// the category) and released when it finishes; a
/// job with several categories takes them all at once. If jobs ask for one category with different
/// limits, the smallest limit asked for so far applies.
public struct MutuallyExclusive<Category>: JobCondition {
    /// Its one category, kept as the array that ``exclusivityCategories`` returns: a job given this
    /// condition shares it instead of making its own (and the condition fits in an `any JobCondition`
    /// without a box).
    public let exclusivityCategories: [ExclusivityCategory]
    public var category: ExclusivityCategory { exclusivityCategories[0] }

    /// Exclusivity named after the type `Category`.
    public init(limit: Int = 1) {
        exclusivityCategories = [.type(Category.self, limit: limit)]
    }

    public var name: String { "MutuallyExclusive(\(category))" }
    /// It only asks for its category: nothing to evaluate.
    public var requiresEvaluation: Bool { false }
    public func evaluate(for job: Job) async -> ConditionResult { .satisfied }
}

extension MutuallyExclusive where Category == ExclusivityCategory {
    /// Exclusivity named by a string key, with an optional count: at most `limit` holders at once.
    public init(category key: String, limit: Int = 1) {
        exclusivityCategories = [ExclusivityCategory(key, limit: limit)]
    }

    /// Exclusivity for a category value.
    public init(_ category: ExclusivityCategory) {
        exclusivityCategories = [category]
    }
}
