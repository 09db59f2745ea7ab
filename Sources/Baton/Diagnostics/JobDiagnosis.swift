/// Why one unfinished job is not running (yet), as a value for code and as text for a person.
public struct JobDiagnosis: Sendable, CustomStringConvertible {
    /// Something a job waits for.
    public enum Blocker: Sendable, Equatable, CustomStringConvertible {
        /// Dependencies that have not finished, with their states and queues.
        case dependencies([Dependency])
        /// Dependencies that the job's conditions generated and that have not finished.
        case generatedDependencies([Dependency])
        /// Conditions still being evaluated, by name.
        case conditions([String])
        /// An exclusivity category that is full, with the jobs holding it.
        case exclusivity(category: String, limit: Int, heldBy: [String])
        /// The job is ready but its queue is suspended.
        case suspendedQueue(String)
        /// The job is ready but its queue already runs as many jobs as it may.
        case concurrencyLimit(running: Int, limit: Int)

        public var description: String {
            switch self {
            case .dependencies(let dependencies):
                "dependencies " + dependencies.map(\.description).joined(separator: ", ")
            case .generatedDependencies(let dependencies):
                "dependencies its conditions generated " + dependencies.map(\.description).joined(separator: ", ")
            case .conditions(let names):
                "conditions still evaluating: " + names.map { "'\($0)'" }.joined(separator: ", ")
            case .exclusivity(let category, let limit, let holders):
                "exclusivity category '\(category)'" + (limit > 1 ? " (at most \(limit))" : "")
                    + " held by "
                    + (holders.isEmpty
                        ? "nobody (it is next in line)" : holders.map { "'\($0)'" }.joined(separator: ", "))
            case .suspendedQueue(let name):
                "queue '\(name)' is suspended"
            case .concurrencyLimit(let running, let limit):
                "a free slot: its queue runs \(running) of at most \(limit) jobs"
            }
        }
    }

    /// An unfinished dependency.
    public struct Dependency: Sendable, Equatable, CustomStringConvertible {
        public let name: String
        public let state: JobState
        /// The dependency's queue, or `nil` if it is in none (then nothing will ever start it).
        public let queue: String?

        public init(name: String, state: JobState, queue: String?) {
            self.name = name
            self.state = state
            self.queue = queue
        }

        public var description: String {
            "'\(name)' (\(state)"
                + (queue.map { " in queue '\($0)'" } ?? ", in no queue: add it to one or nothing will start it") + ")"
        }
    }

    public let jobName: String
    public let jobID: UInt64
    public let state: JobState
    public let isCancelled: Bool
    /// What the job waits for; empty when it is executing or about to start.
    public let blockers: [Blocker]
    /// For an executing group: what each of its unfinished children waits for.
    public let children: [JobDiagnosis]
    /// For a group nested deeper than the report descends: its children are not listed.
    public let childrenNotShown: Bool
    /// The job's own priority.
    public var priority: JobPriority = .normal
    /// The priority it runs at: higher than ``priority`` while a job of higher priority waits for it.
    public var effectivePriority: JobPriority = .normal
    /// When escalated: the waiter of the highest priority that waits for it directly (a dependent, or
    /// for a child its group).
    public var escalatedBy: String?

    public var description: String {
        summary
    }

    /// The job's own line, without its children.
    var summary: String {
        let escalated =
            effectivePriority > priority
            ? ", priority \(priority) raised to \(effectivePriority)\(escalatedBy.map { " by '\($0)', which waits for it" } ?? "")"
            : ""
        let head = "'\(jobName)' (\(state)\(isCancelled ? ", cancelled" : "")\(escalated))"
        if !blockers.isEmpty { return head + " waits for " + blockers.map(\.description).joined(separator: "; ") }
        if !children.isEmpty { return head + " waits for its children:" }
        if childrenNotShown { return head + " waits for its children (nested too deep to list)" }
        return head + (state == .executing || state == .finishing ? " is running" : " is about to start")
    }

    /// The job's line and its children's, as a list `depth` levels deep.
    func lines(depth: Int) -> [String] {
        [String(repeating: "  ", count: depth) + "- " + summary] + children.flatMap { $0.lines(depth: depth + 1) }
    }
}

/// A report of what every unfinished job of a queue waits for.
public struct QueueDiagnosis: Sendable, CustomStringConvertible {
    public let queueName: String
    public let isSuspended: Bool
    public let runningJobs: Int
    public let maxConcurrentJobs: Int
    /// The queue's bound on unfinished jobs (``JobQueue/maxUnfinishedJobs``), if it has one.
    public let maxUnfinishedJobs: Int?
    /// How many producers wait for room under that bound (``JobQueue/addWhenRoom(_:)-([Job])``).
    public let waitingProducers: Int
    /// One entry per unfinished job, in creation order.
    public let jobs: [JobDiagnosis]

    public var description: String {
        let bound = maxUnfinishedJobs.map { " (bound \($0))" } ?? ""
        let producers =
            waitingProducers == 0
            ? "" : ", \(waitingProducers) producer\(waitingProducers == 1 ? "" : "s") waiting for room"
        var lines = [
            "queue '\(queueName)': \(jobs.count) unfinished\(bound), \(runningJobs) running of at most \(maxConcurrentJobs)\(isSuspended ? ", suspended" : "")\(producers)"
        ]
        lines += jobs.flatMap { $0.lines(depth: 1) }
        return lines.joined(separator: "\n")
    }
}
