import Baton
import Foundation
import Logging

/// The one owner of a running worker's state: a value that a single task holds and changes in
/// reaction to ``WorkerEvent``s, in order. No lock guards it because nothing else can reach it.
///
/// Store calls run as child tasks of the run's task group and come back as events; so do the timers
/// (``arm(_:group:)``). The decisions — what to claim, report, renew or stop next — are all in
/// ``decide(group:)``, which runs after every event.
///
/// Invariants (checked in debug builds by ``checkInvariants()``):
/// - at most one claim, `reportsInFlight` report calls (the store's `reportCallsInFlight`) and one
///   renewal are in flight;
/// - the jobs held plus the room asked for by calls in flight never exceed `maxConcurrentJobs`;
/// - once a shutdown has begun, nothing more is claimed.
struct WorkerOwner {
    let worker: DurableWorker
    let input: AsyncStream<WorkerEvent>.Continuation
    /// The run `run(until:)` waits for.
    let until: DurableRunID?

    /// Claimed and not yet reported, by lease (a retry of a job may be claimed here while the report of
    /// its previous attempt is still in flight).
    var active: [Lease: ActiveAttempt] = [:]
    var reports: [PendingReport] = []
    /// When the oldest of `reports` was added (see ``reportsDue(now:)``).
    var oldestReport: ContinuousClock.Instant?
    /// Attempts held whose jobs have not ended yet.
    var running = 0
    /// After a report call failed, the reports it carried go one at a time (see `reported`).
    var oneByOneLeft = 0
    /// The limit of the claim in flight.
    var claiming: Int?
    /// A claim left room and its follow-up reads are under way (``WorkerEvent/polled(runFinished:due:)``).
    var polling = false
    /// The report calls in flight (at most the store's `reportCallsInFlight`): for each, its number, how
    /// many of the attempts held it reports, the room it claims, and how many report calls had failed
    /// when it was sent.
    var reporting: [(call: UInt64, finishing: Int, claim: Int, failuresBefore: UInt64)] = []
    /// Numbers the report calls; counts the report calls that failed.
    var reportCalls: UInt64 = 0
    var reportFailures: UInt64 = 0
    /// How many report calls may be in flight at once (``JobStore/reportCallsInFlight``, at least 1).
    let reportsInFlight: Int
    var renewing = false
    /// Claim as soon as there is room (a wake-up, a full claim, a slot freed by a lost lease …).
    var wantClaim = true
    /// When to ask the store again without a wake-up (polling, or the next due date).
    var nextClaim: ContinuousClock.Instant?
    var nextRenew: ContinuousClock.Instant
    /// A report call failed: the next one waits until then.
    var reportRetry: ContinuousClock.Instant?
    /// Report calls that failed since the store last took one: each retry waits twice as long as the one
    /// before, up to ``reportRetryLimit`` (a store that refuses every call — a damaged file — was asked
    /// at every poll interval, with a warning each time).
    var failedReportsInARow = 0
    static let reportRetryLimit = Duration.seconds(5)
    /// During a shutdown, the reports not sent by then are given up (``giveUpReports()``).
    var reportsGiveUpAt: ContinuousClock.Instant?
    /// How long after its shutdown deadline a worker keeps trying to send its reports: its grace period
    /// again, and at least five seconds (a store that is slow for a moment is not a store that refuses).
    var reportsGracePeriod: Duration { max(configuration.shutdownGracePeriod, .seconds(5)) }
    var shutdownDeadline: ContinuousClock.Instant?
    var cancelledForShutdown = false
    /// When attempts cancelled for the shutdown that still run are left behind (see `abandonStuck()`).
    var abandonAt: ContinuousClock.Instant?
    /// `run` was cancelled: reports that cannot be sent now are dropped rather than retried.
    var hardStopped = false
    /// The store was closed under the worker: the error that showed it and how many reports were dropped.
    var storeClosed: (error: String, dropped: Int)?
    /// When this worker last pruned finished runs (store clock).
    var lastPrune: Date?
    /// A prune is in flight (``DurableWorker/pruneRound(before:)``).
    var pruning = false
    var idleSince: ContinuousClock.Instant?
    var lastStallCheck: ContinuousClock.Instant?
    /// The last claim found jobs (the worker is not idle).
    var lastClaimFound = false
    /// Tests' renewal requests: waiting for the next renewal to start, and riding on the one in flight.
    var renewRequests: [CheckedContinuation<Void, Never>] = []
    var renewWaiters: [CheckedContinuation<Void, Never>] = []
    /// When the lease watch looks next (``watchLeases(now:)``); nil while nothing runs.
    var leaseWatch: ContinuousClock.Instant?
    /// The timer armed (its deadline and number).
    var armed: ContinuousClock.Instant?
    var timerNumber: UInt64 = 0
    /// Timers armed in a row for times already past (debug builds: a spin trips an assertion).
    var pastTimers = 0

    init(worker: DurableWorker, input: AsyncStream<WorkerEvent>.Continuation, until: DurableRunID?) {
        self.worker = worker
        self.input = input
        self.until = until
        nextRenew = .now + worker.configuration.renewInterval
        reportsInFlight = max(1, worker.store.reportCallsInFlight)
    }

    var configuration: DurableWorker.Configuration { worker.configuration }
    var store: any JobStore { worker.store }
    var logger: Logger { worker.configuration.logger }

    /// Reacts to events until the worker has stopped: shut down, with every claimed job reported or
    /// given back.
    mutating func run(_ events: AsyncStream<WorkerEvent>, group: inout DiscardingTaskGroup) async {
        if decide(group: &group) { return }
        for await event in events {
            handle(event)
            if decide(group: &group) { break }
        }
        for waiter in renewRequests + renewWaiters { waiter.resume() }
        renewRequests = []
        renewWaiters = []
    }

    // MARK: Events

    mutating func handle(_ event: WorkerEvent) {
        switch event {
        case .wake:
            wantClaim = true
        case .tick(let number):
            if number == timerNumber { armed = nil }
        case .shutdown(let deadline):
            beginShutdown(at: deadline)
        case .hardStop:
            hardStopped = true
            beginShutdown(at: .now)
        case .ended(let lease, let outcome, let output):
            attemptEnded(lease, outcome: outcome, output: output)
        case .claimed(let round):
            claimed(round)
        case .polled(let runFinished, let due):
            polling = false
            if runFinished {
                beginShutdown(at: .now + configuration.shutdownGracePeriod)
            } else {
                var wait = configuration.pollInterval
                if let due { wait = min(wait, .seconds(max(due.timeIntervalSince(store.clock.now()), 0.001))) }
                nextClaim = .now + wait
            }
        case .reported(let round):
            reported(round)
        case .renewed(let round):
            renewed(round)
        case .pruned:
            pruning = false
        case .renewNow(let waiter):
            renewRequests.append(waiter)
        case .checkLeases(let answer):
            answer.resume(returning: stopAttemptsOutOfLease())
            leaseWatch = .now
        }
    }

    mutating func beginShutdown(at deadline: ContinuousClock.Instant) {
        if shutdownDeadline == nil { worker.hooks.shutdownBegan?() }
        if shutdownDeadline.map({ deadline < $0 }) ?? true {
            shutdownDeadline = deadline
            reportsGiveUpAt = deadline + reportsGracePeriod
        }
    }

    /// A shutdown whose reports the store would not take in time (a damaged store that refuses every
    /// call, a lock held for minutes): they are given up — their jobs run again once their leases end, as
    /// a killed worker's do — so that the worker stops, and its service group with it. A graceful
    /// shutdown waited for ever before.
    ///
    /// From then on, a report that fails is dropped (as at a hard stop), also one of an attempt whose
    /// body ends later: a body that stops after this moment cannot hold the worker either.
    mutating func giveUpReports() {
        reportsGiveUpAt = nil
        // What is in flight is dropped if it fails; what waits is dropped now.
        hardStopped = true
        guard !reports.isEmpty || !reporting.isEmpty else { return }
        logger.error(
            "worker '\(configuration.id)' stops without the store having taken \(reports.count + reporting.count) of its reports: their jobs run again once their leases end. The last error is in the warnings above."
        )
        for report in reports { forget(report.lease) }
        reports.removeAll()
        oldestReport = nil
    }

    mutating func attemptEnded(_ lease: Lease, outcome: JobOutcome, output: Data?) {
        guard var attempt = active[lease], !attempt.ended else { return }
        running -= 1
        attempt.ended = true
        active[lease] = attempt
        if let pending = worker.report(for: attempt, outcome: outcome, output: output) {
            queue([pending])
        } else if attempt.completion.current == .committed {
            // Recorded by the job's own transaction: the slot is free now.
            worker.tellEnded(attempt, .succeeded)
            active[lease] = nil
            wantClaim = true
        } else {
            // The lease was lost: nothing to report, and the slot is free now. (Found by the job's own
            // completion, refused for it, the loss was not told yet.)
            if attempt.cause?.isLeaseLost != true { worker.tellLostLease(attempt) }
            worker.tellEnded(attempt, .leaseLost)
            active[lease] = nil
            wantClaim = true
        }
    }

    mutating func claimed(_ round: ClaimRound) {
        claiming = nil
        switch round.result {
        case .failure(let error):
            if store.isClosed {
                stopForClosedStore(error, dropping: [])
                return
            }
            logger.warning("claiming failed, retrying: \(error)")
            nextClaim = .now + configuration.pollInterval
        case .success(let jobs):
            lastClaimFound = !jobs.isEmpty
            start(jobs, askedAt: round.askedAt, carriers: round.carriers)
            if round.polls {
                polling = true
            } else {
                wantClaim = true
            }
        }
    }

    mutating func reported(_ round: ReportRound) {
        guard let index = reporting.firstIndex(where: { $0.call == round.call }) else {
            assertionFailure(
                "DurableWorker '\(configuration.id)': an answer to report call \(round.call), not in flight")
            return
        }
        let call = reporting.remove(at: index)
        let (results, claimed): ([FinishResult], [ClaimedJob])
        switch round.result {
        case .failure(let error):
            if store.isClosed || hardStopped {
                if store.isClosed {
                    stopForClosedStore(error, dropping: round.batch.map(\.lease))
                } else {
                    drop(round.batch, because: error)
                }
                return
            }
            logger.warning("reporting \(round.batch.count) attempts failed, retrying: \(error)")
            if round.batch.count == 1 {
                queue(round.batch)  // this one alone failed: the others go first
            } else {
                queue(round.batch, first: true)
                oneByOneLeft += round.batch.count
            }
            reportFailures += 1
            failedReportsInARow += 1
            // Not past a quarter of a lease: an ended attempt's lease is not renewed while its report waits.
            let doubled = configuration.pollInterval * (1 << min(failedReportsInARow - 1, 16))
            reportRetry = .now + min(doubled, Self.reportRetryLimit, configuration.leaseDuration / 4)
            return
        case .success(let answer):
            (results, claimed) = answer
        }
        // The store took a call sent after the last failure: no need to wait any more. (One sent before
        // it says nothing of the failure's cause.)
        if call.failuresBefore == reportFailures {
            reportRetry = nil
            failedReportsInARow = 0
        }
        var reported: [AttemptReport] = []
        var releases: [Lease] = []
        for item in round.batch {
            switch item {
            case .report(let report): reported.append(report)
            case .release(let lease): releases.append(lease)
            }
        }
        for (report, result) in zip(reported, results) where result == .rejected {
            logger.notice(
                "the store rejected the completion of \(report.lease.job): its lease had ended (another attempt owns it, or it was cancelled)"
            )
        }
        var given = releases
        if let error = round.releaseError, !releases.isEmpty {
            if store.isClosed || hardStopped {
                if store.isClosed {
                    stopForClosedStore(error, dropping: releases)
                } else {
                    drop(releases.map(PendingReport.release), because: error)
                }
            } else {
                logger.warning("giving back \(releases.count) attempts failed, retrying: \(error)")
                queue(releases.map(PendingReport.release), first: true)
            }
            given = []
        }
        var ends: [Lease: DurableAttemptEnd] = [:]
        for (report, result) in zip(reported, results) { ends[report.lease] = DurableAttemptEnd(report, result) }
        for lease in given { ends[lease] = .released }
        for lease in ends.keys {
            guard let attempt = active.removeValue(forKey: lease) else { continue }
            worker.tellEnded(attempt, ends[lease] ?? .rejected)
        }
        start(claimed, askedAt: round.askedAt, carriers: round.carriers)
        // A retry may be due at once; given-back jobs may be claimed by others; room may be left.
        if results.contains(.accepted(.ready)) || !given.isEmpty || claimed.count == round.claimLimit
            || active.isEmpty
        {
            wantClaim = true
        }
    }

    /// Adds reports to send (`first`: ahead of those waiting).
    mutating func queue(_ items: [PendingReport], first: Bool = false) {
        guard !items.isEmpty else { return }
        if reports.isEmpty { oldestReport = .now }
        if first { reports.insert(contentsOf: items, at: 0) } else { reports.append(contentsOf: items) }
    }

    /// Forgets reports that cannot be sent during a hard stop: their jobs run again once their leases end.
    mutating func drop(_ batch: [PendingReport], because error: any Error) {
        logger.warning(
            "stopping: \(batch.count) reports not sent (their jobs run again once their leases end): \(error)")
        for item in batch { forget(item.lease) }
    }

    /// Forgets an attempt whose end cannot be reported: its job runs again once its lease ends. Its
    /// instruments hear of its end (`leaseLost`: the store has nothing from it), and its span ends.
    mutating func forget(_ lease: Lease) {
        guard let attempt = active.removeValue(forKey: lease) else { return }
        worker.tellEnded(attempt, .leaseLost)
    }

    mutating func renewed(_ round: RenewRound) {
        renewing = false
        nextRenew = .now + configuration.renewInterval
        defer {
            for waiter in renewWaiters { waiter.resume() }
            renewWaiters = []
        }
        let statuses: [LeaseStatus]
        switch round.result {
        case .failure(let error):
            logger.warning("renewing \(round.leases.count) leases failed: \(error)")
            return  // the lease watch stops the attempts whose leases run out
        case .success(let answer):
            statuses = answer
        }
        let leaseEnds = round.askedAt.adding(configuration.leaseDuration)
        for (lease, status) in zip(round.leases, statuses) {
            guard var attempt = active[lease] else { continue }
            switch status {
            case .renewed:
                attempt.leaseEnds = max(attempt.leaseEnds, leaseEnds)
            case .cancelRequested(let reason, _):
                attempt.leaseEnds = max(attempt.leaseEnds, leaseEnds)
                if attempt.cause == nil {
                    attempt.cause = .requested(reason)
                    attempt.job.cancel(
                        reason: DurableCancellation(message: "job '\(lease.job)' was cancelled: \(reason)"))
                }
            case .lost where attempt.completion.current.isRecording:
                // The job is recording (or recorded) its own success, which ends the lease: whether it was
                // lost first is known when the attempt ends (its completion refused).
                break
            case .lost:
                // Told once; one stopped as running out reports nothing now (it would be rejected).
                if attempt.cause?.isLeaseLost != true { worker.tellLostLease(attempt) }
                attempt.cause = .leaseLost
                attempt.job.cancel(
                    reason: DurableCancellation(
                        message: "job '\(attempt.claimed.name)' lost its lease (another worker took it over)"))
            }
            active[lease] = attempt
        }
    }

    // MARK: Decisions

    /// Starts what is due — reports, renewals, claims, timers — and returns whether the worker has stopped.
    mutating func decide(group: inout DiscardingTaskGroup) -> Bool {
        worker.hooks.decided?()
        let now = ContinuousClock.now
        if let deadline = shutdownDeadline, now >= deadline, !cancelledForShutdown { cancelForShutdown() }
        if let abandonAt, now >= abandonAt { abandonStuck() }
        if let giveUp = reportsGiveUpAt, now >= giveUp { giveUpReports() }
        if let due = leaseWatch, now >= due { watchLeases(now: now) }
        if reporting.count < reportsInFlight, !reports.isEmpty, reportRetry.map({ now >= $0 }) ?? true,
            reportsDue(now: now)
        {
            sendReports(group: &group)
        }
        if !renewing, !hardStopped, now >= nextRenew || !renewRequests.isEmpty {
            renew(group: &group)
        }
        let room = self.room(finishing: 0)
        if claiming == nil, !polling, shutdownDeadline == nil, room > 0,
            wantClaim || nextClaim.map({ now >= $0 }) ?? true
        {
            claim(room, group: &group)
        }
        watchForStall(now: now, group: &group)
        checkInvariants()
        if shutdownDeadline != nil, active.isEmpty, reports.isEmpty, claiming == nil, !polling, reporting.isEmpty {
            return true
        }
        // The next time something is due without an event: only what can start then (a deadline of a
        // call already in flight would wake the owner in a loop until it answers).
        var next: [ContinuousClock.Instant] = []
        if !renewing && !hardStopped { next.append(nextRenew) }
        if reporting.count < reportsInFlight, !reports.isEmpty {
            // The reports go when they are due, and not before a retry's wait is over: a batch that waits
            // for its retry while its first report's short delay is past must not wake the owner at once,
            // again and again, until the retry (a spin of a whole poll interval).
            var due = oldestReport.map { $0 + Self.reportDelay } ?? now
            if let reportRetry { due = max(due, reportRetry) }
            next.append(due)
        }
        if claiming == nil, !polling, shutdownDeadline == nil, room > 0, let nextClaim { next.append(nextClaim) }
        if let deadline = shutdownDeadline {
            next.append(cancelledForShutdown ? now + .seconds(1) : deadline)
        }
        if let giveUp = reportsGiveUpAt, !reports.isEmpty || !reporting.isEmpty { next.append(giveUp) }
        if let abandonAt { next.append(abandonAt) }
        if let leaseWatch { next.append(leaseWatch) }
        // (Not while a poll is in flight: the stall check waits for its answer, which wakes the owner; a
        // timer for a check already due would wake it again and again until then.)
        if !polling, let check = nextStallCheck { next.append(check) }
        if let earliest = next.min() { arm(earliest, group: &group) }
        return false
    }

    /// The room left beside the attempts held (less `finishing` of them, whose reports are being sent)
    /// and the room the calls in flight asked for.
    func room(finishing: Int) -> Int {
        guard shutdownDeadline == nil else { return 0 }
        let asked = (claiming ?? 0) + reporting.reduce(0) { $0 + $1.claim }
        let held = active.count - reporting.reduce(0) { $0 + $1.finishing } - finishing
        return max(0, configuration.maxConcurrentJobs - held - asked)
    }

    /// Arms a timer for `deadline` unless one that fires no later is armed (a timer that fires early
    /// only makes the owner decide again).
    mutating func arm(_ deadline: ContinuousClock.Instant, group: inout DiscardingTaskGroup) {
        #if DEBUG
        // A timer for a time already past wakes the owner at once; thousands in a row mean it waits for
        // something that no decision can start (a spin that would starve the task pool).
        pastTimers = deadline <= .now ? pastTimers + 1 : 0
        assert(
            pastTimers < 1_000,
            "DurableWorker '\(configuration.id)': its owner keeps arming timers for times already past")
        #endif
        if let armed, armed <= deadline { return }
        armed = deadline
        timerNumber &+= 1
        let (number, input) = (timerNumber, input)
        group.addTask {
            try? await Task.sleep(until: deadline, clock: .continuous)
            input.yield(.tick(number))
        }
    }

    /// How long the first of a batch of reports may wait for more attempts to end while others still
    /// run: a worker whose attempts end together then reports (and claims) in batches, as a claim loop
    /// does, instead of one call per attempt; one whose last attempt ended reports at once.
    static let reportDelay = Duration.milliseconds(1)

    /// Whether the pending reports go now: nothing held still runs (no more are about to come), enough
    /// are waiting, the first has waited ``reportDelay``, or the worker stops.
    func reportsDue(now: ContinuousClock.Instant) -> Bool {
        running == 0 || reports.count >= max(1, configuration.maxConcurrentJobs / 2) || shutdownDeadline != nil
            || oldestReport.map { now >= $0 + Self.reportDelay } ?? true
    }

    mutating func sendReports(group: inout DiscardingTaskGroup) {
        let batch: [PendingReport]
        if oneByOneLeft > 0 {
            oneByOneLeft -= 1
            batch = [reports.removeFirst()]
        } else {
            batch = reports
            reports.removeAll(keepingCapacity: true)
        }
        oldestReport = reports.isEmpty ? nil : .now
        // The room these attempts leave is claimed in the same call: a chain's next step starts with no
        // wake-up in between.
        // Late claims given back were never held: only the attempts held leave room.
        let finishing = batch.count { active[$0.lease] != nil }
        let claim = hardStopped ? 0 : room(finishing: finishing)
        reportCalls &+= 1
        let call = reportCalls
        reporting.append((call, finishing, claim, reportFailures))
        let worker = worker
        let input = input
        group.addTask {
            var round = await worker.sendReports(batch, thenClaim: claim)
            round.call = call
            input.yield(.reported(round))
        }
    }

    mutating func claim(_ limit: Int, group: inout DiscardingTaskGroup) {
        claiming = limit
        wantClaim = false
        nextClaim = nil
        let (worker, input, until) = (worker, input, until)
        group.addTask { await worker.claimRound(limit, until: until, input: input) }
    }

    mutating func renew(group: inout DiscardingTaskGroup) {
        renewing = true
        renewWaiters += renewRequests
        renewRequests = []
        // An attempt whose job is committing its own completion is not renewed: PostgreSQL holds its row
        // until the commit, and the batch's renewal would wait on it, for every lease of the batch.
        let leases = active.values.filter { !$0.ended && !$0.completion.current.isRecording }.map(\.claimed.lease)
        let (worker, input) = (worker, input)
        group.addTask { input.yield(.renewed(await worker.renewRound(leases))) }
        // The retention's prune, at most once a minute, goes beside the renewals, not in their way; none
        // starts once the worker stops (a prune of PostgreSQL is one transaction that would hold the stop).
        if let retention = configuration.retention, !pruning, shutdownDeadline == nil {
            let now = store.clock.now()
            if lastPrune.map({ now.timeIntervalSince($0) >= 60 }) ?? true {
                lastPrune = now
                pruning = true
                let before = now.adding(.zero - retention)
                group.addTask {
                    await worker.pruneRound(before: before)
                    input.yield(.pruned)
                }
            }
        }
    }

    /// While `run(until:)` has nothing to do: after a while, and then once a minute, say so when the
    /// run's jobs wait for kinds that no live worker has registered (else it would wait in silence).
    mutating func watchForStall(now: ContinuousClock.Instant, group: inout DiscardingTaskGroup) {
        guard let run = until, active.isEmpty, !lastClaimFound, shutdownDeadline == nil else {
            idleSince = nil
            return
        }
        // A poll in flight is part of being idle: it must not restart the wait (with a poll interval
        // shorter than the warning's delay, every poll did, and the warning never came).
        if idleSince == nil { idleSince = now }
        guard !polling, let due = nextStallCheck, now >= due else { return }
        lastStallCheck = now
        let worker = worker
        group.addTask { await worker.warnOfMissingWorkers(run) }
    }

    /// When ``watchForStall(now:group:)`` looks next, while the worker is idle.
    var nextStallCheck: ContinuousClock.Instant? {
        guard let idleSince else { return nil }
        let first = idleSince + configuration.stallWarningDelay
        guard let lastStallCheck, lastStallCheck >= idleSince else { return first }
        return max(first, lastStallCheck + .seconds(60))
    }

    // MARK: Stopping attempts

    /// Runs the lease watch and says when to look next: at the next attempt's deadline, and while
    /// attempts run at least every quarter lease (a manual clock moved by a test, a clock jump). Not at
    /// every event: it reads every attempt held, and a busy worker has hundreds.
    mutating func watchLeases(now: ContinuousClock.Instant) {
        let next = stopAttemptsOutOfLease()
        guard !active.isEmpty else {
            leaseWatch = nil
            return
        }
        var wait = configuration.leaseDuration / 4
        if let next { wait = min(wait, .seconds(max(next.timeIntervalSince(store.clock.now()), 0.001))) }
        leaseWatch = now + wait
    }

    /// How long before its lease ends an attempt that no renewal reached is stopped: an eighth of the
    /// lease, at most a second — time for its job to see the cancellation and end before another worker
    /// may claim the job (and take its category slot).
    var leaseStopMargin: Duration { min(configuration.leaseDuration / 8, .seconds(1)) }

    /// Cancels the running attempts whose lease ends within ``leaseStopMargin`` (and a millisecond);
    /// returns when the next one will (store clock). An attempt whose job has ended has nothing to stop,
    /// and one already being cancelled is left to that. A stopped attempt is reported failed, to be
    /// retried (``CancelCause/leaseRunningOut``).
    mutating func stopAttemptsOutOfLease() -> Date? {
        let now = store.clock.now().addingTimeInterval(0.001)
        var next: Date?
        for (lease, attempt) in active
        where attempt.cause == nil && !attempt.ended && !attempt.completion.current.isRecording {
            let deadline = attempt.leaseEnds.adding(.zero - leaseStopMargin)
            guard deadline <= now else {
                if next.map({ deadline < $0 }) ?? true { next = deadline }
                continue
            }
            active[lease]?.cause = .leaseRunningOut
            worker.tellLostLease(attempt)
            let ends = attempt.leaseEnds.formatted(.iso8601)
            logger.warning(
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

    /// After the grace period: cancels what still runs; those attempts are given back to the store.
    mutating func cancelForShutdown() {
        cancelledForShutdown = true
        for (lease, attempt) in active where attempt.cause == nil && !attempt.ended {
            active[lease]?.cause = .shutdown
            attempt.job.cancel(
                reason: DurableCancellation(message: "job '\(attempt.job.name)' stopped: its worker is shutting down"))
        }
        if active.values.contains(where: { !$0.ended }) {
            // Ten seconds: far more than a body that stops when cancelled needs, on a loaded machine too
            // (a one-second wait left such a body behind under a CI run's load, and its job ran again).
            abandonAt = .now + .seconds(10)
        }
    }

    /// Attempts that still run a while after they were cancelled for the shutdown (a body that ignores
    /// cancellation, blocks a thread, or awaits what never comes) would keep the worker — and its
    /// service group — from stopping, and their leases renewed, for ever. They are left behind: no
    /// longer renewed, their jobs run again once their leases end (elsewhere, possibly while the body
    /// still runs here: at least once, as for a worker that was killed), and what they report is not sent.
    mutating func abandonStuck() {
        abandonAt = nil
        let stuck = active.filter { !$0.value.ended }
        guard !stuck.isEmpty else { return }
        logger.error(
            "worker '\(configuration.id)' stops without waiting longer for \(stuck.count) jobs that did not stop when cancelled (\(stuck.values.map { "'\($0.claimed.name)'" }.sorted().joined(separator: ", "))): their leases are no longer renewed, and they run again once the leases end. Make their bodies stop when cancelled."
        )
        for lease in stuck.keys {
            running -= 1
            forget(lease)
        }
    }

    /// The store was closed under the worker: every call would fail for good. Stops at once (running
    /// jobs are cancelled) and forgets the attempts of `leases`, whose reports cannot be sent: their jobs
    /// run again once their leases end. `run` then throws.
    mutating func stopForClosedStore(_ error: any Error, dropping leases: [Lease]) {
        storeClosed = (storeClosed?.error ?? "\(error)", (storeClosed?.dropped ?? 0) + leases.count)
        logger.error(
            "the store was closed while worker '\(configuration.id)' ran: stopping\(leases.isEmpty ? "" : "; \(leases.count) reports not sent (their jobs run again once their leases end)")"
        )
        for lease in leases { forget(lease) }
        // Nothing more can be sent: what is left is forgotten once its job has ended.
        hardStopped = true
        for report in reports { forget(report.lease) }
        reports.removeAll()
        oldestReport = nil
        beginShutdown(at: .now)
    }

    // MARK: Starting attempts

    /// Runs claimed jobs as Baton jobs on the worker's queue. A claim that arrives with its lease about
    /// to end (a call that took long to answer, a store that retried it through a server restart) is
    /// given back unattempted rather than started: the lease watch would stop it at once.
    mutating func start(_ claimed: [ClaimedJob], askedAt: Date, carriers: [DurableRunID: [String: String]]) {
        guard !claimed.isEmpty else { return }
        let leaseEnds = askedAt.adding(configuration.leaseDuration)
        if leaseEnds.adding(.zero - leaseStopMargin) <= store.clock.now() || hardStopped
            || shutdownDeadline != nil && cancelledForShutdown
        {
            if !hardStopped && !cancelledForShutdown {
                logger.notice(
                    "giving back \(claimed.count) claimed jobs unattempted: their leases end within \(leaseStopMargin) (the claim took long to answer)"
                )
            }
            queue(claimed.map { .release($0.lease) })
            return
        }
        let started = worker.makeAttempts(claimed, leaseEnds: leaseEnds, carriers: carriers, input: input)
        for attempt in started { active[attempt.claimed.lease] = attempt }
        running += started.count
        worker.enqueue(started)
        // Their deadlines are the latest yet (asked for last): a watch already scheduled stays as it is.
        if leaseWatch == nil { leaseWatch = .now }
    }

    /// Debug builds check the owner's invariants after every decision.
    func checkInvariants() {
        #if DEBUG
        let asked = (claiming ?? 0) + reporting.reduce(0) { $0 + $1.claim }
        let finishing = reporting.reduce(0) { $0 + $1.finishing }
        assert(reporting.count <= reportsInFlight, "more report calls in flight than the store allows")
        assert(
            active.count - finishing + asked <= configuration.maxConcurrentJobs,
            "DurableWorker '\(configuration.id)': \(active.count - finishing) attempts held and \(asked) asked for, over its limit of \(configuration.maxConcurrentJobs)"
        )
        assert(shutdownDeadline == nil || room(finishing: 0) == 0, "a worker that shuts down claims nothing")
        assert(running == active.values.count { !$0.ended }, "the count of running attempts drifted")
        #endif
    }
}
