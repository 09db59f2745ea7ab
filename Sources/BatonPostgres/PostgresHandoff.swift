import Baton
import BatonDurable
import Foundation

/// Claims that a submission makes, in its own inserting statement, for the idle workers of the same
/// store object (``PostgresJobStore/parkClaim(worker:kinds:limit:lease:)``), and hands them over at the
/// workers' next ``PostgresJobStore/claim(worker:kinds:limit:lease:)`` — with no `NOTIFY` and no
/// claiming statement in between.
///
/// The jobs are inserted already running under the worker's lease, with a token drawn here, so a
/// handed-over job is claimed exactly as a claiming statement would claim it: the same row, the same
/// fencing. What can go wrong costs time, never a guarantee: a hand-over that never arrives (the
/// process died, the worker stopped) leaves a running job whose lease expires, and it is claimed again
/// like any orphan; ``retire(_:)`` gives back at once what a stopping worker will not run.
///
/// Counting: a worker offers at most its free room, and every claim of its withdraws the offer. Jobs
/// reserved by a submission still in flight are left out of the worker's next claim (``take(for:limit:)``),
/// so the worker never holds more than the room it offered.
final class PostgresHandoff: Sendable {
    /// Jobs of one submission assigned to parked workers: job index → worker, token and lease expiry.
    struct Ticket: Sendable {
        let id: UInt64
        var workers: [Int: (worker: String, token: Int64, expires: Double)] = [:]
        var isEmpty: Bool { workers.isEmpty }
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
        /// Workers that unregistered: what arrives for them is given back.
        var retired: Set<String> = []
        var nextTicket: UInt64 = 0
    }

    private let state = Protected(State())

    /// `worker` has room for `limit` jobs of `kinds` and claims again when woken (0: withdraws the offer).
    func park(_ worker: String, kinds: [String], limit: Int, lease: Duration) {
        let offer = limit > 0 ? Parked(kinds: Set(kinds), room: limit, lease: lease) : nil
        let replaced = state.withLock { state in
            state.retired.remove(worker)
            return offer.map { state.parked.updateValue($0, forKey: worker) }
                ?? state.parked.removeValue(forKey: worker)
        }
        _ = replaced  // released outside the lock
    }

    /// A claim by `worker`: withdraws its offer and takes up to `limit` jobs handed over to it. Also
    /// says how many more are on their way (reserved by submissions in flight), which the claim must
    /// leave room for.
    func take(for worker: String, limit: Int) -> (jobs: [ClaimedJob], coming: Int) {
        let (jobs, coming, withdrawn) = state.withLock { state in
            let withdrawn = state.parked.removeValue(forKey: worker)
            let coming = state.inFlight[worker, default: 0]
            guard var waiting = state.inbox.removeValue(forKey: worker) else {
                return ([ClaimedJob](), coming, withdrawn)
            }
            let count = min(limit, waiting.count)
            let jobs = Array(waiting.prefix(count))
            waiting.removeFirst(count)
            if !waiting.isEmpty { state.inbox[worker] = waiting }
            return (jobs, coming, withdrawn)
        }
        _ = withdrawn  // released outside the lock
        return (jobs, coming)
    }

    /// Assigns the eligible jobs of a submission (by index: kind and priority), higher priority first,
    /// to parked workers of their kind, as far as their room goes. `now`: the submission's time.
    func reserve(kinds: [String], priorities: [Int32], eligible: [Bool], now: Double) -> Ticket? {
        guard state.withLock({ !$0.parked.isEmpty }), eligible.contains(true) else { return nil }
        let order = kinds.indices.filter { eligible[$0] }.sorted { (priorities[$0], $1) > (priorities[$1], $0) }
        var filled: [Parked] = []
        defer { filled = [] }  // released outside the lock
        return state.withLock { state -> Ticket? in
            guard !state.parked.isEmpty else { return nil }
            state.nextTicket += 1
            var ticket = Ticket(id: state.nextTicket)
            var reservedFor: [String] = []
            for index in order {
                if state.parked.isEmpty { break }
                guard
                    let worker = state.parked.keys.sorted().first(where: { name in
                        state.parked[name].map { $0.room > 0 && $0.kinds.contains(kinds[index]) } ?? false
                    }),
                    let parked = state.parked[worker]
                else { continue }
                ticket.workers[index] = (
                    worker, Int64.random(in: 1..<(1 << 62)), now + parked.lease.storeSeconds
                )
                reservedFor.append(worker)
                state.parked[worker]?.room -= 1
                if parked.room == 1, let full = state.parked.removeValue(forKey: worker) { filled.append(full) }
                state.inFlight[worker, default: 0] += 1
            }
            guard !ticket.isEmpty else { return nil }
            state.tickets[ticket.id] = reservedFor
            return ticket
        }
    }

    /// The submission's statement stored the ticket's jobs (`jobs`: the claimed jobs it built). Puts them
    /// in their workers' inboxes; returns those whose workers have retired since (to give back).
    /// Does nothing for a ticket already delivered or cancelled.
    func deliver(_ ticket: Ticket, _ jobs: [(worker: String, job: ClaimedJob)]) -> [ClaimedJob] {
        state.withLock { state -> [ClaimedJob] in
            guard let reserved = state.tickets.removeValue(forKey: ticket.id) else { return [] }
            var orphans: [ClaimedJob] = []
            for (worker, job) in jobs {
                if state.retired.contains(worker) {
                    orphans.append(job)
                } else {
                    state.inbox[worker, default: []].append(job)
                }
            }
            Self.settle(reserved, in: &state)
            return orphans
        }
    }

    /// The submission stored none of the ticket's jobs (it failed, or a run with its unique key exists).
    func cancel(_ ticket: Ticket) {
        state.withLock { state in
            guard let reserved = state.tickets.removeValue(forKey: ticket.id) else { return }
            Self.settle(reserved, in: &state)
        }
    }

    /// Ends the reservations of a ticket; a retired worker with none left is forgotten.
    private static func settle(_ reserved: [String], in state: inout State) {
        for worker in reserved {
            let left = state.inFlight[worker, default: 0] - 1
            if left > 0 {
                state.inFlight[worker] = left
            } else {
                state.inFlight[worker] = nil
                state.retired.remove(worker)
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
        let (jobs, withdrawn) = state.withLock { state in
            // Remembered only while something may still arrive for it.
            if state.inFlight[worker] != nil { state.retired.insert(worker) }
            return (state.inbox.removeValue(forKey: worker) ?? [], state.parked.removeValue(forKey: worker))
        }
        _ = withdrawn  // released outside the lock
        return jobs
    }
}
