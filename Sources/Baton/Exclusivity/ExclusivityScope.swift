/// Arbitrates exclusivity categories among the jobs of every queue that shares this scope.
///
/// By default all queues share ``processWide``, so `MutuallyExclusive<Alert>()` means one alert at a
/// time in the whole process. Give a queue its own scope (``JobQueue/init(name:maxConcurrentJobs:dispatchQueue:exclusivityScope:instruments:workerThreads:maxUnfinishedJobs:)``)
/// to isolate tests, or a library that embeds Baton, from everyone else's categories.
///
/// A job claims all its categories at once when its queue starts it (its dependencies finished, its
/// conditions were satisfied and its queue gave it a slot, which it holds while it waits), first come
/// first served per category, and releases them when it finishes. A job waiting for a slot — in a full
/// or suspended queue — holds no category, so it never keeps jobs of other queues (or a group's
/// children) from theirs.
///
/// The children of a ``GroupJob`` that holds categories are arbitrated by a scope of the group's
/// own, which *lends* the group's claim: one child at a time per category, and nothing the group does
/// not hold (a child asking for more is refused, see ``JobError/Code/categoryNotHeldByGroup``).
///
/// ## Thread safety
/// All methods may be called from any thread. The state is guarded by one lock, never held while
/// Baton takes another lock or calls user code.
public final class ExclusivityScope: @unchecked Sendable {
    // @unchecked Sendable: `machine` (and the stage of every ticket submitted here) is only touched while
    // holding `lock`; the other properties are immutable.

    /// Names the scope in diagnostics.
    public let name: String
    private let lock = Lock()
    @exclusivity(unchecked) private var machine = ExclusivityStateMachine()
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

    /// The categories a claim for `categories` by `job` takes here: the same, or — in a scope that
    /// lends a group's categories — the group's one unit of each; refused if the group holds one of
    /// them not. Reads nothing that changes, so it takes no lock.
    /// `job`: the claiming job's name, made only for a refusal.
    func claimable(
        _ categories: [ExclusivityCategory], by job: @autoclosure () -> String
    ) -> Result<[ExclusivityCategory], JobError> {
        guard let lent, let group else { return .success(categories) }
        let outside = categories.filter { lent[$0.key] == nil }
        if !outside.isEmpty {
            return .failure(.categoryNotHeldByGroup(job: job(), categories: outside.map(\.key), group: group))
        }
        return .success(categories.map { lent[$0.key]! })
    }

    /// What a submitted claim got.
    enum Grant {
        case granted
        /// It waits (``Job/claimGranted(_:_:)`` is called when it is granted); `behindGroup`: a group
        /// holds one of its categories (so a cycle through exclusivity is possible).
        case waiting(behindGroup: Bool)
    }

    /// Submits a claim (made with categories from ``claimable(_:by:)``). A ticket given up before it
    /// was submitted (its job finished first) is refused and holds nothing.
    func request(_ ticket: ClaimTicket) -> Grant {
        lock.withLock {
            switch machine.request(ticket) {
            case .granted: return .granted
            case .refused: return .waiting(behindGroup: false)
            case .waiting: return .waiting(behindGroup: machine.isBehindGroup(ticket))
            }
        }
    }

    /// A job finished or gave its claim up: releases what it held or stops it waiting. Returns the
    /// tickets granted as a result, each with its job read under the lock (a ticket's job is guarded
    /// by it), for the caller to tell outside the lock.
    func release(_ ticket: ClaimTicket) -> [(ticket: ClaimTicket, job: Job)] {
        let (granted, jobs) = lock.withLock { () -> ([ClaimTicket], [(ticket: ClaimTicket, job: Job)]) in
            let granted = machine.release(ticket)
            return (granted, granted.compactMap { granted in granted.job.map { (granted, $0) } })
        }
        _ = granted  // released outside the lock
        return jobs
    }

    /// Whether every unit of category `key` is held, each by one of `jobs` (so that nobody else can get
    /// it before one of them lets go), for a claim asking for it with `limit` (the smaller of it and the
    /// line's own applies).
    func isHeld(_ key: String, onlyBy jobs: Set<ObjectIdentifier>, limit asked: Int) -> Bool {
        lock.withLock {
            guard let limit = machine.limit(of: key).map({ min($0, asked) }) else { return false }
            let holders = machine.holders(of: key)
            return holders.count >= limit
                && holders.allSatisfy { holder in holder.job.map { jobs.contains(ObjectIdentifier($0)) } ?? false }
        }
    }

    /// The jobs that hold `category` now.
    public func holders(of category: ExclusivityCategory) -> [Job] {
        lock.withLock { machine.holders(of: category.key).compactMap(\.job) }
    }

    /// For diagnostics: the categories a ticket waits for, each with the jobs that hold it.
    func blockers(of ticket: ClaimTicket) -> [(category: String, limit: Int, holders: [Job])]? {
        lock.withLock {
            guard ticket.stage == .waiting else { return nil }
            return ticket.categories.map { category in
                (
                    category.key, machine.limit(of: category.key) ?? 1,
                    machine.holders(of: category.key).compactMap(\.job)
                )
            }
        }
    }
}
