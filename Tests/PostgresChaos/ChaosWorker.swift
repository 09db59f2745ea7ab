import Baton
import BatonDurable
import BatonPostgres
import Foundation
import Logging
import PostgresNIO

/// One chaos worker process: claims `chaos.work` jobs, runs each (a short sleep, and a planned
/// failure on the attempts its input names), renews its leases every third of a lease, reports the
/// outcome with its lease token, and logs every attempt in the side log.
///
/// Like a `DurableWorker`, it measures its leases on its own clock from the moment it asked for them
/// (the server's clock decides them). Before reporting a successful attempt of every eighth job of the
/// harness's graph, it submits a one-job side run through its own store (unique key per job, so a
/// second attempt finds the first's run): submissions meet the kills and the server restart too. Side
/// runs are logged once submitted; the checker finds each one, and each of their jobs succeeded once.
/// Every odd job of the graph completes in one transaction with an increment of its row in
/// `chaos_effects` (`PostgresJobStore.complete`): each row must end at exactly 1.
struct ChaosWorker {
    let url: String
    let schema: String
    let id: String
    let concurrency: Int
    let lease: Duration
    /// The directory of the workers' ``WorkJournal``s.
    let journal: String

    struct Input: Codable {
        var n: Int
        var micros: Int
        var failAttempts: Int
    }

    func run() async throws {
        var logger = Logger(label: "chaos.\(id)")
        logger.logLevel = .error
        try await withPostgresJobStore(url: url, schema: schema, logger: logger) { store in
            try await work(store, logger: logger)
        }
    }

    private func work(_ store: PostgresJobStore, logger: Logger) async throws {
        let side = SideLog(store: store)
        let schema = schema
        let journal = try WorkJournal(directory: journal)
        let pid = Int(getpid())
        // Each attempt's task, and when its lease ends as far as this worker knows (claim, renewals).
        let held = Protected([Lease: Task<Void, Never>]())
        let expiries = Protected([Lease: Date]())
        let inflight = Protected(0)
        let (events, signal) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let lease = lease
        let id = id

        // Wake-ups from the store (LISTEN/NOTIFY, or its polling fallback) and a 100 ms tick.
        let forwarder = Task {
            for await _ in store.wakeups() { signal.yield() }
        }
        // Every worker also fires the store's schedules (the harness's `chaos-beat`), as a `DurableWorker`
        // does: ticks fired by processes that are killed, and across the server's restart.
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                _ = try? await store.fireDueSchedules()
                signal.yield()
            }
        }
        let renewer = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: lease / 3)
                let current = held.withLock { $0 }
                guard !current.isEmpty else { continue }
                let leases = Array(current.keys)
                let asked = Date()
                guard let statuses = try? await store.renew(leases, worker: id, lease: lease) else { continue }
                for (renewed, status) in zip(leases, statuses) {
                    switch status {
                    case .renewed, .cancelRequested:
                        expiries.withLock { $0[renewed] = asked.addingTimeInterval(lease.seconds) }
                    case .lost:
                        // The lease is gone: stop the attempt (its completion would be rejected anyway).
                        held.withLock { $0.removeValue(forKey: renewed) }?.cancel()
                    }
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
            let asked = Date()
            do {
                claimed = try await store.claim(worker: id, kinds: ["chaos.work"], limit: room, lease: lease)
            } catch {
                FileHandle.standardError.write(Data("chaos worker \(id): claim failed: \(error)\n".utf8))
                continue
            }
            if !claimed.isEmpty { signal.yield() }  // There may be more.
            for job in claimed {
                inflight.withLock { $0 += 1 }
                expiries.withLock { $0[job.lease] = asked.addingTimeInterval(lease.seconds) }
                let task = Task {
                    defer {
                        held.withLock { _ = $0.removeValue(forKey: job.lease) }
                        expiries.withLock { _ = $0.removeValue(forKey: job.lease) }
                        inflight.withLock { $0 -= 1 }
                        signal.yield()
                    }
                    var row: Int64?
                    var workStart: Double?
                    do {
                        let input = try JSONDecoder().decode(Input.self, from: job.input)
                        row = try await side.started(
                            job: job.job.rawValue, attempt: job.attempt, token: job.lease.token, worker: id, pid: pid,
                            at: Date().timeIntervalSince1970)
                        // The work's interval starts once the attempt is on record. That write may wait out a
                        // server restart while the renewals fail too: the work starts only with half a lease
                        // left at least (it takes 3 ms at most), as a worker must not work on a lease that may
                        // have ended and gone to another worker.
                        let now = Date()
                        guard let expires = expiries.withLock({ $0[job.lease] }),
                            expires.timeIntervalSince(now) >= lease.seconds / 2
                        else {
                            let at = now.timeIntervalSince1970
                            try await side.ended(row: row!, started: at, at: at)
                            return
                        }
                        workStart = now.timeIntervalSince1970
                        journal.began(job: job.job.rawValue, token: job.lease.token, at: workStart!)
                        try await Task.sleep(for: .microseconds(input.micros))
                        let outcome: AttemptReport.Outcome =
                            job.attempt <= input.failAttempts
                            ? .failed(message: "planned failure on attempt \(job.attempt)", retryable: true)
                            : .succeeded(output: Data("{\"n\":\(input.n),\"attempt\":\(job.attempt)}".utf8))
                        let began = workStart!
                        let end = Date().timeIntervalSince1970
                        journal.ended(job: job.job.rawValue, token: job.lease.token, began: began, at: end)
                        workStart = nil
                        try await side.ended(row: row!, started: began, at: end)
                        if case .succeeded = outcome, input.n >= 0, input.n % 8 == 0 {
                            try await submitSide(for: job, input: input, store: store, side: side, pid: pid)
                        }
                        let sent = Date().timeIntervalSince1970
                        let result: FinishResult
                        if case .succeeded(let output) = outcome, input.n >= 0, input.n % 2 == 1 {
                            // Exactly-once effects: the count and the completion commit together, or neither.
                            let recorded = try await store.complete(job.lease, output: output) { connection in
                                try await connection.query(
                                    PostgresQuery(
                                        unsafeSQL: """
                                            INSERT INTO "\(schema)".chaos_effects (n, count) VALUES (\(input.n), 1)
                                            ON CONFLICT (n) DO UPDATE SET count = chaos_effects.count + 1
                                            """), logger: logger)
                            }
                            result = recorded ? .accepted(.succeeded) : .rejected
                        } else {
                            result = try await store.finish([AttemptReport(lease: job.lease, outcome: outcome)])[0]
                        }
                        try await side.reported(
                            row: row!, result: result, sent: sent,
                            at: Date().timeIntervalSince1970)
                    } catch {
                        // Cancelled after a lost lease, or the server stayed away: the lease ends and the
                        // job is claimed again. Work cut short ends now (the side log's writes are not
                        // cancelled with the attempt).
                        if let row, let workStart {
                            let end = Date().timeIntervalSince1970
                            journal.ended(job: job.job.rawValue, token: job.lease.token, began: workStart, at: end)
                            try? await side.ended(row: row, started: workStart, at: end)
                        } else if row != nil {
                            FileHandle.standardError.write(
                                Data("chaos worker \(id): attempt of \(job.job): \(error)\n".utf8))
                        }
                    }
                }
                held.withLock { $0[job.lease] = task }
            }
        }
    }

    /// The side run of `job` (see the type's note), submitted before the job's report so that every
    /// side run exists once the harness's jobs have all completed.
    func submitSide(for job: ClaimedJob, input: Input, store: PostgresJobStore, side: SideLog, pid: Int) async throws {
        let sideInput = Input(n: -1 - input.n, micros: input.micros, failAttempts: 0)
        let graph = GraphSpec(
            name: "side-\(input.n)",
            jobs: [
                JobSpec(
                    name: "side", kind: "chaos.work", input: try JSONEncoder().encode(sideInput),
                    retry: .constant(maxAttempts: 20, delay: .milliseconds(20)))
            ])
        let submitted = try await store.submit(graph, uniqueKey: "side-\(job.job.rawValue)")
        try await side.sideRun(submitted.run.rawValue, of: job.job.rawValue, pid: pid)
    }
}
