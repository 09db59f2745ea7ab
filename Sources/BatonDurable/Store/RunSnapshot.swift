public import Foundation

/// A run as stored.
public struct RunRecord: Hashable, Codable, Sendable {
    public var id: DurableRunID
    public var name: String
    public var uniqueKey: String?
    public var created: Date
    /// When the last of its jobs finished, or `nil` while some are unfinished.
    public var finished: Date?

    public init(id: DurableRunID, name: String, uniqueKey: String?, created: Date, finished: Date?) {
        self.id = id
        self.name = name
        self.uniqueKey = uniqueKey
        self.created = created
        self.finished = finished
    }
}

/// A job as stored.
public struct JobRecord: Hashable, Codable, Sendable {
    public struct Dependency: Hashable, Codable, Sendable {
        public var job: DurableJobID
        public var runRegardless: Bool
        /// Waits also for what that job adds to the run (`afterAll:`).
        public var includingAdded: Bool = false
        public init(job: DurableJobID, runRegardless: Bool, includingAdded: Bool = false) {
            self.job = job
            self.runRegardless = runRegardless
            self.includingAdded = includingAdded
        }
    }

    public var id: DurableJobID
    public var run: DurableRunID
    public var name: String
    public var kind: String
    public var state: DurableJobState
    /// Attempts started so far (the running one included).
    public var attempts: Int
    public var retry: RetryPolicy
    /// The attempts it may make: its retry policy's, plus one for each time it snoozed (``Snooze``).
    public var maxAttempts: Int
    public var priority: Int
    public var timeout: Duration?
    public var categories: [DurableCategory]
    public var dependencies: [Dependency]
    public var inputFrom: DurableJobID?
    /// For a ready job: not claimable before this time.
    public var notBefore: Date?
    /// For a running job: the worker holding it and when its lease ends.
    public var leaseOwner: String?
    public var leaseExpires: Date?
    /// A cancellation asked for while it was running.
    public var cancelRequest: String?
    /// The last attempt's error (failed, or a retry pending), or the cancellation reason.
    public var lastError: String?
    /// The encoded output, once succeeded.
    public var output: Data?
    public var finished: Date?
    /// The job that added this one to the run while it ran, or nil for a job submitted with the graph.
    public var addedBy: DurableJobID?

    public init(
        id: DurableJobID, run: DurableRunID, name: String, kind: String, state: DurableJobState, attempts: Int,
        retry: RetryPolicy, priority: Int, timeout: Duration?, categories: [DurableCategory],
        dependencies: [Dependency], inputFrom: DurableJobID?, notBefore: Date?, leaseOwner: String?,
        leaseExpires: Date?, cancelRequest: String?, lastError: String?, output: Data?, finished: Date?,
        addedBy: DurableJobID? = nil, maxAttempts: Int? = nil
    ) {
        self.addedBy = addedBy
        self.maxAttempts = maxAttempts ?? retry.maxAttempts
        self.id = id
        self.run = run
        self.name = name
        self.kind = kind
        self.state = state
        self.attempts = attempts
        self.retry = retry
        self.priority = priority
        self.timeout = timeout
        self.categories = categories
        self.dependencies = dependencies
        self.inputFrom = inputFrom
        self.notBefore = notBefore
        self.leaseOwner = leaseOwner
        self.leaseExpires = leaseExpires
        self.cancelRequest = cancelRequest
        self.lastError = lastError
        self.output = output
        self.finished = finished
    }
}

/// A running job that holds a category, for "category held by …".
public struct CategoryHolder: Hashable, Codable, Sendable {
    public var category: String
    public var job: DurableJobID
    public var jobName: String
    public var run: DurableRunID
    public init(category: String, job: DurableJobID, jobName: String, run: DurableRunID) {
        self.category = category
        self.job = job
        self.jobName = jobName
        self.run = run
    }
}

/// Everything `explain` needs about a run, read at one instant.
public struct RunSnapshot: Hashable, Codable, Sendable {
    public var run: RunRecord
    /// The run's jobs in submission order.
    public var jobs: [JobRecord]
    /// Holders (in any run) of the categories that this run's unfinished jobs name.
    public var holders: [CategoryHolder]
    /// Workers whose registration has not lapsed.
    public var workers: [WorkerRecord]
    /// The store's time when it was read, on the clock that decides leases and retries (``clock``).
    public var now: Date
    /// Which clock that is, for people: "this process's clock" (SQLite) or "the database server's clock".
    public var clock: String

    public init(
        run: RunRecord, jobs: [JobRecord], holders: [CategoryHolder], workers: [WorkerRecord], now: Date,
        clock: String = "this process's clock"
    ) {
        self.run = run
        self.jobs = jobs
        self.holders = holders
        self.workers = workers
        self.now = now
        self.clock = clock
    }
}
