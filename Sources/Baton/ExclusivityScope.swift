/// Arbitrates exclusivity categories among the jobs of every queue that shares this scope.
///
/// By default all queues share ``processWide``, so `MutuallyExclusive<Alert>()` means one alert at a
/// time in the whole process. Give a queue its own scope (``JobQueue/init(name:maxConcurrentJobs:dispatchQueue:exclusivityScope:)``)
/// to isolate tests, or a library that embeds Baton, from everyone else's categories.
///
/// A job claims all its categories at once, when it is otherwise ready to run (its dependencies
/// finished and its conditions were satisfied), first come first served per category, and releases
/// them when it finishes.
///
/// ## Thread safety
/// All methods may be called from any thread. The state is guarded by one lock, never held while
/// Baton takes another lock or calls user code.
public final class ExclusivityScope: @unchecked Sendable {
    // @unchecked Sendable: `machine`, `jobs`, `forwarded` and `releasedEarly` are only touched while holding `lock`; the
    // other properties are immutable.

    /// Names the scope in diagnostics.
    public let name: String
    private let lock = Lock()
    @exclusivity(unchecked) private var machine = ExclusivityStateMachine()
    /// Jobs that wait for or hold categories here.
    @exclusivity(unchecked) private var jobs: [UInt64: Job] = [:]
    /// For the scope of a group's children: where categories the group does not hold are arbitrated.
    private let parent: ExclusivityScope?
    /// For the scope of a group's children: the group's own categories, which its children share
    /// without arbitration (the group holds them while its children run).
    private let inherited: Set<String>
    /// For the scope of a group's children: the children that asked `parent` for categories.
    @exclusivity(unchecked) private var forwarded: Set<UInt64> = []
    /// For the scope of a group's children: children released before they asked.
    @exclusivity(unchecked) private var releasedEarly: Set<UInt64> = []

    /// The scope shared by queues that are not given one.
    public static let processWide = ExclusivityScope(name: "process-wide")

    public init(name: String) {
        self.name = name
        parent = nil
        inherited = []
    }

    /// The scope of a group's children: the group's categories are theirs already, the rest are
    /// arbitrated by `parent` as usual.
    init(childrenOf group: String, parent: ExclusivityScope, inherited: Set<String>) {
        name = "\(parent.name)/\(group)"
        self.parent = parent
        self.inherited = inherited
    }

    /// Asks for `categories` on behalf of `job`. Returns whether they were granted at once; otherwise
    /// ``Job/exclusivityGranted()`` is called when they are.
    func request(_ job: Job, _ categories: [ExclusivityCategory]) -> Bool {
        if let parent {
            let remaining = categories.filter { !inherited.contains($0.key) }
            let refused: Bool = lock.withLock {
                if releasedEarly.remove(job.id) != nil { return true }  // it finished before asking
                if !remaining.isEmpty { forwarded.insert(job.id) }
                return false
            }
            if refused { return false }
            return remaining.isEmpty ? true : parent.request(job, remaining)
        }
        return lock.withLock {
            switch machine.request(job.id, categories) {
            case .granted:
                jobs[job.id] = job
                return true
            case .waiting:
                jobs[job.id] = job
                return false
            case .refused:
                return false
            }
        }
    }

    /// `job` finished: releases what it held or stops it waiting, and lets the next jobs in.
    func release(_ job: Job) {
        if let parent {
            // Only jobs that asked the parent for something have anything to release there. A release
            // of a job that has not asked yet (it finished first) refuses its request when it comes;
            // these marks live as long as the group's child queue.
            let forward: Bool = lock.withLock {
                if forwarded.remove(job.id) != nil { return true }
                releasedEarly.insert(job.id)
                return false
            }
            if forward { parent.release(job) }
            return
        }
        let granted: [Job] = lock.withLock {
            jobs[job.id] = nil
            return machine.release(job.id).compactMap { jobs[$0] }
        }
        for next in granted { next.exclusivityGranted() }
    }

    /// The jobs that hold `category` now.
    public func holders(of category: ExclusivityCategory) -> [Job] {
        if let parent { return parent.holders(of: category) }
        return lock.withLock { machine.holders(of: category.key).compactMap { jobs[$0] } }
    }

    /// For diagnostics: the categories `job` waits for, each with the jobs that hold it.
    func blockers(of job: Job) -> [(category: String, limit: Int, holders: [Job])]? {
        if let parent { return parent.blockers(of: job) }
        return lock.withLock {
            let keys = machine.keys(of: job.id)
            guard !keys.isEmpty, !machine.isGranted(job.id) else { return nil }
            return keys.map { key in
                (key, machine.limit(of: key) ?? 1, machine.holders(of: key).compactMap { jobs[$0] })
            }
        }
    }
}
