import Baton
import BatonDurable
import BatonPostgres
import Foundation
import Logging

/// One chaos worker process: claims `chaos.work` jobs, runs each (a short sleep, and a planned
/// failure on the attempts its input names), renews its leases every third of a lease, reports the
/// outcome with its lease token, and logs every attempt in the side log.
struct ChaosWorker {
    let url: String
    let schema: String
    let id: String
    let concurrency: Int
    let lease: Duration

    struct Input: Codable {
        var n: Int
        var micros: Int
        var failAttempts: Int
    }

    func run() async throws {
        var logger = Logger(label: "chaos.\(id)")
        logger.logLevel = .error
        let store = try await PostgresJobStore(url: url, schema: schema, logger: logger)
        let side = SideLog(store: store)
        let pid = Int(getpid())
        let held = Protected([Lease: Task<Void, Never>]())
        let inflight = Protected(0)
        let (events, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let lease = lease
        let id = id

        // Wake-ups from the store (LISTEN/NOTIFY, or its polling fallback) and a 100 ms tick.
        let forwarder = Task {
            for await _ in store.wakeups() { signal.yield() }
        }
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                signal.yield()
            }
        }
        let renewer = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: lease / 3)
                let current = held.withLock { $0 }
                guard !current.isEmpty else { continue }
                let leases = Array(current.keys)
                guard let statuses = try? await store.renew(leases, worker: id, lease: lease) else { continue }
                for (lease, status) in zip(leases, statuses) where status == .lost {
                    // The lease is gone: stop the attempt (its completion would be rejected anyway).
                    held.withLock { $0.removeValue(forKey: lease) }?.cancel()
                }
            }
        }
        defer {
            forwarder.cancel()
            ticker.cancel()
            renewer.cancel()
        }

        for await _ in events {
            let room = concurrency - inflight.withLock { $0 }
            guard room > 0 else { continue }
            let claimed: [ClaimedJob]
            do {
                claimed = try await store.claim(worker: id, kinds: ["chaos.work"], limit: room, lease: lease)
            } catch {
                FileHandle.standardError.write(Data("chaos worker \(id): claim failed: \(error)\n".utf8))
                continue
            }
            if !claimed.isEmpty { signal.yield() }  // There may be more.
            for job in claimed {
                inflight.withLock { $0 += 1 }
                let task = Task {
                    defer {
                        held.withLock { _ = $0.removeValue(forKey: job.lease) }
                        inflight.withLock { $0 -= 1 }
                        signal.yield()
                    }
                    do {
                        let input = try JSONDecoder().decode(Input.self, from: job.input)
                        let row = try await side.started(
                            job: job.job.rawValue, attempt: job.attempt, token: job.lease.token, worker: id, pid: pid,
                            at: Date().timeIntervalSince1970)
                        // The work's interval starts once the attempt is on record (that write may wait out a
                        // server restart, during which the lease may end and another worker take the job).
                        let workStart = Date().timeIntervalSince1970
                        try await Task.sleep(for: .microseconds(input.micros))
                        let outcome: AttemptReport.Outcome =
                            job.attempt <= input.failAttempts
                            ? .failed(message: "planned failure on attempt \(job.attempt)", retryable: true)
                            : .succeeded(output: Data("{\"n\":\(input.n),\"attempt\":\(job.attempt)}".utf8))
                        try await side.ended(row: row, started: workStart, at: Date().timeIntervalSince1970)
                        let sent = Date().timeIntervalSince1970
                        let result = try await store.finish([AttemptReport(lease: job.lease, outcome: outcome)])[0]
                        try await side.reported(
                            row: row, accepted: result == .accepted(.succeeded), sent: sent,
                            at: Date().timeIntervalSince1970)
                    } catch {
                        // Cancelled after a lost lease, or the server stayed away: the lease ends and the
                        // job is claimed again.
                    }
                }
                held.withLock { $0[job.lease] = task }
            }
        }
    }
}
