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
/// The children of a ``GroupJob`` that holds categories are arbitrated by a scope of the group's
/// own, which *lends* the group's claim: one child at a time per category, and nothing the group does
/// not hold (a child asking for more is refused, see ``JobError/Code/categoryNotHeldByGroup``).
///
/// ## Thread safety
/// All methods may be called from any thread. The state is guarded by one lock, never held while
/// Baton takes another lock or calls user code.
public final class ExclusivityScope: @unchecked Sendable {
    // @unchecked Sendable: `machine` and `jobs` are only touched while holding `lock`; the other
    // properties are immutable.

    /// Names the scope in diagnostics.
    public let name: String
    private let lock = Lock()
    @exclusivity(unchecked) private var machine = ExclusivityStateMachine()
    /// Jobs that wait for or hold categories here, by id.
    @exclusivity(unchecked) private var jobs: [UInt64: Job] = [:]
    /// For a group's scope: the group's categories (each lent to one child at a time), by key.
    private let lent: [String: ExclusivityCategory]?
    /// For a group's scope: the group and the scope its claim was made in (for diagnostics).
    private let group: String?
    private let parent: ExclusivityScope?

    /// The scope shared by queues that are not given one.
    public static let processWide = ExclusivityScope(name: "process-wide")

    public init(name: String) {
        self.name = name
        lent = nil
        group = nil
        parent = nil
    }

    /// The scope of the children of the group `group`, which holds `categories` in `parent`.
    init(lending categories: [ExclusivityCategory], of group: String, parent: ExclusivityScope) {
        name = "\(parent.name)/\(group)"
        // The group holds one unit of each category, so its children share that one unit.
        lent = Dictionary(
            categories.map { ($0.key, ExclusivityCategory($0.key, limit: 1)) }, uniquingKeysWith: { a, _ in a })
        self.group = group
        self.parent = parent
    }

    /// What a request got.
    enum Grant {
        case granted
        /// ``Job/claimGranted(_:)`` is called when it is.
        case waiting
        /// It can never be granted here.
        case refused(JobError)
    }

    /// Asks for `categories` on behalf of `job`.
    func request(_ job: Job, _ categories: [ExclusivityCategory]) -> Grant {
        var requested = categories
        if let lent, let group {
            let outside = categories.filter { lent[$0.key] == nil }
            if !outside.isEmpty {
                return .refused(.categoryNotHeldByGroup(job: job.name, categories: outside.map(\.key), group: group))
            }
            requested = categories.map { lent[$0.key]! }
        }
        return lock.withLock {
            switch machine.request(job.id, requested) {
            case .granted:
                jobs[job.id] = job
                return .granted
            case .waiting:
                jobs[job.id] = job
                return .waiting
            case .refused:
                return .waiting  // it finished before asking; its finish already released nothing
            }
        }
    }

    /// `job` finished or gave up its claim: releases what it held or stops it waiting. Returns the jobs
    /// granted as a result (the caller tells them, outside the lock).
    func release(_ job: Job) -> [Job] {
        let (granted, released): ([Job], Job?) = lock.withLock {
            let released = jobs.removeValue(forKey: job.id)
            return (machine.release(job.id).compactMap { jobs[$0] }, released)
        }
        _ = released  // dropped here, outside the lock
        return granted
    }

    /// The jobs that hold `category` now.
    public func holders(of category: ExclusivityCategory) -> [Job] {
        lock.withLock { machine.holders(of: category.key).compactMap { jobs[$0] } }
    }

    /// For diagnostics: the categories `job` waits for, each with the jobs that hold it.
    func blockers(of job: Job) -> [(category: String, limit: Int, holders: [Job])]? {
        lock.withLock {
            let keys = machine.keys(of: job.id)
            guard !keys.isEmpty, !machine.isGranted(job.id) else { return nil }
            return keys.map { key in
                (key, machine.limit(of: key) ?? 1, machine.holders(of: key).compactMap { jobs[$0] })
            }
        }
    }
}
