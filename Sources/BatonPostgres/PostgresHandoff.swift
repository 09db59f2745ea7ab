import Baton
import BatonDurable
import Foundation

/// Claims that a submission makes, in its own inserting statement, for idle workers: those of the same
/// store object (``PostgresJobStore/parkClaim(worker:kinds:limit:lease:)``), handed over at the
/// workers' next claim with no `NOTIFY` and no claiming statement in between; failing those, one idle
/// worker of another store on the schema (``RemoteOffer``), to which the insert sends the claims in a
/// notification of its own (``RemoteHand``).
///
/// The jobs are inserted already running under the worker's lease, with a token drawn here, so a
/// handed-over job is claimed as a claiming statement would claim it: the same row, the same fencing.
/// What can go wrong costs time, never a guarantee: a hand-over that never arrives (the process died,
/// the worker stopped, the notification was lost with its connection) leaves a running job whose
/// lease expires, and it is claimed again like any orphan; ``retire(_:)`` gives back at once what a
/// stopping worker will not run.
///
/// Counting: a worker offers its free room, less what is already on its way to it or waiting for it,
/// and every claim of its withdraws the offer and leaves out the jobs still on their way
/// (``take(for:limit:)``), so the worker never holds more than its limit. Other stores learn of a
/// withdrawal late (``withdrawDelay``), so what they hand over is taken only as far as the worker's
/// offer still goes here (``receive(_:for:)``), and the rest is given back.
///
/// No object is released under the lock: what a change removes is handed out of it and dropped after
/// (arrays of plain values, such as claimed jobs moved from one list to another, may be freed there).
final class PostgresHandoff: Sendable {
    /// Jobs of one submission assigned to parked workers: job index → worker, token and lease length.
    struct Ticket: Sendable {
        let id: UInt64
        var workers: [Int: Hand] = [:]
        /// Set when the jobs go to a worker of another store (``RemoteOffer``): its offer, whose
        /// listening server process the insert checks before it hands them over.
        var remote: RemoteOffer?
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
        /// The server process that listens for this store's notifications (nil: not listening): other
        /// stores hand jobs over to this store's workers only while it is alive.
        var listenerPid: Int32?
        /// What other stores last heard of each parked worker's room (``RemoteOffer``), as far as
        /// this store knows: the room they believe it has.
        var published: [String: Int] = [:]
        var nextOffer: UInt64 = 0
        /// Offers of other stores' idle workers, by store and worker.
        var remote: [String: RemoteOffer] = [:]
        /// Jobs other stores handed over that a worker of this one took (for tests).
        var received = 0
        /// Workers whose smaller room will be told to other stores (``withdrawDelay``).
        var settling: Set<String> = []
        /// Claims under way, by worker (``beginClaim(_:)``), and what other stores handed over to the
        /// worker meanwhile: it waits for their end (``endClaim(_:room:)``).
        var claiming: [String: Int] = [:]
        var arrived: [String: [ClaimedJob]] = [:]
        /// When the listening server process started (with `listenerPid`, it names that process
        /// even where process ids are reused).
        var listenerStart: Int64 = 0
    }

    /// What a change took out of the state, to be released after the lock, and the offers to tell other
    /// stores of.
    private struct Removed {
        var parked: [Parked] = []
        var names: [String] = []
        var jobs: [[ClaimedJob]] = []
        var offers: [RemoteOffer] = []
        /// Workers whose smaller room is told to other stores after ``withdrawDelay``.
        var settle: [String] = []
    }

    private let state = Protected(State())
    /// Sends offers to the other stores (set by the store, see ``setPublisher(_:)``).
    private let publisher = Protected<(@Sendable ([RemoteOffer]) -> Void)?>(nil)
    /// This store object's name in offers and hand-overs.
    let key: String

    /// How long a worker's smaller room (a claim found jobs, a submission took the last of it) waits before
    /// other stores are told: a worker that runs a job and parks again within it, with the room other
    /// stores believe in, costs no notification at all (the benchmark's latency loop measured 0.3 ms
    /// more per sample with two notifications each). Meanwhile their submissions may hand jobs over
    /// that the worker's store then gives back. Zero: told at once.
    let withdrawDelay: Duration

    init(key: String = PostgresHandoff.newKey(), withdrawDelay: Duration = .milliseconds(50)) {
        self.key = key
        self.withdrawDelay = withdrawDelay
    }

    static func newKey() -> String {
        String(UInt64.random(in: 0...UInt64.max), radix: 36)
    }

    /// `publish` is called, outside any lock, with the offers to send when an idle worker's room
    /// changes as other stores know it.
    func setPublisher(_ publish: @escaping @Sendable ([RemoteOffer]) -> Void) {
        let old = publisher.withLock { publisher in
            defer { publisher = publish }
            return publisher
        }
        _ = old
    }

    private func finish(_ removed: Removed) {
        for worker in removed.settle {
            Task { [weak self, withdrawDelay] in
                try? await Task.sleep(for: withdrawDelay)
                self?.settle(worker)
            }
        }
        guard !removed.offers.isEmpty, let publish = publisher.withLock({ $0 }) else { return }
        publish(removed.offers)
    }

    /// Tells other stores `worker`'s room now, if it is not what they know (after ``withdrawDelay``).
    func settle(_ worker: String) {
        let removed = state.withLock { state -> Removed in
            var removed = Removed()
            state.settling.remove(worker)
            reoffer(worker, in: &state, &removed, immediately: true)
            return removed
        }
        finish(removed)
    }

    /// Adds to `removed` the offer to tell other stores of when `worker`'s room as they know it is no
    /// longer its parked room. An offer of room 0 withdraws it. A larger room is told at once; a
    /// smaller one after ``withdrawDelay`` unless `immediately`.
    private func reoffer(
        _ worker: String, in state: inout State, _ removed: inout Removed, immediately: Bool = false
    ) {
        guard state.listenerPid != nil else { return }
        let room = state.parked[worker]?.room ?? 0
        let known = state.published[worker] ?? 0
        guard room != known else { return }
        if room < known && !immediately && withdrawDelay > .zero {
            if state.settling.insert(worker).inserted { removed.settle.append(worker) }
            return
        }
        announce(worker, in: &state, &removed)
    }

    /// Adds to `removed` `worker`'s offer as it stands (its parked room, or 0), under a new sequence.
    private func announce(_ worker: String, in state: inout State, _ removed: inout Removed) {
        guard let pid = state.listenerPid else { return }
        let parked = state.parked[worker]
        let room = parked?.room ?? 0
        state.nextOffer += 1
        state.published[worker] = room > 0 ? room : nil
        removed.offers.append(
            RemoteOffer(
                store: key, worker: worker, sequence: state.nextOffer, room: room,
                lease: parked?.lease.storeSeconds ?? 0, pid: pid, started: state.listenerStart,
                kinds: parked.map { $0.kinds.sorted() } ?? []))
    }

    /// Tells other stores every offer again: each parked worker's room, and a withdrawal for each
    /// worker they may still believe parked.
    private func announceAll(in state: inout State, _ removed: inout Removed) {
        let workers = Set(state.parked.keys).union(state.published.keys).union(state.settling)
        state.published = [:]
        for worker in workers.sorted() { announce(worker, in: &state, &removed) }
    }

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
            reoffer(worker, in: &state, &removed)
            return removed
        }
        finish(removed)
    }

    /// A claim by `worker`: withdraws its offer and takes up to `limit` jobs handed over to it, higher
    /// priority first. `room`: what is left of `limit` for the claim itself, less the jobs still on
    /// their way to the worker (their submissions' inserts have not answered yet).
    func take(for worker: String, limit: Int) -> (jobs: [ClaimedJob], room: Int) {
        let (jobs, coming, removed) = state.withLock { state -> ([ClaimedJob], Int, Removed) in
            var removed = Removed()
            // Other stores keep its offer until the claim finds jobs (``busy(_:)``): a worker woken for
            // nothing parks again at once, and telling them twice would cost two notifications.
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
        finish(removed)
        let sorted = jobs.sorted { ($0.priority, $1.job.rawValue) > ($1.priority, $0.job.rawValue) }
        return (sorted, max(0, limit - jobs.count - coming))
    }

    /// A claim by `worker` that takes its handed-over jobs after its statement: withdraws the offer and
    /// says how many jobs wait for the worker or are on their way to it (the statement's claim leaves
    /// them room).
    func withdraw(_ worker: String) -> Int {
        let (pending, removed) = state.withLock { state -> (Int, Removed) in
            var removed = Removed()
            let pending = state.inFlight[worker, default: 0] + (state.inbox[worker]?.count ?? 0)
            if let old = state.parked.removeValue(forKey: worker) { removed.parked.append(old) }
            return (pending, removed)
        }
        finish(removed)
        return pending
    }

    /// A claim of `worker` starts: jobs other stores hand over to it until it ends wait for it.
    func beginClaim(_ worker: String) {
        state.withLock { $0.claiming[worker, default: 0] += 1 }
    }

    /// A claim of `worker` for `kinds` ended with `room` left of its limit (its limit less the jobs it
    /// returns): it takes as much of what other stores handed over meanwhile as that room holds beside
    /// the jobs still on their way to the worker from this store's submissions or waiting for it
    /// (`late`, higher priority first); when no other claim of the worker is under way, the rest is
    /// returned to be given back (`excess`), else it waits for that claim. `full`: no room is left.
    /// (Nil `kinds`: any.)
    func endClaim(
        _ worker: String, room: Int, kinds: [String]? = nil
    ) -> (late: [ClaimedJob], excess: [ClaimedJob], full: Bool) {
        state.withLock { state in
            let left = (state.claiming[worker] ?? 1) - 1
            state.claiming[worker] = left > 0 ? left : nil
            let room = max(0, room - state.inFlight[worker, default: 0] - (state.inbox[worker]?.count ?? 0))
            guard var waiting = state.arrived.removeValue(forKey: worker) else { return ([], [], room == 0) }
            var foreign: [ClaimedJob] = []
            if let kinds {
                foreign = waiting.filter { !kinds.contains($0.kind) }
                waiting.removeAll { !kinds.contains($0.kind) }
            }
            waiting.sort { ($0.priority, $1.job.rawValue) > ($1.priority, $0.job.rawValue) }
            let count = min(max(room, 0), waiting.count)
            let late = Array(waiting.prefix(count))
            state.received += count
            let rest = Array(waiting.dropFirst(count))
            if left > 0 {
                if !rest.isEmpty { state.arrived[worker] = rest }
                return (late, foreign, room == count)
            }
            return (late, rest + foreign, room == count)
        }
    }

    /// `worker`'s claim found jobs: other stores are told that its offer is withdrawn, if they still
    /// know one and it has not parked again meanwhile — at once when the claim filled the worker's room
    /// (`full`: it will not park again soon, and what they hand over would be given back), else after
    /// ``withdrawDelay``.
    func busy(_ worker: String, full: Bool = false) {
        let removed = state.withLock { state -> Removed in
            var removed = Removed()
            if state.parked[worker] == nil { reoffer(worker, in: &state, &removed, immediately: full) }
            return removed
        }
        finish(removed)
    }

    /// Assigns the eligible jobs of a submission (by index: kind and priority), higher priority first,
    /// then in index order, to parked workers of their kind, as far as their room goes. When no worker
    /// of this store takes any, to one idle worker of another store that offered its room
    /// (``RemoteOffer``), as far as its room and a notification's size (`sizes`: each job's share of
    /// it, estimated) go.
    func reserve(kinds: [String], priorities: [Int32], eligible: [Bool], sizes: [Int] = []) -> Ticket? {
        guard state.withLock({ !$0.parked.isEmpty || $0.remote.values.contains { $0.room > 0 } }),
            eligible.contains(true)
        else { return nil }
        let order = kinds.indices.filter { eligible[$0] }.sorted { (priorities[$0], $1) > (priorities[$1], $0) }
        let tokens = (0..<order.count).map { _ in Int64.random(in: 1..<(1 << 62)) }
        let (ticket, removed) = state.withLock { state -> (Ticket?, Removed) in
            var removed = Removed()
            guard !state.parked.isEmpty || !state.remote.isEmpty else { return (nil, removed) }
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
                    reoffer(worker, in: &state, &removed)
                }
                state.inFlight[worker, default: 0] += 1
            }
            if ticket.isEmpty {
                Self.reserveRemote(order: order, kinds: kinds, sizes: sizes, tokens: tokens, in: &state, &ticket)
                return (ticket.isEmpty ? nil : ticket, removed)
            }
            state.tickets[ticket.id] = reservedFor
            return (ticket, removed)
        }
        finish(removed)
        return ticket
    }

    /// The room of a notification that hands jobs over (PostgreSQL's limit is 8,000 bytes), less the
    /// message's own frame; each job takes ``jobShare`` and its text (``Ticket/remoteMessage(graph:expires:)``
    /// leaves out jobs the estimate let in that do not fit).
    static let messageBudget = 7_600

    /// ``reserve(kinds:priorities:eligible:sizes:)`` for another store's worker: of those with room for
    /// the first job that any can take, the one with the most room, then by name.
    private static func reserveRemote(
        order: [Int], kinds: [String], sizes: [Int], tokens: [Int64], in state: inout State, _ ticket: inout Ticket
    ) {
        // The offer for the first job (by priority, then age) that one has room and the kind for.
        let open = state.remote.values.filter { $0.room > 0 }
        let offered = Set(open.flatMap(\.kinds))
        guard let first = order.first(where: { offered.contains(kinds[$0]) }) else { return }
        var chosen: RemoteOffer?
        for offer in open where offer.kinds.contains(kinds[first]) {
            if let best = chosen, (best.room, best.store, best.worker) >= (offer.room, offer.store, offer.worker) {
                continue
            }
            chosen = offer
        }
        guard var offer = chosen else { return }
        var budget = messageBudget
        let lease = Duration.seconds(offer.lease)
        for (position, index) in order.enumerated() where offer.room > 0 && offer.kinds.contains(kinds[index]) {
            let size = (index < sizes.count ? sizes[index] : 0) + Self.jobShare
            guard size <= budget else { break }
            budget -= size
            ticket.workers[index] = Hand(worker: offer.worker, token: tokens[position], lease: lease)
            offer.room -= 1
        }
        guard !ticket.isEmpty else { return }
        state.remote[offer.slot] = offer
        ticket.remote = offer
    }

    /// What a job takes of a hand-over's notification beside its name, kind and input: its JSON keys,
    /// token and numbers (about 60 bytes), its identity and a comma (21).
    static let jobShare = 90

    /// An offer heard from another store: kept unless one sent after it is known already.
    func learn(_ offer: RemoteOffer) {
        guard offer.store != key else { return }
        let slot = offer.slot
        let old = state.withLock { state -> RemoteOffer? in
            let old = state.remote[slot]
            if let old, old.sequence >= offer.sequence { return nil }
            // A withdrawn offer is kept (room 0), so that an older one arriving late does not stand.
            state.remote[slot] = offer
            return old
        }
        _ = old
    }

    /// The insert found the server process behind `offer` gone (its store stopped listening, or its
    /// process died): every offer of that store that names that process is forgotten.
    func forget(_ offer: RemoteOffer) {
        let gone = state.withLock { state -> [RemoteOffer] in
            let gone = state.remote.values.filter {
                $0.store == offer.store && $0.pid == offer.pid && $0.started == offer.started
            }
            for old in gone { state.remote[old.slot] = nil }
            return gone
        }
        _ = gone
    }

    /// A submission that reserved `ticket`'s jobs for another store's worker did not send `count` of
    /// them (the notification would not fit, or the insert stored nothing): their room is given back
    /// here, unless a newer offer came meanwhile.
    func restore(_ ticket: Ticket, count: Int) {
        guard let offer = ticket.remote, count > 0 else { return }
        let slot = offer.slot
        state.withLock { state in
            guard state.remote[slot]?.sequence == offer.sequence else { return }
            state.remote[slot]?.room += count
        }
    }

    /// Another store handed `jobs` over to `worker` of this store: those its offer still has room for
    /// wait for its next claim; the rest are returned, to be given back (the worker claimed meanwhile,
    /// or another store's submission took the same room, or it stopped).
    func receive(_ jobs: [ClaimedJob], for worker: String) -> (taken: Int, rest: [ClaimedJob]) {
        let (taken, rest, removed) = state.withLock { state -> (Int, [ClaimedJob], Removed) in
            var removed = Removed()
            if let known = state.published[worker] {
                state.published[worker] = known > jobs.count ? known - jobs.count : nil
            }
            guard state.listenerPid != nil, !state.retired.contains(worker) else { return (0, jobs, removed) }
            guard let parked = state.parked[worker] else {
                // A claim of the worker is under way: the room it leaves decides, at its end.
                guard state.claiming[worker] != nil else { return (0, jobs, removed) }
                state.arrived[worker, default: []].append(contentsOf: jobs)
                return (0, [], removed)
            }
            guard jobs.allSatisfy({ parked.kinds.contains($0.kind) }) else { return (0, jobs, removed) }
            let count = min(parked.room, jobs.count)
            if count < parked.room {
                state.parked[worker]?.room -= count
            } else if let full = state.parked.removeValue(forKey: worker) {
                removed.parked.append(full)
            }
            reoffer(worker, in: &state, &removed)
            state.inbox[worker, default: []].append(contentsOf: jobs.prefix(count))
            state.received += count
            return (count, Array(jobs.dropFirst(count)), removed)
        }
        finish(removed)
        return (taken, rest)
    }

    /// The server process listening for this store's notifications (nil: none now) and when it
    /// started. A new one is told to other stores with every offer (``announceAll(in:_:)``: withdrawals
    /// of the workers they may still believe parked too); and the offers this store knew of are
    /// forgotten — it may have missed their withdrawals — until the other stores tell them again
    /// (the store asks them to, see ``PostgresJobStore/message(_:)``).
    func listening(as pid: Int32?, started: Int64 = 0) {
        let (removed, forgotten) = state.withLock { state -> (Removed, [String: RemoteOffer]) in
            var removed = Removed()
            state.listenerPid = pid
            state.listenerStart = started
            guard pid != nil else { return (removed, [:]) }
            let forgotten = state.remote
            state.remote = [:]
            announceAll(in: &state, &removed)
            return (removed, forgotten)
        }
        _ = forgotten
        finish(removed)
    }

    /// Tells other stores every offer again (a store that started listening asked).
    func reofferAll() {
        let removed = state.withLock { state -> Removed in
            var removed = Removed()
            announceAll(in: &state, &removed)
            return removed
        }
        finish(removed)
    }

    /// How many jobs handed over by other stores this store's workers took; for tests.
    var received: Int { state.withLock { $0.received } }

    /// The offer of another store's `worker`, as this store knows it; for tests.
    func remoteOffer(store: String, worker: String) -> RemoteOffer? {
        state.withLock { $0.remote[RemoteOffer.slot(store, worker)] }
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
            reoffer(worker, in: &state, &removed, immediately: true)
            return (state.inbox.removeValue(forKey: worker) ?? [], removed)
        }
        finish(removed)
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

/// An idle worker's room as its store tells the other stores of its schema, in a notification on the
/// wake-up channel (``PostgresJobStore/message(_:)``): a submission through any of them may then
/// claim its due independent jobs for that worker in its insert, and send the claims to the worker's
/// store in a notification of the same transaction (``RemoteHand``). `pid` and `started`: the server
/// process that listens for the worker's store; the insert hands nothing over when it is gone. `sequence` orders
/// one store's offers; room 0 withdraws the worker's offer.
struct RemoteOffer: Codable, Sendable, Equatable {
    var store: String
    var worker: String
    var sequence: UInt64
    var room: Int
    /// The worker's lease, in seconds.
    var lease: Double
    var pid: Int32
    /// When that server process started (microseconds since 1970): a process id can be reused.
    var started: Int64
    var kinds: [String]

    /// Where a store keeps the offer of another store's worker (``PostgresHandoff``).
    var slot: String { Self.slot(store, worker) }
    static func slot(_ store: String, _ worker: String) -> String { store + "\u{1}" + worker }

    enum CodingKeys: String, CodingKey {
        case store = "s", worker = "w", sequence = "q", room = "r", lease = "l", pid = "p", started = "b"
        case kinds = "k"
    }
}

/// Jobs claimed for a worker of another store by a submission's insert, as its notification carries
/// them: everything the worker's claim returns but the identities, which the insert appends after a
/// line break (`run:job,job,…`, in the order of `jobs`).
struct RemoteHand: Codable, Sendable {
    struct Job: Codable, Sendable {
        var token: Int64
        var name: String
        var kind: String
        var input: Data
        var maxAttempts: Int
        var priority: Int
        var timeout: Double?

        enum CodingKeys: String, CodingKey {
            case token = "t", name = "n", kind = "k", input = "i", maxAttempts = "m", priority = "p", timeout = "o"
        }
    }

    var store: String
    var worker: String
    /// When the leases end (store time, seconds).
    var expires: Double
    var jobs: [Job]

    enum CodingKeys: String, CodingKey {
        case store = "s", worker = "w", expires = "e", jobs = "j"
    }

    /// The store a notification's text hands jobs over to (`H`, the store's key, a space), read without
    /// decoding the rest: every store hears every hand-over.
    static func target(of payload: Substring) -> Substring? {
        guard payload.first == "H", let space = payload.firstIndex(of: " ") else { return nil }
        return payload[payload.index(after: payload.startIndex)..<space]
    }

    /// The claimed jobs of a notification's text (`H`, store key, space, JSON, line break, `run:ids`);
    /// nil when it is not one.
    static func decode(_ payload: Substring) -> (RemoteHand, run: Int64, ids: [Int64])? {
        guard let target = target(of: payload), let newline = payload.lastIndex(of: "\n"),
            target.endIndex < newline
        else { return nil }
        let json = payload[payload.index(after: target.endIndex)..<newline]
        let tail = payload[payload.index(after: newline)...]
        guard let hand = try? JSONDecoder().decode(RemoteHand.self, from: Data(json.utf8)), hand.store == target,
            let colon = tail.firstIndex(of: ":"), let run = Int64(tail[..<colon])
        else { return nil }
        let ids = tail[tail.index(after: colon)...].split(separator: ",").compactMap { Int64($0) }
        guard ids.count == hand.jobs.count else { return nil }
        return (hand, run, ids)
    }

    func claimed(run: Int64, ids: [Int64]) -> [ClaimedJob] {
        zip(jobs, ids).map { job, id in
            ClaimedJob(
                lease: Lease(job: DurableJobID(id), token: job.token), run: DurableRunID(run), name: job.name,
                kind: job.kind, input: job.input, attempt: 1, maxAttempts: job.maxAttempts, priority: job.priority,
                timeout: job.timeout.map { .seconds($0) }, leaseExpires: Date(storeTime: expires))
        }
    }
}

extension PostgresHandoff.Ticket {
    /// The notification text that sends the ticket's jobs to their worker of another store, less the
    /// identities the insert appends, and the ticket cut to the jobs it carries (the estimate of their
    /// size may have let in more than fit, in index order, as the insert lists them); nil when the
    /// ticket's jobs stay in this store, or none fits.
    func remoteMessage(graph: GraphSpec, expires: Double) -> (text: String, ticket: Self)? {
        guard let remote else { return nil }
        let encoder = JSONEncoder()
        var ticket = self
        var jobs: [RemoteHand.Job] = []
        // The frame: "H", the key, a space, the JSON's own keys and brackets, the run's identity.
        var size = 1 + remote.store.utf8.count + remote.worker.utf8.count * 6 + 120
        // What fits is kept in the order the jobs were reserved in (priority, then age), and sent in
        // index order, as the insert lists their identities.
        var kept: [Int: RemoteHand.Job] = [:]
        let byPriority = workers.keys.sorted { index, other in
            let (first, second) = (
                index < graph.jobs.count ? graph.jobs[index].priority : .min,
                other < graph.jobs.count ? graph.jobs[other].priority : .min
            )
            return (first, other) > (second, index)
        }
        for index in byPriority {
            guard index < graph.jobs.count, let hand = workers[index] else {
                ticket.workers[index] = nil
                continue
            }
            let job = graph.jobs[index]
            let entry = RemoteHand.Job(
                token: hand.token, name: job.name, kind: job.kind, input: job.input ?? Data(),
                maxAttempts: job.retry.maxAttempts, priority: job.priority, timeout: job.timeout?.storeSeconds)
            let share = ((try? encoder.encode(entry))?.count ?? Int.max / 2) + 22
            guard size + share < 7_990 else {
                ticket.workers[index] = nil
                continue
            }
            size += share
            kept[index] = entry
        }
        jobs = kept.keys.sorted().compactMap { kept[$0] }
        guard !jobs.isEmpty else { return nil }
        let hand = RemoteHand(store: remote.store, worker: remote.worker, expires: expires, jobs: jobs)
        guard let json = try? encoder.encode(hand) else { return nil }
        let text = "H" + remote.store + " " + String(decoding: json, as: UTF8.self) + "\n"
        // The insert appends the run's identity and each job's (at most 20 characters each, and a comma).
        guard text.utf8.count + 21 * (jobs.count + 1) < 8_000 else { return nil }
        return (text, ticket)
    }
}
