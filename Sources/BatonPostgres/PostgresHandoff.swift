import Baton
import BatonDurable
import Foundation

/// Claims that a submission makes, in its own inserting statement, for the idle workers of the same
/// store object (``PostgresJobStore/parkClaim(worker:kinds:limit:lease:)``), and hands them over at the
/// workers' next claim — with no `NOTIFY` and no claiming statement in between.
///
/// The jobs are inserted already running under the worker's lease, with a token drawn here, so a
/// handed-over job is claimed as a claiming statement would claim it: the same row, the same fencing.
/// What can go wrong costs time, never a guarantee: a hand-over that never arrives (the process died,
/// the worker stopped) leaves a running job whose lease expires, and it is claimed again like any
/// orphan; ``retire(_:)`` gives back at once what a stopping worker will not run.
///
/// Counting: a worker offers its free room, less what is already on its way to it or waiting for it,
/// and every claim of its withdraws the offer and leaves out the jobs still on their way
/// (``take(for:limit:)``), so the worker never holds more than its limit.
///
/// Nothing is released under the lock: what a change removes is handed out of it and dropped after.
final class PostgresHandoff: Sendable {
    /// Jobs of one submission assigned to parked workers: job index → worker, token and lease length.
    struct Ticket: Sendable {
        let id: UInt64
        var workers: [Int: Hand] = [:]
        var isEmpty: Bool { workers.isEmpty }
    }

    struct Hand: Sendable {
        let worker: String
        let token: Int64
        let lease: Duration
    }

    private struct Parked {
        var kinds: Set<String>
        var room: Int
        var lease: Duration
    }

    private struct State {
        var parked: [String: Parked] = [:]
        /// Claimed jobs not yet taken by their workers' claims.
        var inbox: [String: [ClaimedJob]] = [:]
        /// Jobs reserved for each worker by submissions whose statements have not answered yet.
        var inFlight: [String: Int] = [:]
        /// Open tickets: ticket → the workers it reserved for (one entry per job).
        var tickets: [UInt64: [String]] = [:]
        /// Workers that unregistered while jobs were on their way to them: those are given back.
        var retired: Set<String> = []
        var nextTicket: UInt64 = 0
    }

    /// What a change took out of the state, to be released after the lock.
    private struct Removed {
        var parked: [Parked] = []
        var names: [String] = []
        var jobs: [[ClaimedJob]] = []
    }

    private let state = Protected(State())

    /// `worker` has room for `limit` jobs of `kinds` and claims again when woken (0: withdraws the offer).
    /// Jobs already on their way to it or waiting for it count against that room.
    func park(_ worker: String, kinds: [String], limit: Int, lease: Duration) {
        let kinds = Set(kinds)
        let removed = state.withLock { state -> Removed in
            var removed = Removed()
            if let name = state.retired.remove(worker) { removed.names.append(name) }
            let pending = state.inFlight[worker, default: 0] + (state.inbox[worker]?.count ?? 0)
            let room = limit - pending
            if room > 0 {
                if let old = state.parked.updateValue(Parked(kinds: kinds, room: room, lease: lease), forKey: worker) {
                    removed.parked.append(old)
                }
            } else if let old = state.parked.removeValue(forKey: worker) {
                removed.parked.append(old)
            }
            return removed
        }
        _ = removed
    }

    /// A claim by `worker`: withdraws its offer and takes up to `limit` jobs handed over to it, higher
    /// priority first. `room`: what is left of `limit` for the claim itself, less the jobs still on
    /// their way to the worker (their submissions' inserts have not answered yet).
    func take(for worker: String, limit: Int) -> (jobs: [ClaimedJob], room: Int) {
        let (jobs, coming, removed) = state.withLock { state -> ([ClaimedJob], Int, Removed) in
            var removed = Removed()
            if let old = state.parked.removeValue(forKey: worker) { removed.parked.append(old) }
            let coming = state.inFlight[worker, default: 0]
            guard var waiting = state.inbox.removeValue(forKey: worker) else { return ([], coming, removed) }
            let count = min(max(limit, 0), waiting.count)
            let jobs = Array(waiting.prefix(count))
            if count < waiting.count {
                waiting.removeFirst(count)
                state.inbox[worker] = waiting
            } else {
                removed.jobs.append(waiting)
            }
            return (jobs, coming, removed)
        }
        _ = removed
        let sorted = jobs.sorted { ($0.priority, $1.job.rawValue) > ($1.priority, $0.job.rawValue) }
        return (sorted, max(0, limit - jobs.count - coming))
    }

    /// A claim by `worker` that takes its handed-over jobs after its statement: withdraws the offer and
    /// says how many jobs wait for the worker or are on their way to it (the statement's claim leaves
    /// them room).
    func withdraw(_ worker: String) -> Int {
        let (pending, removed) = state.withLock { state -> (Int, Parked?) in
            let pending = state.inFlight[worker, default: 0] + (state.inbox[worker]?.count ?? 0)
            return (pending, state.parked.removeValue(forKey: worker))
        }
        _ = removed
        return pending
    }

    /// Assigns the eligible jobs of a submission (by index: kind and priority), higher priority first,
    /// then in index order, to parked workers of their kind, as far as their room goes.
    func reserve(kinds: [String], priorities: [Int32], eligible: [Bool]) -> Ticket? {
        guard state.withLock({ !$0.parked.isEmpty }), eligible.contains(true) else { return nil }
        let order = kinds.indices.filter { eligible[$0] }.sorted { (priorities[$0], $1) > (priorities[$1], $0) }
        let tokens = (0..<order.count).map { _ in Int64.random(in: 1..<(1 << 62)) }
        let (ticket, removed) = state.withLock { state -> (Ticket?, Removed) in
            var removed = Removed()
            guard !state.parked.isEmpty else { return (nil, removed) }
            state.nextTicket += 1
            var ticket = Ticket(id: state.nextTicket)
            var reservedFor: [String] = []
            for (position, index) in order.enumerated() {
                if state.parked.isEmpty { break }
                // The first parked worker by name with room for this kind.
                var chosen: String?
                for (name, parked) in state.parked where parked.kinds.contains(kinds[index]) {
                    if chosen.map({ name < $0 }) ?? true { chosen = name }
                }
                guard let worker = chosen, let parked = state.parked[worker] else { continue }
                ticket.workers[index] = Hand(worker: worker, token: tokens[position], lease: parked.lease)
                reservedFor.append(worker)
                if parked.room > 1 {
                    state.parked[worker]?.room -= 1
                } else if let full = state.parked.removeValue(forKey: worker) {
                    removed.parked.append(full)
                }
                state.inFlight[worker, default: 0] += 1
            }
            guard !ticket.isEmpty else { return (nil, removed) }
            state.tickets[ticket.id] = reservedFor
            return (ticket, removed)
        }
        _ = removed
        return ticket
    }

    /// The submission's statement stored the ticket's jobs (`jobs`: the claimed jobs it built). Puts them
    /// in their workers' inboxes; returns those whose workers have retired since (to give back).
    /// Does nothing for a ticket already delivered or cancelled.
    func deliver(_ ticket: Ticket, _ jobs: [(worker: String, job: ClaimedJob)]) -> [ClaimedJob] {
        let (orphans, removed) = state.withLock { state -> ([ClaimedJob], Removed) in
            var removed = Removed()
            guard let reserved = state.tickets.removeValue(forKey: ticket.id) else { return ([], removed) }
            var orphans: [ClaimedJob] = []
            for (worker, job) in jobs {
                if state.retired.contains(worker) {
                    orphans.append(job)
                } else {
                    state.inbox[worker, default: []].append(job)
                }
            }
            Self.settle(reserved, in: &state, removed: &removed)
            return (orphans, removed)
        }
        _ = removed
        return orphans
    }

    /// The submission stored none of the ticket's jobs (it failed, or a run with its unique key exists).
    /// Returns whether that ended reservations (a worker's claim may have left them room: wake it).
    @discardableResult
    func cancel(_ ticket: Ticket) -> Bool {
        let removed = state.withLock { state -> Removed? in
            var removed = Removed()
            guard let reserved = state.tickets.removeValue(forKey: ticket.id) else { return nil }
            Self.settle(reserved, in: &state, removed: &removed)
            return removed
        }
        return removed != nil
    }

    /// Ends the reservations of a ticket; a retired worker with none left is forgotten.
    private static func settle(_ reserved: [String], in state: inout State, removed: inout Removed) {
        removed.names += reserved
        for worker in reserved {
            let left = state.inFlight[worker, default: 0] - 1
            if left > 0 {
                state.inFlight[worker] = left
            } else {
                state.inFlight[worker] = nil
                if let name = state.retired.remove(worker) { removed.names.append(name) }
            }
        }
    }

    /// The room `worker` offers now (nil: none); for tests.
    func offer(of worker: String) -> Int? {
        state.withLock { $0.parked[worker]?.room }
    }

    /// `worker` stopped: withdraws its offer and returns what was handed over and not taken; what arrives
    /// for it later is returned by ``deliver(_:_:)``.
    func retire(_ worker: String) -> [ClaimedJob] {
        let (jobs, removed) = state.withLock { state -> ([ClaimedJob], Removed) in
            var removed = Removed()
            // Remembered only while something may still arrive for it.
            if state.inFlight[worker] != nil { state.retired.insert(worker) }
            if let old = state.parked.removeValue(forKey: worker) { removed.parked.append(old) }
            return (state.inbox.removeValue(forKey: worker) ?? [], removed)
        }
        _ = removed
        return jobs
    }
}

extension PostgresHandoff.Ticket {
    /// The hand-over values of ``PostgresJobStore/SubmitIndependent`` ($19–$22) for `count` jobs, with
    /// leases from `now` (the time this try of the insert is sent).
    func values(count: Int, now: Double) -> (owners: [String], tokens: [Int64], expiries: [Double]) {
        var owners = [String](repeating: "", count: count)
        var tokens = [Int64](repeating: 0, count: count)
        var expiries = [Double](repeating: 0, count: count)
        for (index, hand) in workers where index < count {
            owners[index] = hand.worker
            tokens[index] = hand.token
            expiries[index] = now + hand.lease.storeSeconds
        }
        return (owners, tokens, expiries)
    }
}

/// Where a submission's hand-over stands across the tries of its insert.
final class HandoverProgress: Sendable {
    private let state = Protected((earliest: Double?.none, delivered: false))

    /// A try of the insert is about to be sent at `now`: the time its leases count from, or nil when
    /// the jobs were handed over already (the try then stores them ready).
    func sending(at now: Double) -> Double? {
        state.withLock { state in
            guard !state.delivered else { return nil }
            state.earliest = min(state.earliest ?? now, now)
            return now
        }
    }

    /// The hand-over is being made: the earliest time a try was sent at, or nil when none was sent or
    /// it was made already.
    func delivering() -> Double? {
        state.withLock { state in
            guard !state.delivered, let earliest = state.earliest else { return nil }
            state.delivered = true
            return earliest
        }
    }
}
