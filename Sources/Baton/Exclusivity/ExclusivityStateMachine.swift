import DequeModule

/// One job's claim on its exclusivity categories: made when its queue starts the job, given up when
/// it finishes (or goes back to waiting). The job keeps its ticket, so the arbiter needs no table of
/// jobs; every field is guarded by the lock of the ``ExclusivityScope`` the ticket is submitted to.
final class ClaimTicket {
    /// Where a ticket stands.
    enum Stage {
        /// Made; not yet submitted.
        case new
        /// In its categories' lines.
        case waiting
        /// Holding its categories.
        case granted
        /// Given up before it was submitted: the submission is refused.
        case releasedEarly
        /// Given up (or refused): in no line any more, except as a dead entry skipped on the way.
        case done
    }

    /// The claiming job; `nil` once the ticket is done, so that a dead entry left in a line does not
    /// keep a finished job alive. (The job that gives a ticket up still holds itself then: letting go of
    /// it here never frees it under the scope's lock.)
    @exclusivity(unchecked) private(set) var job: Job?
    let categories: [ExclusivityCategory]
    /// The lines of its categories, found once when it is submitted (guarded by the scope's lock).
    @exclusivity(unchecked) fileprivate var lines: [ExclusivityLine] = []
    /// Guarded by the scope's lock, like `job`.
    @exclusivity(unchecked) var stage = Stage.new {
        didSet { if stage == .done { job = nil } }
    }

    init(job: Job, categories: [ExclusivityCategory]) {
        self.job = job
        self.categories = categories
    }
}

/// One category's holders and waiting line. A reference, so that tickets find their lines without a
/// lookup and every change is made in place; guarded by the scope's lock.
final class ExclusivityLine {
    // Guarded by the scope's lock, like tickets: no run-time exclusivity checks needed.
    let key: String
    @exclusivity(unchecked) var limit: Int
    @exclusivity(unchecked) var holders: [ClaimTicket] = []
    @exclusivity(unchecked) var waiting: Deque<ClaimTicket> = []
    var capacity: Int { limit - holders.count }

    init(key: String, limit: Int) {
        self.key = key
        self.limit = limit
    }

    /// Drops dead entries from the front.
    func dropDeadFront() {
        while let first = waiting.first, first.stage != .waiting { waiting.removeFirst() }
    }

    /// Whether `ticket` is within the free capacity from the front (its share of the line is free).
    func admits(_ ticket: ClaimTicket) -> Bool {
        let free = capacity
        guard free > 0 else { return false }
        var ahead = 0
        for candidate in waiting where candidate.stage == .waiting {
            if candidate === ticket { return true }
            ahead += 1
            if ahead == free { return false }
        }
        return false
    }

    /// Nobody holds or waits (dead entries are dropped from the front first).
    var isIdle: Bool { holders.isEmpty && waiting.isEmpty }
}

/// Who holds and who waits for each exclusivity category, as a plain value (``ExclusivityScope``
/// keeps it behind a lock).
///
/// A ticket for several categories joins the end of each category's waiting line in one step, and is
/// granted only when, in every one of its categories, it is within the free capacity from the front of
/// the line. Because all tickets join all their lines in a single global order, the oldest waiting
/// ticket is at the front of every line it is in, so it is granted as soon as capacity frees up:
/// there is no deadlock between jobs that want the same categories in different orders.
///
/// A ticket given up while waiting stays in its lines as a dead entry until it reaches the front
/// (removing it at once would cost the length of the line: a `cancelAll` of a million waiting jobs
/// would be quadratic). Every step costs the capacity of the lines it touches, plus the dead entries
/// it skips once; only submitting a ticket looks its categories up by name.
struct ExclusivityStateMachine {
    private var lines: [String: ExclusivityLine] = [:]

    enum RequestResult: Equatable {
        case granted
        case waiting
        /// The ticket was given up before it was submitted; nothing is held.
        case refused
    }

    mutating func request(_ ticket: ClaimTicket) -> RequestResult {
        guard ticket.stage == .new else {
            ticket.stage = .done
            return .refused
        }
        ticket.stage = .waiting
        ticket.lines = ticket.categories.map { category in
            let line: ExclusivityLine
            if let existing = lines[category.key] {
                line = existing
                line.limit = min(line.limit, category.limit)  // the smallest limit asked for applies
            } else {
                line = ExclusivityLine(key: category.key, limit: category.limit)
                lines[category.key] = line
            }
            line.dropDeadFront()
            line.waiting.append(ticket)
            return line
        }
        if isGrantable(ticket) {
            grant(ticket)
            return .granted
        }
        return .waiting
    }

    /// The ticket's job finished or gave its claim up. Returns the tickets granted as a result.
    mutating func release(_ ticket: ClaimTicket) -> [ClaimTicket] {
        switch ticket.stage {
        case .new:
            ticket.stage = .releasedEarly
            return []
        case .releasedEarly, .done:
            return []
        case .granted:
            for line in ticket.lines { line.holders.removeAll { $0 === ticket } }
        case .waiting:
            break  // it stays in its lines as a dead entry
        }
        ticket.stage = .done
        let touched = ticket.lines
        ticket.lines = []
        // Only the fronts of the touched lines can have become grantable; granting one ticket never makes
        // another grantable or ungrantable elsewhere (it leaves its lines and takes one unit of each).
        var newlyGranted: [ClaimTicket] = []
        for line in touched {
            line.dropDeadFront()
            var index = line.waiting.startIndex
            var looked = 0
            while looked < line.capacity, index < line.waiting.endIndex {
                let candidate = line.waiting[index]
                index += 1
                guard candidate.stage == .waiting else { continue }
                looked += 1
                if isGrantable(candidate) {
                    grant(candidate)
                    newlyGranted.append(candidate)
                    index = line.waiting.startIndex  // the line changed: look again from the front
                    looked = 0
                }
            }
            if line.isIdle, lines[line.key] === line { lines[line.key] = nil }
        }
        return newlyGranted
    }

    private func isGrantable(_ ticket: ClaimTicket) -> Bool {
        ticket.lines.allSatisfy { $0.admits(ticket) }
    }

    private mutating func grant(_ ticket: ClaimTicket) {
        for line in ticket.lines {
            let at = line.waiting.firstIndex { $0 === ticket }!  // within the capacity from the front
            line.waiting.remove(at: at)
            line.holders.append(ticket)
            line.dropDeadFront()
        }
        ticket.stage = .granted
    }

    // MARK: Queries

    func holders(of key: String) -> [ClaimTicket] { lines[key]?.holders ?? [] }
    func limit(of key: String) -> Int? { lines[key]?.limit }
}
