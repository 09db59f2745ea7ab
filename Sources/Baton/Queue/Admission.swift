import DequeModule

/// Who may add jobs to a queue with a bound on its unfinished jobs (``JobQueue/maxUnfinishedJobs``),
/// and when: producers that asked to wait (``JobQueue/addWhenRoom(_:)-([Job])``) are let in, in the
/// order they asked, as finished jobs make room; ``JobQueue/tryAdd(_:)-([Job])`` is let in only when
/// nobody waits and there is room. Guarded by the queue's lock, and given the queue's count of
/// unfinished jobs by its caller.
///
/// Room: the unfinished jobs plus the jobs of producers let in but not yet added, plus the jobs
/// asked for, are at most the bound; or the queue holds nothing, so that a batch larger than the
/// bound is let in alone rather than never.
///
/// Producers let in add their jobs one after another, in the order they were let in: only the first
/// of them is resumed (it *adds*); when it has added its jobs, the next one is. So the jobs of
/// producers that waited reach the queue in the order the producers asked, which a serial queue then
/// keeps.
struct Admission {
    /// One producer's request.
    final class Ticket: @unchecked Sendable {
        // @unchecked Sendable: `state` is only touched while holding the queue's lock.
        enum State {
            /// Not yet arrived.
            case new
            /// In line for room.
            case waiting(CheckedContinuation<Void, any Error>)
            /// Let in (its room is reserved), waiting for the producers let in before it to add theirs.
            case admitted(CheckedContinuation<Void, any Error>)
            /// Let in and resumed (or never suspended): adding its jobs now.
            case adding
            case cancelled
        }
        /// How many jobs the producer adds.
        let count: Int
        var state = State.new
        /// In the line of producers let in (see `letIn`); not for a producer that did not wait (no bound,
        /// or `tryAdd`): it adds at once.
        var inTurn = false
        init(count: Int) { self.count = count }
    }

    /// What became of a producer that arrived.
    enum Arrival {
        /// Let in, and its turn: it adds its jobs now.
        case admitted
        /// In line (for room, or for its turn to add), with its continuation: resumed when it may add
        /// its jobs, or thrown at when cancelled while it waits (for room, or for its turn).
        case waiting
        /// Its task was cancelled before it arrived.
        case cancelled
    }

    /// The bound, or nil for none.
    var limit: Int?
    /// Jobs of producers let in that have not been added yet.
    private(set) var reserved = 0
    /// Waiting producers, first come first. A cancelled one stays until it reaches the front, where
    /// it is dropped: the front is always a waiting producer (or the line is empty) — or until the
    /// cancelled outnumber the waiting, when the line is swept (so producers that gave up behind one
    /// that cannot get in hold no memory: 50,000 of them held 12 MB).
    private var line: Deque<Ticket> = []
    /// Cancelled producers still in `line`.
    private var cancelledInLine = 0
    /// Producers let in that have not added their jobs yet, in the order they were let in; the first
    /// is the one adding (state `adding`), the others wait for their turn (`admitted`).
    private var letIn: Deque<Ticket> = []

    /// Producers in line, cancelled ones included (for tests).
    var lineLength: Int { line.count }

    /// Whether some producer waits in line.
    var hasWaiting: Bool { !line.isEmpty }

    /// How many producers wait in line (for diagnostics: it walks the line).
    var waitingCount: Int {
        line.reduce(0) { count, ticket in
            if case .waiting = ticket.state { count + 1 } else { count }
        }
    }

    private func fits(_ count: Int, unfinished: Int) -> Bool {
        guard let limit else { return true }
        let used = unfinished + reserved
        return used == 0 || used + count <= limit
    }

    /// A producer that waits if need be. Let in at once only if nobody waits ahead of it; it adds at
    /// once only if no producer let in before it has yet to add.
    mutating func arrive(
        _ ticket: Ticket, unfinished: Int, _ continuation: CheckedContinuation<Void, any Error>
    ) -> Arrival {
        if case .cancelled = ticket.state { return .cancelled }
        if limit == nil {
            // No bound: nobody waits, so there is no order to keep among them; it adds at once.
            reserved += ticket.count
            ticket.state = .adding
            return .admitted
        }
        if line.isEmpty, fits(ticket.count, unfinished: unfinished) {
            reserved += ticket.count
            ticket.inTurn = true
            letIn.append(ticket)
            if letIn.count == 1 {
                ticket.state = .adding
                return .admitted
            }
            ticket.state = .admitted(continuation)
            return .waiting
        }
        ticket.state = .waiting(continuation)
        line.append(ticket)
        return .waiting
    }

    /// A producer that does not wait: let in, to add at once, only if nobody waits for room and there
    /// is room. (It does not overtake a producer that waited; one let in and adding now is no longer
    /// waiting, and whose jobs come first between the two is a race of the callers'.)
    mutating func tryAdmit(_ ticket: Ticket, unfinished: Int) -> Bool {
        guard line.isEmpty, fits(ticket.count, unfinished: unfinished) else { return false }
        reserved += ticket.count
        ticket.state = .adding
        return true
    }

    /// Lets in waiting producers from the front of the line while the first has room. Returns the
    /// continuation of the producer whose turn to add has come, if one has, to resume outside the lock.
    mutating func admitWaiting(unfinished: Int) -> [CheckedContinuation<Void, any Error>] {
        while let first = line.first {
            switch first.state {
            case .waiting(let continuation):
                guard fits(first.count, unfinished: unfinished) else { return nextTurn() }
                first.state = .admitted(continuation)
                reserved += first.count
                first.inTurn = true
                letIn.append(first)
            case .cancelled:
                cancelledInLine -= 1
            case .new, .admitted, .adding:
                break
            }
            // Freed here, under the queue's lock, if the producer has gone: a ticket out of line holds
            // nothing (its continuation was taken), so freeing it runs no code.
            line.removeFirst()
        }
        return nextTurn()
    }

    /// The first producer let in, if it waits for its turn: it adds now.
    private mutating func nextTurn() -> [CheckedContinuation<Void, any Error>] {
        guard let first = letIn.first, case .admitted(let continuation) = first.state else { return [] }
        first.state = .adding
        return [continuation]
    }

    /// The producer adding has added its jobs: they count as unfinished now, not as reserved. Lets in
    /// those now with room; returns the continuation of the next producer to add, if any.
    mutating func added(_ ticket: Ticket, unfinished: Int) -> [CheckedContinuation<Void, any Error>] {
        if ticket.inTurn {
            precondition(letIn.first === ticket, "Baton internal error: a producer added its jobs out of turn")
            letIn.removeFirst()
        }
        ticket.state = .cancelled  // done: out of every line
        reserved -= ticket.count
        return admitWaiting(unfinished: unfinished)
    }

    /// The producer's task was cancelled. Returns its continuation if it was waiting, for room or for
    /// its turn to add (the caller throws `CancellationError` through it, then lets in those behind it
    /// that now have room): it adds nothing, and the room it was given goes to the others. A producer
    /// whose turn has come (resumed, or about to be) adds its jobs all the same.
    mutating func cancel(_ ticket: Ticket) -> CheckedContinuation<Void, any Error>? {
        switch ticket.state {
        case .new:
            ticket.state = .cancelled
            return nil
        case .waiting(let continuation):
            ticket.state = .cancelled
            cancelledInLine += 1
            if cancelledInLine > 16, cancelledInLine * 2 > line.count {
                // Freed under the queue's lock: a cancelled ticket holds nothing (its continuation is
                // taken), so freeing it runs no code.
                line.removeAll { if case .cancelled = $0.state { true } else { false } }
                cancelledInLine = 0
            }
            return continuation
        case .admitted(let continuation):
            // Let in, waiting for its turn: never first in `letIn` (the first is adding).
            if let index = letIn.firstIndex(where: { $0 === ticket }) { letIn.remove(at: index) }
            reserved -= ticket.count
            ticket.state = .cancelled
            return continuation
        case .adding, .cancelled:
            return nil
        }
    }
}
