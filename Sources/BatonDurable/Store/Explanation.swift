public import Foundation

/// Why a durable job is not running (yet), as ``JobStore/explain(run:)`` reports it.
public enum WaitReason: Hashable, Codable, Sendable, CustomStringConvertible {
    /// A dependency has not finished.
    case dependency(name: String, state: DurableJobState)
    /// The category is at its limit, held by these jobs.
    case category(name: String, limit: Int, heldBy: [String])
    /// A retry's backoff, a snooze's wait (``Snooze``) or the submitted start time has not passed.
    case notBefore(Date)
    /// A worker holds the job's lease (it is running there) until this time.
    case lease(worker: String, until: Date)
    /// The lease ran out; the next claim of any worker takes the job again.
    case leaseExpired(worker: String, at: Date)
    /// No live worker has registered the job's kind.
    case noWorker(kind: String)
    /// Its cancellation was asked for; its worker stops it at the next lease renewal.
    case cancelRequested(reason: String)

    public var description: String {
        switch self {
        case .dependency(let name, let state): "dependency '\(name)' is \(state)"
        case .category(let name, let limit, let heldBy):
            "category '\(name)' is at its limit (\(limit)), held by \(heldBy.map { "'\($0)'" }.joined(separator: ", "))"
        case .notBefore(let date): "not before \(date.formatted(.iso8601))"
        case .lease(let worker, let until): "lease held by worker '\(worker)' until \(until.formatted(.iso8601))"
        case .leaseExpired(let worker, let at):
            "lease of worker '\(worker)' expired at \(at.formatted(.iso8601)); the next claim takes it again"
        case .noWorker(let kind): "no worker has registered kind '\(kind)'"
        case .cancelRequested(let reason): "cancellation requested (\(reason)); its worker stops it at its next renewal"
        }
    }
}

/// One job of an explanation.
public struct JobExplanation: Hashable, Codable, Sendable, CustomStringConvertible {
    public var id: DurableJobID
    public var name: String
    public var kind: String
    public var state: DurableJobState
    public var attempts: Int
    public var maxAttempts: Int
    public var lastError: String?
    /// Empty for a finished job; otherwise what it waits for.
    public var waitingFor: [WaitReason]
    /// The job that added this one to the run while it ran, or nil for a job submitted with the graph.
    public var addedBy: DurableJobID? = nil

    /// How ``lastError`` is introduced: "last error", or for a job that succeeded since, "error of an
    /// earlier attempt" (its success has no error).
    public var lastErrorLabel: String { state == .succeeded ? "error of an earlier attempt" : "last error" }

    public var description: String {
        var line = "\(name) [\(kind)]: \(state), attempt \(attempts) of \(maxAttempts)"
        if let lastError { line += "; \(lastErrorLabel): \(lastError)" }
        if !waitingFor.isEmpty { line += "; waiting for: " + waitingFor.map(\.description).joined(separator: "; ") }
        return line
    }
}

/// A run's jobs with their states and what each waits for.
public struct RunExplanation: Hashable, Codable, Sendable, CustomStringConvertible {
    public var run: RunRecord
    public var jobs: [JobExplanation]
    /// The clock that decides leases, retries and `notBefore` — the one the times above are on
    /// ("this process's clock" for SQLite, "the database server's clock" for PostgreSQL) — and its time
    /// when the run was read.
    public var clock: String = "this process's clock"
    public var now: Date? = nil

    /// The job named `name`, if it is in the run.
    public subscript(name: String) -> JobExplanation? { jobs.first { $0.name == name } }

    /// How many jobs are in each state.
    public var counts: [DurableJobState: Int] { jobs.reduce(into: [:]) { $0[$1.state, default: 0] += 1 } }

    public var description: String {
        let summary = DurableJobState.allCases.compactMap { state in counts[state].map { "\($0) \(state)" } }
        var lines = ["run \(run.id.rawValue) '\(run.name)': " + summary.joined(separator: ", ")]
        // Each added job under the job that added it, one step further in.
        var added: [DurableJobID: [Int]] = [:]
        let present = Set(jobs.map(\.id))
        var top: [Int] = []
        for (index, job) in jobs.enumerated() {
            if let adder = job.addedBy, present.contains(adder), adder != job.id {
                added[adder, default: []].append(index)
            } else {
                top.append(index)
            }
        }
        var work = top.reversed().map { (index: $0, depth: 1) }
        var shown = Set<Int>()
        while let (index, depth) = work.popLast() {
            guard shown.insert(index).inserted else { continue }
            let job = jobs[index]
            lines.append(String(repeating: "  ", count: depth) + (depth > 1 ? "+ " : "") + job.description)
            work += (added[job.id] ?? []).reversed().map { (index: $0, depth: depth + 1) }
        }
        if let now {
            lines.append("  (times are on \(clock), which decides leases and retries; now \(now.formatted(.iso8601)))")
        }
        return lines.joined(separator: "\n")
    }
}

extension RunSnapshot {
    /// What each job of the run waits for, computed from the snapshot.
    public func explain() -> RunExplanation {
        // Positions by id, for the dependencies of pending jobs only (a finished run has none; at
        // 100,000 jobs a dictionary of whole records cost more than the rest of the explanation).
        var positions: [DurableJobID: Int] = [:]
        if jobs.contains(where: { $0.state == .pending }) {
            positions.reserveCapacity(jobs.count)
            for (position, job) in jobs.enumerated() where positions[job.id] == nil { positions[job.id] = position }
        }
        let registered = Set(workers.filter { $0.expires > now }.flatMap(\.kinds))
        var holdersByCategory: [String: [String]] = [:]
        for holder in holders { holdersByCategory[holder.category, default: []].append(holder.jobName) }
        let explained = jobs.map { job -> JobExplanation in
            var reasons: [WaitReason] = []
            switch job.state {
            case .pending:
                for dependency in job.dependencies {
                    if let position = positions[dependency.job], !jobs[position].state.isFinished {
                        reasons.append(.dependency(name: jobs[position].name, state: jobs[position].state))
                    }
                }
                if !registered.contains(job.kind) { reasons.append(.noWorker(kind: job.kind)) }
            case .ready:
                if let notBefore = job.notBefore, notBefore > now { reasons.append(.notBefore(notBefore)) }
                for category in job.categories {
                    let held = holdersByCategory[category.name] ?? []
                    if held.count >= category.limit {
                        reasons.append(.category(name: category.name, limit: category.limit, heldBy: held))
                    }
                }
                if !registered.contains(job.kind) { reasons.append(.noWorker(kind: job.kind)) }
            case .running:
                if let reason = job.cancelRequest { reasons.append(.cancelRequested(reason: reason)) }
                if let owner = job.leaseOwner, let until = job.leaseExpires {
                    reasons.append(
                        until > now ? .lease(worker: owner, until: until) : .leaseExpired(worker: owner, at: until))
                }
            case .succeeded, .failed, .cancelled: break
            }
            return JobExplanation(
                id: job.id, name: job.name, kind: job.kind, state: job.state, attempts: job.attempts,
                maxAttempts: job.maxAttempts, lastError: job.lastError, waitingFor: reasons, addedBy: job.addedBy)
        }
        return RunExplanation(run: run, jobs: explained, clock: clock, now: now)
    }
}

extension JobStore {
    /// The default reads a whole snapshot; stores override it with a one-row read.
    public func record(of run: DurableRunID) async throws -> RunRecord {
        try await snapshot(of: run).run
    }

    /// Per job of the run: state, attempts, last error, and what it waits for.
    public func explain(run: DurableRunID) async throws -> RunExplanation {
        try await snapshot(of: run).explain()
    }

    /// One job: state, attempts, last error, and what it waits for.
    public func explain(job: DurableJobID) async throws -> JobExplanation {
        let explanation = try await explain(run: run(of: job))
        guard let found = explanation.jobs.first(where: { $0.id == job }) else {
            throw DurableError(code: .unknownJob, message: "\(job) is not in the store (pruned?).")
        }
        return found
    }

    /// The stored record of one job.
    public func record(of job: DurableJobID) async throws -> JobRecord {
        guard let found = try await snapshot(of: run(of: job)).jobs.first(where: { $0.id == job }) else {
            throw DurableError(code: .unknownJob, message: "\(job) is not in the store (pruned?).")
        }
        return found
    }
}
