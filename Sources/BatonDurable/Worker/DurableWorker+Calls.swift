import Foundation
import Logging

// The store calls of a running worker. Each runs as a child task of the run's task group and returns
// what it learned as one event for the owner (WorkerOwner); none of them touches the owner's state.

extension DurableWorker {
    /// Claims up to `limit` jobs and tells the owner at once. When that leaves room, it then reads when
    /// more work may become due, and — for `run(until:)` with nothing claimed — whether its run has
    /// finished, and tells that apart: the claimed jobs start without waiting for those reads.
    func claimRound(
        _ limit: Int, until run: DurableRunID?, input: AsyncStream<WorkerEvent>.Continuation
    ) async {
        let askedAt = store.clock.now()
        let jobs: [ClaimedJob]
        do {
            jobs = try await store.claim(
                worker: configuration.id, kinds: kinds, limit: limit, lease: configuration.leaseDuration)
        } catch {
            input.yield(.claimed(ClaimRound(limit: limit, askedAt: askedAt, result: .failure(error))))
            return
        }
        let polls = jobs.count < limit
        input.yield(
            .claimed(
                ClaimRound(
                    limit: limit, askedAt: askedAt, result: .success(jobs),
                    carriers: await traceCarriers(for: jobs), polls: polls)))
        guard polls else { return }
        var finished = false
        if jobs.isEmpty, let run { finished = await isFinished(run) }
        input.yield(.polled(runFinished: finished, due: try? await store.nextDueDate(kinds: kinds)))
    }

    /// Reports ended attempts and claims the room they leave in the same call (one transaction on the
    /// SQLite store); then gives back the released leases, apart, so that the claimed jobs start
    /// whatever becomes of the release.
    func sendReports(_ batch: [PendingReport], thenClaim limit: Int) async -> ReportRound {
        let askedAt = store.clock.now()
        var reports: [AttemptReport] = []
        var releases: [Lease] = []
        for item in batch {
            switch item {
            case .report(let report): reports.append(report)
            case .release(let lease): releases.append(lease)
            }
        }
        var round: ReportRound
        do {
            let answer = try await store.finish(
                reports, thenClaim: limit, worker: configuration.id, kinds: kinds, lease: configuration.leaseDuration)
            round = ReportRound(batch: batch, claimLimit: limit, askedAt: askedAt, result: .success(answer))
        } catch {
            return ReportRound(batch: batch, claimLimit: limit, askedAt: askedAt, result: .failure(error))
        }
        if !releases.isEmpty {
            do { try await store.release(releases) } catch { round.releaseError = error }
        }
        if case .success(let answer) = round.result { round.carriers = await traceCarriers(for: answer.claimed) }
        return round
    }

    /// Refreshes the worker's registration and renews `leases`.
    func renewRound(_ leases: [Lease]) async -> RenewRound {
        let askedAt = store.clock.now()
        try? await store.register(
            WorkerRecord(id: configuration.id, kinds: kinds, expires: askedAt.adding(configuration.leaseDuration)))
        let result: Result<[LeaseStatus], any Error>
        if leases.isEmpty {
            result = .success([])
        } else {
            do {
                result = .success(
                    try await store.renew(leases, worker: configuration.id, lease: configuration.leaseDuration))
            } catch {
                result = .failure(error)
            }
        }
        return RenewRound(leases: leases, askedAt: askedAt, result: result)
    }

    /// Prunes the runs finished before `date` (the worker's retention), a call of its own beside the
    /// renewals: a prune of many runs takes seconds (tens of thousands of runs), and renewals that waited
    /// for it let leases run out and stopped running jobs (found by a probe, 7 December 2026).
    func pruneRound(before date: Date) async {
        do {
            let pruned = try await store.prune(finishedBefore: date)
            if pruned > 0 { configuration.logger.info("pruned \(pruned) finished runs") }
        } catch is CancellationError {
            // The worker is stopping (its calls are cancelled): nothing went wrong, nothing to say.
        } catch {
            configuration.logger.warning("pruning finished runs failed: \(error)")
        }
    }

    /// Whether `run` has finished — or is gone (pruned, by this worker's retention or another's): it
    /// finished before. A failure to read it says nothing (the next claim looks again).
    func isFinished(_ run: DurableRunID) async -> Bool {
        do {
            return try await store.record(of: run).finished != nil
        } catch let error as DurableError where error.code == .unknownRun {
            return true
        } catch {
            return false
        }
    }

    /// Logs a warning when jobs of `run` wait for kinds that no live worker has registered.
    func warnOfMissingWorkers(_ run: DurableRunID) async {
        guard let explanation = try? await store.explain(run: run) else { return }
        var jobsByKind: [String: [String]] = [:]
        for job in explanation.jobs {
            for case .noWorker(let kind) in job.waitingFor { jobsByKind[kind, default: []].append(job.name) }
        }
        guard !jobsByKind.isEmpty else { return }
        let described = jobsByKind.keys.sorted().map { kind in
            let names = jobsByKind[kind]!
            let more = names.count > 3 ? " and \(names.count - 3) more" : ""
            return "'\(kind)' (\(names.prefix(3).map { "'\($0)'" }.joined(separator: ", "))\(more))"
        }
        configuration.logger.warning(
            "worker '\(configuration.id)' waits for \(run), whose jobs of kinds \(described.joined(separator: ", ")) no live worker has registered: start a DurableWorker with those job types, or run(until:) waits for ever"
        )
    }
}
