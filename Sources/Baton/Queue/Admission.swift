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
struct Admission {
    /// One producer's request: new (not yet in line), waiting in line, let in, or cancelled.
    final class Ticket: @unchecked Sendable {
        // @unchecked Sendable: `state` is only touched while holding the queue's lock.
        enum State {
            case new
            case waiting(CheckedContinuation<Void, any Error>)
            case admitted
            case cancelled
        }
        /// How many jobs the producer adds.
        let count: Int
        var state = State.new
        init(count: Int) { self.count = count }
    }

    /// What became of a producer that arrived.
    enum Arrival {
        /// Let in: its jobs are reserved room; it adds them now.
        case admitted
        /// In line, with its continuation: resumed when let in, or thrown at when cancelled.
        case waiting
        /// Its task was cancelled before it arrived.
        case cancelled
    }

    /// The bound, or nil for none.
    var limit: Int?
    /// Jobs of producers let in that have not been added yet.
    private(set) var reserved = 0
    /// Waiting producers, first come first. A cancelled one stays until it reaches the front, where
    /// it is dropped: the front is always a waiting producer (or the line is empty).
    private var line: Deque<Ticket> = []

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

    /// A producer that waits if need be. Let in at once only if nobody waits ahead of it.
    mutating func arrive(
        _ ticket: Ticket, unfinished: Int, _ continuation: CheckedContinuation<Void, any Error>
    ) -> Arrival {
        if case .cancelled = ticket.state { return .cancelled }
        if line.isEmpty, fits(ticket.count, unfinished: unfinished) {
            ticket.state = .admitted
            reserved += ticket.count
            return .admitted
        }
        ticket.state = .waiting(continuation)
        line.append(ticket)
        return .waiting
    }

    /// A producer that does not wait: let in only if nobody waits and there is room.
    mutating func tryAdmit(_ count: Int, unfinished: Int) -> Bool {
        guard line.isEmpty, fits(count, unfinished: unfinished) else { return false }
        reserved += count
        return true
    }

    /// Lets in waiting producers from the front of the line while the first has room. Returns their
    /// continuations, to resume outside the lock.
    mutating func admitWaiting(unfinished: Int) -> [CheckedContinuation<Void, any Error>] {
        var admitted: [CheckedContinuation<Void, any Error>] = []
        while let first = line.first {
            switch first.state {
            case .waiting(let continuation):
                guard fits(first.count, unfinished: unfinished) else { return admitted }
                first.state = .admitted
                reserved += first.count
                admitted.append(continuation)
            case .new, .admitted, .cancelled:
                break
            }
            // Freed here, under the queue's lock, if the producer has gone: a ticket out of line holds
            // nothing (its continuation was taken), so freeing it runs no code.
            line.removeFirst()
        }
        return admitted
    }

    /// A producer let in has added its jobs: they count as unfinished now, not as reserved.
    mutating func added(_ count: Int) {
        reserved -= count
    }

    /// The producer's task was cancelled. Returns its continuation if it was waiting (the caller
    /// throws `CancellationError` through it, then lets in those behind it that now have room).
    mutating func cancel(_ ticket: Ticket) -> CheckedContinuation<Void, any Error>? {
        switch ticket.state {
        case .new:
            ticket.state = .cancelled
            return nil
        case .waiting(let continuation):
            ticket.state = .cancelled
            return continuation
        case .admitted, .cancelled:
            return nil
        }
    }
}
