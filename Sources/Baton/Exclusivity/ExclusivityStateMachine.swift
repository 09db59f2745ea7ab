import DequeModule

/// One job's claim on its exclusivity categories: made when the job is otherwise ready, given up when
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
    private(set) var job: Job?
    let categories: [ExclusivityCategory]
    /// Guarded by the scope's lock, like `job`.
    var stage = Stage.new {
        didSet { if stage == .done { job = nil } }
    }

    init(job: Job, categories: [ExclusivityCategory]) {
        self.job = job
        self.categories = categories
    }
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
/// it skips once.
struct ExclusivityStateMachine {
    private struct Line {
        var limit: Int
        var holders: [ClaimTicket] = []
        var waiting: Deque<ClaimTicket> = []
        var capacity: Int { limit - holders.count }

        mutating func join(_ ticket: ClaimTicket, limit: Int) {
            self.limit = min(self.limit, limit)
            dropDeadFront()
            waiting.append(ticket)
        }

        /// Drops dead entries from the front.
        mutating func dropDeadFront() {
            while let first = waiting.first, first.stage != .waiting { waiting.removeFirst() }
        }

        /// The live waiting tickets within the free capacity from the front.
        func grantable() -> [ClaimTicket] {
            var found: [ClaimTicket] = []
            guard capacity > 0 else { return found }
            for ticket in waiting where ticket.stage == .waiting {
                found.append(ticket)
                if found.count == capacity { break }
            }
            return found
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

    private var lines: [String: Line] = [:]

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
        for category in ticket.categories {
            lines[category.key, default: Line(limit: category.limit)].join(ticket, limit: category.limit)
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
            for category in ticket.categories {
                lines[category.key]!.holders.removeAll { $0 === ticket }
            }
        case .waiting:
            break  // it stays in its lines as a dead entry
        }
        ticket.stage = .done
        // Only the fronts of the touched lines can have become grantable; granting one ticket never makes
        // another grantable or ungrantable elsewhere (it leaves its lines and takes one unit of each).
        var newlyGranted: [ClaimTicket] = []
        for category in ticket.categories {
            guard lines[category.key] != nil else { continue }
            lines[category.key]!.dropDeadFront()
            for candidate in lines[category.key]!.grantable() where candidate.stage == .waiting && isGrantable(candidate) {
                grant(candidate)
                newlyGranted.append(candidate)
            }
            if lines[category.key]!.isIdle { lines[category.key] = nil }
        }
        return newlyGranted
    }

    private func isGrantable(_ ticket: ClaimTicket) -> Bool {
        ticket.categories.allSatisfy { lines[$0.key]!.admits(ticket) }
    }

    private mutating func grant(_ ticket: ClaimTicket) {
        for category in ticket.categories {
            let at = lines[category.key]!.waiting.firstIndex { $0 === ticket }!  // within the capacity from the front
            lines[category.key]!.waiting.remove(at: at)
            lines[category.key]!.holders.append(ticket)
            lines[category.key]!.dropDeadFront()
        }
        ticket.stage = .granted
    }

    // MARK: Queries

    func holders(of key: String) -> [ClaimTicket] { lines[key]?.holders ?? [] }
    func limit(of key: String) -> Int? { lines[key]?.limit }
}
