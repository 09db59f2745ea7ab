/// An error of a durable store or worker, with a ``code`` to switch on and a message a person can act on.
///
/// New codes may be added in later versions without breaking code that switches on the ones it knows.
public struct DurableError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case dependencyCycle, invalidGraph, unknownRun, unknownJob, notAStore, newerSchema, decoding, noWorker
            case leaseLost, storeFailure, invalidConfiguration, uniqueKeyConflict, misuse, conflict
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The submitted graph has a cycle of dependencies; ``DurableError/jobs`` lists it in order.
        public static let dependencyCycle = Code(.dependencyCycle)
        /// The submitted graph is malformed (a duplicate name, an edge to a job that is not in it, …).
        public static let invalidGraph = Code(.invalidGraph)
        /// No run with that identity is in the store (it was never submitted, or has been pruned).
        public static let unknownRun = Code(.unknownRun)
        /// No job with that identity is in the store.
        public static let unknownJob = Code(.unknownJob)
        /// The file is not a job store (not SQLite, or a SQLite database of something else).
        public static let notAStore = Code(.notAStore)
        /// The store was written by a newer version of BatonDurable.
        public static let newerSchema = Code(.newerSchema)
        /// A job's input or output does not decode as the type its code expects.
        public static let decoding = Code(.decoding)
        /// A worker was given no jobs, or two jobs with the same kind.
        public static let noWorker = Code(.noWorker)
        /// The worker's lease on the job ended (it expired and another worker took the job, or the job was
        /// cancelled); the job's attempt was abandoned.
        public static let leaseLost = Code(.leaseLost)
        /// The database failed (I/O, locked beyond the busy timeout, …); ``DurableError/underlying`` says how.
        public static let storeFailure = Code(.storeFailure)
        /// A worker's configuration cannot work (a lease no longer than its renewal interval, an interval
        /// of zero, …); the message says which setting to change.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// A run with the unique key exists, and its graph has another shape than the one submitted, so
        /// the submitted graph's handles would not name its jobs.
        public static let uniqueKeyConflict = Code(.uniqueKeyConflict)
        /// A call that cannot work as made (a transaction on another database than the store's, a
        /// transactional completion asked of a worker whose store cannot give one, …); the message says
        /// what to do instead.
        public static let misuse = Code(.misuse)
        /// What was asked conflicts with what the store holds at this moment, and may work when tried
        /// again later: jobs added by a job that wait for a job running now. A worker fails such an
        /// attempt as retryable, so its job's retry policy tries it again.
        public static let conflict = Code(.conflict)

        public var description: String { "\(base)" }
    }

    public let code: Code
    /// The names of the jobs involved (for a cycle: in the order of the cycle).
    public let jobs: [String]
    /// A sentence that says what is wrong and what to do about it.
    public let message: String
    public let underlying: (any Error)?
    /// The store refused the jobs an attempt added, in a completion in the job's own transaction: the
    /// worker fails that attempt at once (as `finish` fails the job) unless the refusal is a
    /// ``Code/conflict``, which its retry policy may try again.
    package private(set) var refusesAddedJobs = false

    public init(code: Code, jobs: [String] = [], message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.jobs = jobs
        self.message = message
        self.underlying = underlying
    }

    public var description: String { message }

    /// How the message of a refusal of an attempt's added jobs begins, and its job's last error.
    package static let addedJobsRefused = "its added jobs were refused: "

    /// `error`, a refusal of an attempt's added jobs, as a completion in the job's own transaction
    /// throws it: its message says so (as the job's last error does when `finish` refuses them).
    package static func refusingAddedJobs(_ error: DurableError) -> DurableError {
        var refusal = DurableError(
            code: error.code, jobs: error.jobs, message: addedJobsRefused + error.message,
            underlying: error.underlying)
        refusal.refusesAddedJobs = true
        return refusal
    }
}
