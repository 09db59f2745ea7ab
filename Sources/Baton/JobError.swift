/// An error that Baton itself reports, with a ``code`` to switch on and a message a person can act on.
///
/// New codes may be added in later versions without breaking code that switches on the ones it knows.
public struct JobError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case dependencyCycle, unfinishedDependencies, notStartable, conditionFailed, timedOut
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

    static func dependencyCycle(_ names: [String]) -> JobError {
        let path = (names + names.prefix(1)).joined(separator: " → ")
        return JobError(
            code: .dependencyCycle, jobs: names,
            message: "dependency cycle: \(path). None of these jobs can ever start; remove one of the dependencies."
        )
    }
}
