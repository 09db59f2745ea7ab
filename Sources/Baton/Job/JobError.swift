/// An error that Baton itself reports, with a ``code`` to switch on and a message a person can act on.
///
/// New codes may be added in later versions without breaking code that switches on the ones it knows.
public struct JobError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case dependencyCycle, unfinishedDependencies, notStartable, conditionFailed, timedOut, groupFinished
            case categoryNotHeldByGroup
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The job is part of a cycle of dependencies, which could never start.
        public static let dependencyCycle = Code(.dependencyCycle)
        /// ``Job/start()`` was called while some dependencies had not finished.
        public static let unfinishedDependencies = Code(.unfinishedDependencies)
        /// ``Job/start()`` was called on a job that is in a queue, already started, or finished.
        public static let notStartable = Code(.notStartable)
        /// A condition of the job failed, so its body never ran.
        public static let conditionFailed = Code(.conditionFailed)
        /// The job exceeded its time limit.
        public static let timedOut = Code(.timedOut)
        /// The job was a child of a group that finished before running it (the group was cancelled or
        /// failed before it ran, or the child was added after the group had decided to finish).
        public static let groupFinished = Code(.groupFinished)
        /// The job is a child of a group that holds exclusivity categories, and asked for one the group
        /// does not hold (waiting for it while the group holds others could deadlock).
        public static let categoryNotHeldByGroup = Code(.categoryNotHeldByGroup)

        public var description: String { "\(base)" }
    }

    /// What went wrong.
    public let code: Code
    /// The names of the jobs involved, in a meaningful order (for a cycle: the order of the cycle).
    public let jobs: [String]
    /// A sentence that says what is wrong and what to do about it.
    public let message: String
    /// The error underneath, if any (for example the error a condition failed with).
    public let underlying: (any Error)?

    public init(code: Code, jobs: [String] = [], message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.jobs = jobs
        self.message = message
        self.underlying = underlying
    }

    public var description: String { message }

    static func groupFinished(children: [String], group: String, state: JobState) -> JobError {
        JobError(
            code: .groupFinished, jobs: children + [group],
            message:
                "\(quoted(children)) did not run: \(children.count == 1 ? "it was" : "they were") added to group '\(group)' when it was already \(state). Add children before the group finishes (for example from childDidFinish)."
        )
    }

    static func groupFinished(children: [String], group: String, outcome: JobOutcome) -> JobError {
        JobError(
            code: .groupFinished, jobs: children + [group],
            message:
                "\(quoted(children)) did not run: \(children.count == 1 ? "its" : "their") group '\(group)' finished without running (\(outcome)).",
            underlying: outcome.error)
    }

    static func categoryNotHeldByGroup(job: String, categories: [String], group: String) -> JobError {
        JobError(
            code: .categoryNotHeldByGroup, jobs: [job, group],
            message:
                "job '\(job)' did not run: it asks for exclusivity \(quoted(categories, noun: "category", plural: "categories")) inside group '\(group)', which does not hold \(categories.count == 1 ? "it" : "them"). A child can only use categories its group claimed, and a group claims them when it starts: its own and those of the children it has by then. A job that joins later — a child added while the group runs, a job a child's condition generates — gets none of its own: give the group the child before it starts, or give the category to the group (a MutuallyExclusive condition on the group)."
        )
    }

    private static func quoted(_ names: [String], noun: String = "job", plural: String = "jobs") -> String {
        (names.count == 1 ? noun : plural) + " " + names.map { "'\($0)'" }.joined(separator: ", ")
    }

    static func dependencyCycle(_ names: [String]) -> JobError {
        let path = (names + names.prefix(1)).joined(separator: " → ")
        return JobError(
            code: .dependencyCycle, jobs: names,
            message:
                "dependency cycle: \(path). None of these jobs can ever start; remove one of the links: a dependency, a group's child, or an exclusivity category that a job waits for while a group in the cycle holds it."
        )
    }
}
