import Baton
import BatonDurable
import Foundation

/// The worker side of hand-overs: idle workers' offers of room, and the jobs that submissions claimed
/// for them.
///
/// **How a hand-over goes.** An idle worker offers its room (``PostgresJobStore/parkClaim(worker:kinds:limit:lease:)``):
/// the store writes the offer to the `offers` table under a key of its own, with the identity of the
/// server process that listens for its wake-ups. A submission of independent jobs, in any process,
/// picks one live offer in its inserting statement, inserts the due jobs that fit already running
/// under that worker's lease, and sends their claims in its `NOTIFY` (see
/// ``PostgresJobStore/SubmitIndependent``). The listener of the store that made the offer puts them in
/// the worker's inbox (``receive(key:jobs:)``) and wakes it; the worker's next claim takes them
/// (``take(for:limit:)``) with no statement: submit → start is the insert and the notification.
///
/// **Counting.** The offer's row counts the jobs handed over under it (`handed`); the store counts those
/// that arrived (`received`). The difference is on its way. A claim of the worker withdraws the offer
/// in its claiming statement and claims that many fewer jobs; an offer made again offers that many
/// fewer — so the worker never holds more than its limit. Writes of an offer carry a sequence number,
/// and the row keeps the latest: an offer written late never undoes the withdrawal of a claim made
/// after it.
///
/// What can go wrong costs time, never a guarantee: a notification that never arrives (the listening
/// connection dropped, the process died) leaves running jobs whose lease expires, and they are claimed
/// again like any orphan; an offer whose listening server process has ended is skipped by submissions;
/// ``retire(_:)`` gives back what a stopping worker will not run.
///
/// Nothing is released under the lock: what a change removes is handed out of it and dropped after.
final class PostgresHandoff: Sendable {
    /// One worker's offers, under one key for the life of the worker in this store.
    private struct Offers {
        let key: String
        /// Whether an offer with room may stand in the table (no claim has withdrawn it since).
        var isOpen = false
        /// Jobs handed over under this key that arrived here.
        var received: Int64 = 0
        var retired = false
    }

    /// An offer to write (`room` 0: none).
    struct Offer: Sendable, Equatable {
        let key: String
        let worker: String
        let kinds: [String]
        let room: Int
        let lease: Duration
        let sequence: Int64
        let received: Int64
    }

    /// What a claiming statement must withdraw: the worker's open offer.
    struct Withdrawal: Sendable, Equatable {
        let key: String
        let sequence: Int64
        let received: Int64
    }

    private struct State {
        var workers: [String: Offers] = [:]
        /// key → worker, for every key this store has used (retired ones too).
        var keys: [String: String] = [:]
        /// Claimed jobs not yet taken by their workers' claims.
        var inbox: [String: [ClaimedJob]] = [:]
        var sequence: Int64 = 0
    }

    private let state = Protected(State())

    /// `worker` has room for `limit` jobs of `kinds` and claims again when woken. Returns the offer to
    /// write (the room less the jobs waiting for the worker), or nil when there is none to write (no
    /// room, and no open offer to close).
    func park(_ worker: String, kinds: [String], limit: Int, lease: Duration) -> Offer? {
        let kinds = Array(Set(kinds)).sorted()
        let (offer, removed) = state.withLock { state -> (Offer?, Offers?) in
            var removed: Offers?
            if state.workers[worker]?.retired == true { removed = state.workers.removeValue(forKey: worker) }
            var offers = state.workers[worker] ?? Offers(key: UUID().uuidString)
            state.keys[offers.key] = worker
            let room = max(0, limit - (state.inbox[worker]?.count ?? 0))
            guard room > 0 || offers.isOpen else {
                state.workers[worker] = offers
                return (nil, removed)
            }
            state.sequence += 1
            // An offer of no room keeps the offer counted open: if its write fails, a claim withdraws it.
            if room > 0 { offers.isOpen = true }
            state.workers[worker] = offers
            let offer = Offer(
                key: offers.key, worker: worker, kinds: kinds, room: room, lease: lease, sequence: state.sequence,
                received: offers.received)
            return (offer, removed)
        }
        _ = removed
        return offer
    }

    /// A claim by `worker`: takes up to `limit` jobs handed over to it, higher priority first, and says
    /// what its claiming statement (if it makes one) must withdraw.
    func take(for worker: String, limit: Int) -> (jobs: [ClaimedJob], withdrawal: Withdrawal?) {
        let (jobs, withdrawal, removed) = state.withLock { state -> ([ClaimedJob], Withdrawal?, [ClaimedJob]) in
            var withdrawal: Withdrawal?
            if var offers = state.workers[worker], offers.isOpen, !offers.retired {
                state.sequence += 1
                withdrawal = Withdrawal(key: offers.key, sequence: state.sequence, received: offers.received)
                offers.isOpen = false  // the statement's withdrawal settles it in the table
                state.workers[worker] = offers
            }
            guard var waiting = state.inbox.removeValue(forKey: worker) else { return ([], withdrawal, []) }
            waiting.sort { ($0.priority, $1.job.rawValue) > ($1.priority, $0.job.rawValue) }
            let count = min(max(limit, 0), waiting.count)
            let jobs = Array(waiting.prefix(count))
            var removed: [ClaimedJob] = []
            if count < waiting.count {
                waiting.removeFirst(count)
                state.inbox[worker] = waiting
            } else {
                removed = waiting
            }
            return (jobs, withdrawal, removed)
        }
        _ = removed
        return (jobs, withdrawal)
    }

    /// A claiming statement that withdrew `withdrawal` failed: the offer stays open in the table, and the
    /// next claim withdraws it.
    func withdrawalFailed(_ withdrawal: Withdrawal, worker: String) {
        state.withLock { state in
            guard var offers = state.workers[worker], offers.key == withdrawal.key, !offers.retired else { return }
            offers.isOpen = true
            state.workers[worker] = offers
        }
    }

    /// Jobs a submission handed over under `key` arrived. Returns nil when the key is not this store's
    /// (another process's offer: nothing to do); else the jobs to give back (their worker has stopped).
    func receive(key: String, jobs: [ClaimedJob]) -> [ClaimedJob]? {
        state.withLock { state -> [ClaimedJob]? in
            guard let worker = state.keys[key] else { return nil }
            guard var offers = state.workers[worker], offers.key == key, !offers.retired else { return jobs }
            offers.received += Int64(jobs.count)
            state.workers[worker] = offers
            state.inbox[worker, default: []].append(contentsOf: jobs)
            return []
        }
    }

    /// Whether `key` names offers of this store.
    func owns(key: Substring) -> Bool {
        state.withLock { $0.keys[String(key)] != nil }
    }

    /// How many jobs wait for `worker`'s claim.
    func waiting(for worker: String) -> Int {
        state.withLock { $0.inbox[worker]?.count ?? 0 }
    }

    /// `worker` stopped: returns the key of its offers (to delete) and what was handed over and not
    /// taken; what arrives for it later is returned by ``receive(key:jobs:)``.
    func retire(_ worker: String) -> (key: String?, jobs: [ClaimedJob]) {
        state.withLock { state in
            var key: String?
            if var offers = state.workers[worker] {
                offers.retired = true
                key = offers.key
                state.workers[worker] = offers
            }
            return (key, state.inbox.removeValue(forKey: worker) ?? [])
        }
    }

    /// The key of `worker`'s offers in this store (nil: it never offered); for tests.
    func key(of worker: String) -> String? {
        state.withLock { $0.workers[worker]?.key }
    }
}

/// The claims of a hand-over as its `NOTIFY` carries them: `h`, the offer's key, a space, and a JSON
/// object — `e` the lease expiry, `r` the run, `j` one array per job: id, token, name, kind, input
/// (base64, or null), maximum attempts, priority, timeout (or null).
enum HandoverNote {
    /// The key of a hand-over's notification, or nil when the payload is not one.
    static func key(of payload: String) -> Substring? {
        guard payload.hasPrefix("h"), let space = payload.firstIndex(of: " ") else { return nil }
        return payload[payload.index(after: payload.startIndex)..<space]
    }

    /// The claimed jobs of a hand-over's notification.
    static func jobs(of payload: String) throws -> [ClaimedJob] {
        guard let space = payload.firstIndex(of: " ") else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "no key")) }
        let note = try JSONDecoder().decode(Note.self, from: Data(payload[payload.index(after: space)...].utf8))
        let expires = Date(storeTime: note.e)
        return note.j.map { entry in
            ClaimedJob(
                lease: Lease(job: DurableJobID(entry.id), token: entry.token), run: DurableRunID(note.r),
                name: entry.name, kind: entry.kind, input: entry.input, attempt: 1, maxAttempts: entry.maxAttempts,
                priority: entry.priority, timeout: entry.timeout.map { .seconds($0) }, leaseExpires: expires)
        }
    }

    /// The most a hand-over's jobs may take of a notification's payload (PostgreSQL's limit: 8,000
    /// bytes), counted by ``size(name:kind:input:)``.
    static let budget = 7000

    /// An upper bound of the bytes a job takes in a hand-over's payload: every character of its name and
    /// kind escaped (6 bytes), its input in base64 with PostgreSQL's line breaks escaped, and the rest.
    static func size(name: String, kind: String, input: Data?) -> Int {
        let input = input.map { ($0.count + 2) / 3 * 4 + ($0.count / 57 + 1) * 2 } ?? 0
        return 96 + 6 * (name.utf8.count + kind.utf8.count) + input
    }

    private struct Note: Decodable {
        let e: Double
        let r: Int64
        let j: [Entry]
    }

    private struct Entry: Decodable {
        let id: Int64
        let token: Int64
        let name: String
        let kind: String
        let input: Data
        let maxAttempts: Int
        let priority: Int
        let timeout: Double?

        init(from decoder: any Decoder) throws {
            var values = try decoder.unkeyedContainer()
            id = try values.decode(Int64.self)
            token = try values.decode(Int64.self)
            name = try values.decode(String.self)
            kind = try values.decode(String.self)
            let text = try values.decodeIfPresent(String.self)
            guard let data = text.map({ Data(base64Encoded: $0, options: .ignoreUnknownCharacters) }) ?? Data()
            else {
                throw DecodingError.dataCorruptedError(in: values, debugDescription: "input is not base64")
            }
            input = data
            maxAttempts = try values.decode(Int.self)
            priority = try values.decode(Int.self)
            timeout = try values.decodeIfPresent(Double.self)
        }
    }
}
