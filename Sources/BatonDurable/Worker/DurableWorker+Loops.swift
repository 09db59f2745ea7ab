import Baton
import Foundation
import Logging
import Tracing

extension DurableWorker {
    /// Claims while there are free slots; waits for a wake-up, the next due date or the polling interval.
    /// Returns when shut down and every claimed job is reported or given back.
    func claimLoop(until run: DurableRunID?) async {
        var withdrewOffer = false
        var idleSince: ContinuousClock.Instant?
        var lastStallCheck: ContinuousClock.Instant?
        while true {
            let (active, reserved, deadline) = state.withLock { ($0.active.count, $0.reserved, $0.shutdownDeadline) }
            if let deadline {
                // Shutting down: nothing more may be claimed for this worker, and what the store claimed
                // ahead for it goes back at once (its leases would lapse while the running jobs end).
                if !withdrewOffer {
                    withdrewOffer = true
                    await store.withdrawClaim(worker: configuration.id)
                }
                // A claim under way (the report loop's) may still start jobs: wait for it too.
                if active == 0 && reserved == 0 { return }
                if ContinuousClock.now >= deadline {
                    cancelForShutdown()
                    await claimSignal.wait(timeout: .seconds(1))
                } else {
                    await claimSignal.wait(timeout: deadline - ContinuousClock.now)
                }
                continue
            }
            let free = reserve(excluding: 0)
            var claimed = 0
            if free > 0 {
                do {
                    let jobs = try await store.claim(
                        worker: configuration.id, kinds: kinds, limit: free, lease: configuration.leaseDuration)
                    start(jobs, carriers: await traceCarriers(for: jobs))
                    claimed = jobs.count
                    if unreserve(free) { claimSignal.raise() }
                } catch {
                    if unreserve(free) { claimSignal.raise() }
                    if store.isClosed {
                        stopForClosedStore(error, dropping: [])
                        continue
                    }
                    configuration.logger.warning("claiming failed, retrying: \(error)")
                    await claimSignal.wait(timeout: configuration.pollInterval)
                    continue
                }
                if claimed == free { continue }
            }
            if claimed == 0, let run, await isFinished(run) {
                shutdown()
                continue
            }
            // Waiting for a run with nothing to do: after 5 s, and then once a minute, say so when its
            // jobs wait for kinds that no live worker has registered (else it would wait in silence).
            if claimed == 0, active == 0, let run {
                let now = ContinuousClock.now
                let since = idleSince ?? now
                idleSince = since
                if now - since >= configuration.stallWarningDelay,
                    lastStallCheck.map({ now - $0 >= .seconds(60) }) ?? true
                {
                    lastStallCheck = now
                    await warnOfMissingWorkers(run)
                }
            } else {
                idleSince = nil
            }
            var timeout = configuration.pollInterval
            if free > 0, claimed == 0, let due = try? await store.nextDueDate(kinds: kinds) {
                let wait = Duration.seconds(max(due.timeIntervalSince(store.clock.now()), 0.001))
                timeout = min(timeout, wait)
            }
            if free > 0, claimed < free { offerRoom() }
            await claimSignal.wait(timeout: timeout)
        }
    }

    /// Logs a warning when jobs of `run` wait for kinds that no live worker has registered.
    private func warnOfMissingWorkers(_ run: DurableRunID) async {
        guard let explanation = try? await store.explain(run: run) else { return }
        var jobsByKind: [String: [String]] = [:]
        for job in explanation.jobs {
            for case .noWorker(let kind) in job.waitingFor { jobsByKind[kind, default: []].append(job.name) }
        }
        guard !jobsByKind.isEmpty else { return }
        let kinds = jobsByKind.keys.sorted()
        let described = kinds.map { kind in
            let names = jobsByKind[kind]!
            return
                "'\(kind)' (\(names.prefix(3).map { "'\($0)'" }.joined(separator: ", "))\(names.count > 3 ? " and \(names.count - 3) more" : ""))"
        }
        configuration.logger.warning(
            "worker '\(configuration.id)' waits for \(run), whose jobs of kinds \(described.joined(separator: ", ")) no live worker has registered: start a DurableWorker with those job types, or run(until:) waits for ever"
        )
    }

    /// Whether `run` has finished — or is gone (pruned, by this worker's retention or another's): it
    /// finished before. A failure to read it says nothing (the next pass looks again).
    private func isFinished(_ run: DurableRunID) async -> Bool {
        do {
            return try await store.record(of: run).finished != nil
        } catch let error as DurableError where error.code == .unknownRun {
            return true
        } catch {
            return false
        }
    }

    /// Idle with room: the store may claim for this worker before it is woken (a PostgreSQL store does,
    /// in the insert of a submission through it); its next claim withdraws the offer. A reservation
    /// made between reading the room and offering it (the report loop's claim) makes the offer again
    /// with the room left, so the store never claims ahead more than the worker can start.
    func offerRoom() {
        func room() -> (Int, UInt64) {
            state.withLock { state in
                let room =
                    state.shutdownDeadline == nil
                    ? max(0, configuration.maxConcurrentJobs - state.active.count - state.reserved) : 0
                return (room, state.reservations)
            }
        }
        var (limit, seen) = room()
        for _ in 0..<3 {
            store.parkClaim(worker: configuration.id, kinds: kinds, limit: limit, lease: configuration.leaseDuration)
            let (now, count) = room()
            if count == seen { return }
            (limit, seen) = (now, count)
        }
        store.parkClaim(worker: configuration.id, kinds: kinds, limit: 0, lease: configuration.leaseDuration)
    }

    /// Reserves the room left beside the active attempts, not counting `finishing` of them whose
    /// reports are being sent (none while shutting down); see ``WorkerState/reserved``.
    func reserve(excluding finishing: Int) -> Int {
        state.withLock { state in
            guard state.shutdownDeadline == nil else { return 0 }
            let busy = max(0, state.active.count - finishing)
            let free = max(0, configuration.maxConcurrentJobs - busy - state.reserved)
            if free == 0, state.reserved > 0 { state.claimWanted = true }
            state.reserved += free
            if free > 0 { state.reservations &+= 1 }
            return free
        }
    }

    /// Ends a reservation (once its claimed jobs are in `active`); returns whether the claim loop
    /// found no room meanwhile and should look again.
    @discardableResult
    func unreserve(_ count: Int) -> Bool {
        state.withLock { state in
            state.reserved -= count
            guard state.reserved == 0, state.claimWanted else { return false }
            state.claimWanted = false
            return true
        }
    }

    /// Runs claimed jobs as Baton jobs on the worker's queue.
    /// `carriers`: the runs' trace contexts (``traceCarriers(for:)``), for the attempts' spans.
    ///
    /// A claim that arrives with its lease about to end (a claiming call that the store retried through a
    /// server restart, with the lease it computed when the call began) is given back unattempted rather
    /// than started: the lease watch would stop it at once.
    func start(_ claimed: [ClaimedJob], carriers: [DurableRunID: [String: String]]) {
        guard !claimed.isEmpty else { return }
        let cutoff = store.clock.now().adding(leaseStopMargin)
        var claimed = claimed
        let late = claimed.filter { $0.leaseExpires <= cutoff }
        if !late.isEmpty {
            claimed.removeAll { $0.leaseExpires <= cutoff }
            configuration.logger.notice(
                "giving back \(late.count) claimed jobs unattempted: their leases end within \(leaseStopMargin) (the claim took long to answer)"
            )
            state.withLock { state in state.reports.append(contentsOf: late.map { .release($0.lease) }) }
            reportSignal.raise()
        }
        defer { leaseWatchSignal.raise() }
        var traced: [(AsyncJob, ServiceContext)] = []
        var jobs: [AsyncJob] = []
        jobs.reserveCapacity(claimed.count)
        for claim in claimed {
            guard let runner = runners[claim.kind] else { continue }  // never: only our kinds are claimed
            let output = Protected<Data?>(nil)
            let context = DurableJobContext(
                job: claim.job, run: claim.run, name: claim.name, attempt: claim.attempt,
                maxAttempts: claim.maxAttempts,
                worker: configuration.id, loggerSource: JobLoggerSource(adding: configuration.logger))
            let span = beginSpan(of: claim, carrier: carriers[claim.run])
            let job = AsyncJob(
                name: claim.name, priority: JobPriority(rawValue: min(max(claim.priority, 0), 4)) ?? .normal
            ) {
                _ in
                let data = try await Self.runAttempt(in: span?.context, job: claim.job) {
                    try await runner.run(claim.input, context, claim.kind)
                }
                output.withLock { $0 = data }
            }
            if let timeout = claim.timeout, timeout > .zero { job.addTimeout(timeout) }
            job.addObserver(
                BlockObserver(onFinish: { [weak self] _, outcome in
                    self?.attemptFinished(claim, outcome: outcome, output: output.current)
                }))
            let stopping = state.withLock { state -> Bool in
                // Claimed by a claim that was under way when the grace period ended: given back at once.
                let stopping = state.cancelledForShutdown
                state.active[claim.lease] = ActiveAttempt(
                    claimed: claim, job: job, cause: stopping ? .shutdown : nil, leaseExpires: claim.leaseExpires,
                    span: span?.span)
                return stopping
            }
            if stopping {
                job.cancel(
                    reason: DurableCancellation(message: "job '\(job.name)' stopped: its worker is shutting down"))
            }
            tellClaimed(claim, job: job)
            if let span { traced.append((job, span.context)) } else { jobs.append(job) }
        }
        queue.add(jobs)
        // Added in its span's context, so that a queue instrument's span of the job is its child.
        for (job, context) in traced { ServiceContext.withValue(context) { queue.add(job) } }
    }

    /// Turns a Baton outcome into what the store is told.
    func attemptFinished(_ claim: ClaimedJob, outcome: JobOutcome, output: Data?) {
        // Marked ended in the lock that reads the cause: the lease watch no longer stops it after this.
        let cause = state.withLock { state -> CancelCause? in
            state.active[claim.lease]?.ended = true
            return state.active[claim.lease]?.cause
        }
        let pending: PendingReport?
        switch outcome {
        case .succeeded:
            pending = .report(
                AttemptReport(lease: claim.lease, outcome: .succeeded(output: output ?? Data("null".utf8))))
        case .failed(let error):
            let retryable = (error as? DurableError)?.code != .decoding
            pending = .report(
                AttemptReport(lease: claim.lease, outcome: .failed(message: describe(error), retryable: retryable)))
        case .cancelled(let reason):
            if let error = reason as? JobError, error.code == .timedOut {
                pending = .report(
                    AttemptReport(lease: claim.lease, outcome: .failed(message: error.message, retryable: true)))
            } else {
                switch cause {
                case .requested(let why):
                    pending = .report(AttemptReport(lease: claim.lease, outcome: .cancelled(reason: why)))
                case .leaseLost: pending = nil
                case .leaseRunningOut:
                    pending = .report(
                        AttemptReport(
                            lease: claim.lease,
                            outcome: .failed(
                                message: "stopped: no lease renewal reached the store before the lease ran out",
                                retryable: true)))
                case .shutdown: pending = .release(claim.lease)
                case nil:
                    pending = .report(
                        AttemptReport(
                            lease: claim.lease,
                            outcome: .failed(message: "cancelled: \(describe(reason))", retryable: true)))
                }
            }
        }
        if let pending {
            state.withLock { $0.reports.append(pending) }
            reportSignal.raise()
        } else {
            if let attempt = state.withLock({ $0.active[claim.lease] }) { tellEnded(attempt, .leaseLost) }
            let removed = state.withLock { $0.active.removeValue(forKey: claim.lease) }
            _ = removed  // released outside the lock
            claimSignal.raise()
        }
    }

    private func describe(_ error: any Error) -> String {
        if let error = error as? DurableError { return error.message }
        if let error = error as? JobError { return error.message }
        return "\(error)"
    }

    /// Sends finished attempts to the store in batches; a job leaves `active` once its report is stored.
    ///
    /// After a call fails, the reports it carried go one at a time, each failing one moved behind the
    /// others; once each was tried alone, batches resume. A report that the store cannot take (a bug, a
    /// value it refuses) holds up only its own job, not every job whose report was sent with it — those
    /// used to be sent again with it, and refused with it, at every poll, their leases renewed and their
    /// slots never freed. (Counting the failed batch, not waiting for an empty list: a worker whose
    /// attempts finish faster than one call a report stayed one at a time for good after one failure.)
    func reportLoop() async {
        var oneByOneLeft = 0
        while true {
            let batch = state.withLock { state -> [PendingReport] in
                if oneByOneLeft > 0, !state.reports.isEmpty {
                    oneByOneLeft -= 1
                    return [state.reports.removeFirst()]
                }
                let batch = state.reports
                state.reports.removeAll(keepingCapacity: true)
                return batch
            }
            if batch.isEmpty {
                oneByOneLeft = 0
                if Task.isCancelled { return }
                await reportSignal.wait()  // raised by each finished attempt, or ended by cancellation
                continue
            }
            var reports: [AttemptReport] = []
            var releases: [Lease] = []
            var retried = false
            for item in batch {
                switch item {
                case .report(let report): reports.append(report)
                case .release(let lease): releases.append(lease)
                }
            }
            // The room these attempts leave is claimed in the same transaction as their reports: a chain
            // step is one transaction, with no wake-up of the claim loop in between.
            let free = reserve(excluding: batch.count)
            let results: [FinishResult]
            let claimed: [ClaimedJob]
            do {
                (results, claimed) = try await store.finish(
                    reports, thenClaim: free, worker: configuration.id, kinds: kinds,
                    lease: configuration.leaseDuration)
                for (report, result) in zip(reports, results) where result == .rejected {
                    configuration.logger.notice(
                        "the store rejected the completion of \(report.lease.job): its lease had ended (another attempt owns it, or it was cancelled)"
                    )
                }
                retried = results.contains(.accepted(.ready))
            } catch {
                unreserve(free)
                if store.isClosed {
                    stopForClosedStore(error, dropping: batch.map(\.lease))
                    continue
                }
                configuration.logger.warning("reporting \(batch.count) attempts failed, retrying: \(error)")
                if batch.count == 1 {
                    // This one alone failed: the others go first.
                    state.withLock { $0.reports.append(contentsOf: batch) }
                } else {
                    state.withLock { $0.reports.insert(contentsOf: batch, at: 0) }
                    oneByOneLeft = batch.count
                }
                await reportSignal.wait(timeout: configuration.pollInterval)
                continue
            }
            // Given back apart from the reports: the finish above committed, and the jobs it claimed must
            // start whatever happens here (they sat until their leases expired when a failing release
            // sent the whole batch back).
            var given = releases
            if !releases.isEmpty {
                do {
                    try await store.release(releases)
                } catch let error where store.isClosed {
                    stopForClosedStore(error, dropping: releases)
                    given = []
                } catch {
                    configuration.logger.warning("giving back \(releases.count) attempts failed, retrying: \(error)")
                    state.withLock { $0.reports.insert(contentsOf: releases.map { .release($0) }, at: 0) }
                    given = []
                }
            }
            let settled =
                given.count == releases.count ? batch : batch.filter { if case .report = $0 { true } else { false } }
            if !durableInstruments.isEmpty || tracer != nil {
                // Told before the attempts leave `active`, so that a worker that stops has told all.
                var ends: [Lease: DurableAttemptEnd] = [:]
                for (report, result) in zip(reports, results) {
                    ends[report.lease] = DurableAttemptEnd(report, result)
                }
                for lease in given { ends[lease] = .released }
                let attempts = state.withLock { state in settled.compactMap { state.active[$0.lease] } }
                for attempt in attempts { tellEnded(attempt, ends[attempt.claimed.lease] ?? .rejected) }
            }
            let removed = state.withLock { state in settled.compactMap { state.active.removeValue(forKey: $0.lease) } }
            _ = removed  // released outside the lock
            start(claimed, carriers: await traceCarriers(for: claimed))
            let wanted = unreserve(free)
            // The claim loop decides what only it knows (a finished run, the next due date, shutdown):
            // it is woken when the worker has nothing left to run, a retry was scheduled, leases were
            // given back, or it found no room while this claim held it.
            let idle = state.withLock { $0.active.isEmpty || $0.shutdownDeadline != nil }
            if idle || retried || wanted || !given.isEmpty {
                claimSignal.raise()
            }
        }
    }

    /// The store was closed under the worker: every call would fail for good. Stops the worker at once
    /// (running jobs are cancelled) and forgets the attempts of `dropping` — reports and releases that
    /// cannot be sent; their jobs run again once their leases end. `run` then throws.
    func stopForClosedStore(_ error: any Error, dropping leases: [Lease]) {
        let removed = state.withLock { state -> [ActiveAttempt] in
            let previous = state.storeClosed
            state.storeClosed = (previous?.error ?? "\(error)", (previous?.dropped ?? 0) + leases.count)
            return leases.compactMap { state.active.removeValue(forKey: $0) }
        }
        configuration.logger.error(
            "the store was closed while worker '\(configuration.id)' ran: stopping\(leases.isEmpty ? "" : "; \(leases.count) reports not sent (their jobs run again once their leases end)")"
        )
        _ = removed  // released outside the lock
        shutdown(now: true)
    }

    /// Renews the leases every renew interval (or when asked), and passes cancellations and lost leases on.
    func renewLoop() async {
        while !Task.isCancelled {
            await renewSignal.wait(timeout: configuration.renewInterval)
            if Task.isCancelled { return }
            await renewLeases()
        }
    }

    /// One renewal round: refreshes the registration and every held lease, then prunes if it is time
    /// (after the leases: a long prune must not make them late).
    func renewLeases() async {
        let held = state.withLock { state in state.active.values.map(\.claimed.lease) }
        let expires = store.clock.now().adding(configuration.leaseDuration)
        try? await store.register(WorkerRecord(id: configuration.id, kinds: kinds, expires: expires))
        await renew(held)
        await pruneIfDue()
    }

    private func renew(_ held: [Lease]) async {
        guard !held.isEmpty else { return }
        var toCancel: [(AsyncJob, DurableCancellation)] = []
        var lost: [ActiveAttempt] = []
        do {
            let statuses = try await store.renew(held, worker: configuration.id, lease: configuration.leaseDuration)
            state.withLock { state in
                for (lease, status) in zip(held, statuses) {
                    guard var attempt = state.active[lease] else { continue }
                    switch status {
                    case .renewed(let until):
                        attempt.leaseExpires = until
                    case .cancelRequested(let reason, let until):
                        attempt.leaseExpires = until
                        if attempt.cause == nil {
                            attempt.cause = .requested(reason)
                            toCancel.append(
                                (
                                    attempt.job,
                                    DurableCancellation(message: "job '\(lease.job)' was cancelled: \(reason)")
                                ))
                        }
                    case .lost:
                        // Told once; one stopped as running out reports nothing now (it would be rejected).
                        if attempt.cause?.isLeaseLost != true { lost.append(attempt) }
                        attempt.cause = .leaseLost
                        toCancel.append(
                            (
                                attempt.job,
                                DurableCancellation(
                                    message:
                                        "job '\(attempt.claimed.name)' lost its lease (another worker took it over)")
                            ))
                    }
                    state.active[lease] = attempt
                }
            }
        } catch {
            configuration.logger.warning("renewing \(held.count) leases failed: \(error)")
            // Leases about to run out may belong to another worker soon: stop those attempts.
            stopAttemptsOutOfLease()
        }
        for attempt in lost { tellLostLease(attempt) }
        for (job, reason) in toCancel { job.cancel(reason: reason) }
    }

    /// How long before its lease ends, as far as this worker knows, an attempt that no renewal reached
    /// is stopped: an eighth of the lease, at most a second — time for its job to see the cancellation
    /// and end before another worker may claim the job (and take its category slot).
    var leaseStopMargin: Duration { min(configuration.leaseDuration / 8, .seconds(1)) }

    /// Stops the attempts that are running out of lease: from a margin before the lease ends, the store
    /// may soon end it and hand the job (and its category slots) to another worker. Renewals that do not
    /// answer — the server restarting, a partition — would otherwise leave the attempt running past its
    /// lease, beside the next attempt of the same job or a second holder of a slot of a counted category.
    /// Watches until the worker stops, waking when attempts start, at the next attempt's deadline, and
    /// while attempts run at least every quarter lease (a manual clock moved by a test, a clock jump).
    func leaseWatchLoop() async {
        while !Task.isCancelled {
            guard let next = stopAttemptsOutOfLease() else {
                await leaseWatchSignal.wait()  // nothing to watch until attempts start
                continue
            }
            let wait = Duration.seconds(max(next.timeIntervalSince(store.clock.now()), 0.001))
            await leaseWatchSignal.wait(timeout: min(wait, configuration.leaseDuration / 4))
        }
    }

    /// Cancels the running attempts whose lease ends within ``leaseStopMargin`` (and a millisecond);
    /// returns when the next one will. An attempt whose job has ended (its report waits) has nothing to
    /// stop, and one already being cancelled is left to that. A stopped attempt is reported failed, to
    /// be retried (``CancelCause/leaseRunningOut``).
    @discardableResult
    func stopAttemptsOutOfLease() -> Date? {
        let now = store.clock.now().addingTimeInterval(0.001)
        let margin = leaseStopMargin
        let (stopped, next) = state.withLock { state -> ([ActiveAttempt], Date?) in
            var stopped: [ActiveAttempt] = []
            var next: Date?
            for (lease, attempt) in state.active where attempt.cause == nil && !attempt.ended {
                let deadline = attempt.leaseExpires.adding(.zero - margin)
                if deadline <= now {
                    stopped.append(attempt)
                    state.active[lease]?.cause = .leaseRunningOut
                } else if next.map({ deadline < $0 }) ?? true {
                    next = deadline
                }
            }
            return (stopped, next)
        }
        for attempt in stopped { tellLostLease(attempt) }
        for attempt in stopped {
            let ends = attempt.leaseExpires.formatted(.iso8601)
            configuration.logger.warning(
                "stopping job '\(attempt.claimed.name)' (\(attempt.claimed.job)): its lease ends at \(ends) and no renewal has reached the store"
            )
            attempt.job.cancel(
                reason: DurableCancellation(
                    message:
                        "job '\(attempt.claimed.name)' lost its lease: it ends at \(ends) and no renewal reached the store"
                ))
        }
        return next
    }

    /// Deletes the runs that finished longer than ``Configuration/retention`` ago, at most once a minute.
    func pruneIfDue() async {
        guard let retention = configuration.retention else { return }
        let now = store.clock.now()
        let due = state.withLock { state -> Bool in
            if let last = state.lastPrune, now.timeIntervalSince(last) < 60 { return false }
            state.lastPrune = now
            return true
        }
        guard due else { return }
        do {
            let pruned = try await store.prune(finishedBefore: now.adding(.zero - retention))
            if pruned > 0 { configuration.logger.info("pruned \(pruned) finished runs older than \(retention)") }
        } catch {
            configuration.logger.warning("pruning finished runs failed: \(error)")
        }
    }

    /// After the grace period: cancels what still runs; those attempts are given back to the store.
    func cancelForShutdown() {
        let jobs = state.withLock { state -> [AsyncJob] in
            guard !state.cancelledForShutdown else { return [] }
            state.cancelledForShutdown = true
            var jobs: [AsyncJob] = []
            for (id, var attempt) in state.active where attempt.cause == nil {
                attempt.cause = .shutdown
                state.active[id] = attempt
                jobs.append(attempt.job)
            }
            return jobs
        }
        for job in jobs {
            job.cancel(reason: DurableCancellation(message: "job '\(job.name)' stopped: its worker is shutting down"))
        }
    }
}
