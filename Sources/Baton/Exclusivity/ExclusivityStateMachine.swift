import DequeModule

/// Who holds and who waits for each exclusivity category, as a plain value (``ExclusivityScope``
/// keeps it behind a lock).
///
/// A request for several categories joins the end of each category's waiting line in one step, and is
/// granted only when, in every one of its categories, it is within the free capacity from the front of
/// the line. Because all requests join all their lines in a single global order, the oldest waiting
/// request is at the front of every line it is in, so it is granted as soon as capacity frees up:
/// there is no deadlock between jobs that want the same categories in different orders.
struct ExclusivityStateMachine {
    private struct Category {
        var limit: Int
        var holders: [UInt64] = []
        var waiting: Deque<UInt64> = []
        var capacity: Int { limit - holders.count }
    }

    private var categories: [String: Category] = [:]
    /// The category keys of every job that waits or holds.
    private var keysOf: [UInt64: [String]] = [:]
    private var granted: Set<UInt64> = []
    /// Jobs released before their request arrived (the request is then refused).
    private var releasedEarly: Set<UInt64> = []

    enum RequestResult: Equatable {
        case granted
        case waiting
        /// The job finished before asking; nothing is held.
        case refused
    }

    mutating func request(_ id: UInt64, _ requested: [ExclusivityCategory]) -> RequestResult {
        if releasedEarly.remove(id) != nil { return .refused }
        let keys = requested.map(\.key)
        for category in requested {
            categories[category.key, default: Category(limit: category.limit)].limit =
                min(categories[category.key]?.limit ?? category.limit, category.limit)
            categories[category.key]!.waiting.append(id)
        }
        keysOf[id] = keys
        if isGrantable(id, keys) {
            grant(id, keys)
            return .granted
        }
        return .waiting
    }

    /// The job finished (or gave up): it stops holding or waiting. Returns the jobs granted as a result.
    mutating func release(_ id: UInt64) -> [UInt64] {
        guard let keys = keysOf.removeValue(forKey: id) else {
            releasedEarly.insert(id)
            return []
        }
        let held = granted.remove(id) != nil
        for key in keys {
            if held {
                categories[key]!.holders.removeAll { $0 == id }
            } else if let at = categories[key]!.waiting.firstIndex(of: id) {
                categories[key]!.waiting.remove(at: at)
            }
        }
        // Only the fronts of the touched lines can have become grantable; granting one job never makes
        // another grantable or ungrantable elsewhere (it leaves its lines and takes one unit of each).
        var newlyGranted: [UInt64] = []
        for key in keys {
            guard let category = categories[key] else { continue }
            for candidate in Array(category.waiting.prefix(max(0, category.capacity))) {
                let candidateKeys = keysOf[candidate]!
                if isGrantable(candidate, candidateKeys) {
                    grant(candidate, candidateKeys)
                    newlyGranted.append(candidate)
                }
            }
        }
        for key in keys where categories[key]!.holders.isEmpty && categories[key]!.waiting.isEmpty {
            categories[key] = nil
        }
        return newlyGranted
    }

    private func isGrantable(_ id: UInt64, _ keys: [String]) -> Bool {
        keys.allSatisfy { key in
            let category = categories[key]!
            return category.capacity > 0 && category.waiting.prefix(category.capacity).contains(id)
        }
    }

    private mutating func grant(_ id: UInt64, _ keys: [String]) {
        for key in keys {
            let at = categories[key]!.waiting.firstIndex(of: id)!
            categories[key]!.waiting.remove(at: at)
            categories[key]!.holders.append(id)
        }
        granted.insert(id)
    }

    // MARK: Queries

    func holders(of key: String) -> [UInt64] { categories[key]?.holders ?? [] }
    func isGranted(_ id: UInt64) -> Bool { granted.contains(id) }
    func keys(of id: UInt64) -> [String] { keysOf[id] ?? [] }
    func limit(of key: String) -> Int? { categories[key]?.limit }
}
