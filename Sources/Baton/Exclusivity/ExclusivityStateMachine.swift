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
        /// Given up (or refused): in no line, holding nothing.
        case done
    }

    /// The claiming job; `nil` once the ticket is done, so that a finished claim does not keep its job
    /// alive. (The job that gives a ticket up still holds itself then: letting go of it here never
    /// frees it under the scope's lock.)
    @exclusivity(unchecked) private(set) var job: Job?
    let categories: [ExclusivityCategory]
    /// The claim of a group (whose children may wait for it: see ``ExclusivityScope/request(_:)``).
    let isGroup: Bool
    /// Its place in the line of each of its categories (one per key), found once when it is submitted;
    /// guarded by the scope's lock like every field below. One array for the three things it keeps per
    /// line: a claim allocates as little as it can.
    @exclusivity(unchecked) fileprivate var parts: [Part] = []
    /// While it waits: in how many of its lines it is within the free capacity from the front. It is
    /// granted when that is all of them.
    @exclusivity(unchecked) fileprivate var admitted = 0
    /// While it waits: how many of its lines it waits in.
    @exclusivity(unchecked) fileprivate var waitingIn = 0

    /// The ticket in one of its lines.
    fileprivate struct Part {
        let line: ExclusivityLine
        /// While it holds: its index in the line's holders.
        var holderSlot = 0
        /// While it waits: its node in the line's list.
        var entry: LineEntry?
    }
    @exclusivity(unchecked) var stage = Stage.new {
        didSet { if stage == .done { job = nil } }
    }

    init(job: Job, categories: [ExclusivityCategory]) {
        self.job = job
        self.categories = categories
        isGroup = job is GroupJob
    }

    fileprivate var isAdmittedEverywhere: Bool { admitted == waitingIn }

    /// The lines it is in or holds, in the order of its categories.
    fileprivate var lines: some Collection<ExclusivityLine> { parts.lazy.map(\.line) }
}

/// A waiting ticket's place in one line: a node of the line's doubly linked list. The links are
/// strong both ways only while the node is in the list; taking it out clears them (no cycle outlives
/// a wait).
final class LineEntry {
    let ticket: ClaimTicket
    @exclusivity(unchecked) fileprivate var previous: LineEntry?
    @exclusivity(unchecked) fileprivate var next: LineEntry?
    /// Within the line's window: among the first `capacity` waiting tickets.
    @exclusivity(unchecked) fileprivate var inWindow = false

    fileprivate init(_ ticket: ClaimTicket) { self.ticket = ticket }
}

/// One category's holders and waiting line. A reference, so that tickets find their lines without a
/// lookup and every change is made in place; guarded by the scope's lock.
///
/// The line keeps its *window*: the first `max(0, capacity)` waiting tickets, the ones the free
/// capacity admits. Every change moves the window's end by as many entries as the change frees or
/// takes (usually one), so no step scans the line.
final class ExclusivityLine {
    // Guarded by the scope's lock, like tickets: no run-time exclusivity checks needed.
    let key: String
    @exclusivity(unchecked) var limit: Int
    /// In no order: a release moves the last holder into the place it frees.
    @exclusivity(unchecked) private(set) var holders: [ClaimTicket] = []
    /// How many of `holders` are groups.
    @exclusivity(unchecked) private(set) var groupHolders = 0
    @exclusivity(unchecked) private var first: LineEntry?
    @exclusivity(unchecked) private var last: LineEntry?
    /// How many tickets wait.
    @exclusivity(unchecked) private(set) var count = 0
    /// The last entry of the window (`nil` when the window is empty) and the window's size.
    @exclusivity(unchecked) private var windowEnd: LineEntry?
    @exclusivity(unchecked) private var windowCount = 0
    /// How many times an entry came into or left the window: the work of every step (for the tests
    /// that check it is linear).
    @exclusivity(unchecked) private(set) var moves = 0

    var capacity: Int { limit - holders.count }

    init(key: String, limit: Int) {
        self.key = key
        self.limit = limit
    }

    /// Nobody holds or waits.
    var isIdle: Bool { holders.isEmpty && count == 0 }

    /// Kept by the state machine while nobody holds or waits (see ``ExclusivityStateMachine``).
    @exclusivity(unchecked) var isParked = false

    /// `ticket`, whose line this is at `index` of its lines, holds a unit.
    func addHolder(_ ticket: ClaimTicket, lineIndex index: Int) {
        ticket.parts[index].holderSlot = holders.count
        holders.append(ticket)
        if ticket.isGroup { groupHolders += 1 }
    }

    /// `ticket`, whose line this is at `index` of its lines, gives its unit back.
    func removeHolder(_ ticket: ClaimTicket, lineIndex index: Int) {
        let slot = ticket.parts[index].holderSlot
        let moved = holders.removeLast()
        if moved !== ticket {
            holders[slot] = moved
            moved.parts[moved.parts.firstIndex { $0.line === self }!].holderSlot = slot
        }
        if ticket.isGroup { groupHolders -= 1 }
    }

    /// Adds `entry` at the end of the line, in the window if there is room; tickets that the window
    /// admits in all their lines are added to `ready`.
    func append(_ entry: LineEntry, _ ready: inout [ClaimTicket]) {
        entry.previous = last
        if let last { last.next = entry } else { first = entry }
        last = entry
        count += 1
        fill(&ready)
    }

    /// Takes `entry` out of the line (its ticket was granted or gave up), then lets the next waiters
    /// into the window if that made room.
    func remove(_ entry: LineEntry, _ ready: inout [ClaimTicket]) {
        if entry.inWindow {
            entry.inWindow = false
            entry.ticket.admitted -= 1
            windowCount -= 1
            if windowEnd === entry { windowEnd = entry.previous }
        }
        if let previous = entry.previous { previous.next = entry.next } else { first = entry.next }
        if let next = entry.next { next.previous = entry.previous } else { last = entry.previous }
        entry.previous = nil
        entry.next = nil
        count -= 1
        fill(&ready)
    }

    /// Grows the window to the free capacity (after a release, a removal or an append).
    func fill(_ ready: inout [ClaimTicket]) {
        while windowCount < capacity, let entry = windowEnd == nil ? first : windowEnd!.next {
            entry.inWindow = true
            windowEnd = entry
            windowCount += 1
            moves += 1
            entry.ticket.admitted += 1
            if entry.ticket.isAdmittedEverywhere { ready.append(entry.ticket) }
        }
        checkWindow()
    }

    /// Shrinks the window to the free capacity (after the limit was lowered).
    func shrink() {
        while windowCount > max(0, capacity), let entry = windowEnd {
            entry.inWindow = false
            entry.ticket.admitted -= 1
            windowEnd = entry.previous
            windowCount -= 1
            moves += 1
        }
        checkWindow()
    }

    /// The window is the first `max(0, capacity)` waiting tickets (checked in debug builds).
    func checkWindow() {
        assert(windowCount == min(count, max(0, capacity)), "line \(key): window \(windowCount) of \(count)")
    }
}

/// Who holds and who waits for each exclusivity category, as a plain value (``ExclusivityScope``
/// keeps it behind a lock). The value owns the lines it names: each ``ExclusivityLine``, and the
/// fields of the tickets in them, are changed only through it, under the scope's lock (they are
/// references so that a step touches only the lines it names, without copying).
///
/// A ticket for several categories joins the end of each category's waiting line in one step, and is
/// granted only when, in every one of its categories, it is within the free capacity from the front of
/// the line (in the line's window). Because all tickets join all their lines in a single global order,
/// the oldest waiting ticket is at the front of every line it is in, so it is granted as soon as
/// capacity frees up: there is no deadlock between jobs that want the same categories in different
/// orders.
///
/// Every step costs O(1) per line it touches, plus O(1) per ticket it lets into a window: a ticket
/// given up while waiting leaves its lines at once (they are linked lists), and each ticket counts the
/// windows it is in, so a release looks only at the tickets its freed capacity lets in. A claim that
/// waits for nobody is granted without joining any list. (Amortised: now and then a release drops the
/// parked lines, once they are over 64 and more than half of all lines, which the releases that parked
/// them paid for.)
struct ExclusivityStateMachine {
    /// The lines of the categories held or waited for, and lines parked while idle: a category that is
    /// claimed again finds its line, instead of making it anew. Parked lines are dropped once they are
    /// more than half of the lines and over `parkedLinesKept` (each drop then pays for itself).
    private var lines: [String: ExclusivityLine] = [:]
    private var parkedLines = 0
    static let parkedLinesKept = 64
    /// The ``ExclusivityLine/moves`` of the lines dropped.
    private var movesOfDroppedLines = 0

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
        // One line per key; the smallest limit asked for applies, within the claim and across claims.
        if ticket.categories.count == 1 {
            ticket.parts = [ClaimTicket.Part(line: line(ticket.categories[0].key, limit: ticket.categories[0].limit))]
        } else {
            var limits: [String: Int] = [:]
            for category in ticket.categories {
                limits[category.key] = min(limits[category.key] ?? .max, category.limit)
            }
            var seen: Set<String> = []
            for category in ticket.categories where seen.insert(category.key).inserted {
                ticket.parts.append(ClaimTicket.Part(line: line(category.key, limit: limits[category.key]!)))
            }
        }
        // Nobody waits in any of its lines and each has room: granted without joining them.
        if ticket.parts.allSatisfy({ $0.line.count == 0 && $0.line.capacity > 0 }) {
            for index in ticket.parts.indices { ticket.parts[index].line.addHolder(ticket, lineIndex: index) }
            ticket.stage = .granted
            return .granted
        }
        ticket.stage = .waiting
        ticket.waitingIn = ticket.parts.count
        var ready: [ClaimTicket] = []
        for index in ticket.parts.indices {
            let entry = LineEntry(ticket)
            ticket.parts[index].entry = entry
            ticket.parts[index].line.append(entry, &ready)
        }
        // Only the new ticket can have been let in: the windows were full before it came, or held
        // everyone already.
        if ticket.isAdmittedEverywhere {
            grant(ticket)
            return .granted
        }
        return .waiting
    }

    /// The line of `key`, made (or taken out of the parked ones, as good as new) if nobody holds or
    /// waits for it, its limit lowered to `limit` if that is smaller.
    private mutating func line(_ key: String, limit: Int) -> ExclusivityLine {
        guard let line = lines[key] else {
            let line = ExclusivityLine(key: key, limit: limit)
            lines[key] = line
            return line
        }
        if line.isParked {
            line.isParked = false
            parkedLines -= 1
            line.limit = limit
            return line
        }
        if limit < line.limit {
            line.limit = limit
            line.shrink()
        }
        return line
    }

    /// The ticket's job finished or gave its claim up. Returns the tickets granted as a result.
    mutating func release(_ ticket: ClaimTicket) -> [ClaimTicket] {
        var ready: [ClaimTicket] = []
        switch ticket.stage {
        case .new:
            ticket.stage = .releasedEarly
            return []
        case .releasedEarly, .done:
            return []
        case .granted:
            for index in ticket.parts.indices {
                let line = ticket.parts[index].line
                line.removeHolder(ticket, lineIndex: index)
                line.fill(&ready)
            }
        case .waiting:
            for part in ticket.parts { part.line.remove(part.entry!, &ready) }
        }
        ticket.stage = .done
        let touched = ticket.parts
        ticket.parts = []
        ticket.waitingIn = 0
        // Granting a ticket never lets another in nor out of a window elsewhere (it leaves each of its
        // windows and takes one unit of each line's capacity), so every ticket let in everywhere is
        // granted, in the order it was let in. Those granted are kept in `ready`, in place.
        var granted = 0
        for index in ready.indices {
            let candidate = ready[index]
            guard candidate.stage == .waiting && candidate.isAdmittedEverywhere else { continue }
            grant(candidate)
            ready[granted] = candidate
            granted += 1
        }
        ready.removeLast(ready.count - granted)
        // (A line that was held or waited for is the one in `lines`: only parked lines are dropped.)
        for part in touched where part.line.isIdle && !part.line.isParked {
            part.line.isParked = true
            parkedLines += 1
        }
        if parkedLines > Self.parkedLinesKept && parkedLines * 2 > lines.count { dropParkedLines() }
        return ready
    }

    /// Drops the parked lines.
    private mutating func dropParkedLines() {
        for line in lines.values where line.isParked { movesOfDroppedLines += line.moves }
        lines = lines.filter { !$0.value.isParked }
        parkedLines = 0
    }

    private mutating func grant(_ ticket: ClaimTicket) {
        var none: [ClaimTicket] = []
        for index in ticket.parts.indices {
            let line = ticket.parts[index].line
            line.addHolder(ticket, lineIndex: index)  // first: the room it frees in the window is taken at once
            line.remove(ticket.parts[index].entry!, &none)
            ticket.parts[index].entry = nil
        }
        assert(none.isEmpty, "granting a ticket let another into a window")
        ticket.waitingIn = 0
        ticket.admitted = 0
        ticket.stage = .granted
    }

    // MARK: Queries

    func holders(of key: String) -> [ClaimTicket] { lines[key]?.holders ?? [] }
    /// How many lines are kept, parked ones included (for the tests).
    var lineCount: Int { lines.count }
    /// Whether a group holds one of the categories `ticket` waits for.
    func isBehindGroup(_ ticket: ClaimTicket) -> Bool { ticket.lines.contains { $0.groupHolders > 0 } }
    func limit(of key: String) -> Int? { lines[key].flatMap { $0.isParked ? nil : $0.limit } }
    /// How many times a ticket came into or left a line's window so far (see ``ExclusivityLine/moves``).
    var moves: Int { lines.values.reduce(movesOfDroppedLines) { $0 + $1.moves } }
}
