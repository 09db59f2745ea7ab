import Baton
import Foundation
import Tracing

// Claimed jobs as Baton jobs: made for the owner (WorkerOwner.start), and what their ends become.

extension DurableWorker {
    /// Makes a Baton job for each claimed job; each reports its end to the owner through `input`.
    /// `leaseEnds`: when their leases end, as far as this worker can tell (``ActiveAttempt/leaseEnds``).
    func makeAttempts(
        _ claimed: [ClaimedJob], leaseEnds: Date, carriers: [DurableRunID: [String: String]],
        input: AsyncStream<WorkerEvent>.Continuation
    ) -> [ActiveAttempt] {
        claimed.compactMap { claim in
            guard let runner = runners[claim.kind] else { return nil }  // never: only our kinds are claimed
            let output = Protected<Data?>(nil)
            let completion = AttemptCompletion(store: store, lease: claim.lease, jobName: claim.name)
            let context = DurableJobContext(
                job: claim.job, run: claim.run, name: claim.name, attempt: claim.attempt,
                maxAttempts: claim.maxAttempts, worker: configuration.id,
                loggerSource: JobLoggerSource(adding: configuration.logger), completion: completion)
            let span = beginSpan(of: claim, carrier: carriers[claim.run])
            let job = AsyncJob(
                name: claim.name, priority: JobPriority(rawValue: min(max(claim.priority, 0), 4)) ?? .normal
            ) { _ in
                let data = try await Self.runAttempt(in: span?.context, job: claim.job) {
                    try await runner.run(claim.input, context, claim.kind)
                }
                output.withLock { $0 = data }
            }
            if let timeout = claim.timeout, timeout > .zero { job.addTimeout(timeout) }
            let lease = claim.lease
            job.addObserver(
                BlockObserver(onFinish: { _, outcome in input.yield(.ended(lease, outcome, output.current)) }))
            return ActiveAttempt(
                claimed: claim, job: job, completion: completion, leaseEnds: leaseEnds, span: span?.span,
                context: span?.context)
        }
    }

    /// Tells the instruments and adds the attempts' jobs to the queue — each traced one in its span's
    /// context, so that a queue instrument's span of the job is its child.
    func enqueue(_ attempts: [ActiveAttempt]) {
        for attempt in attempts { tellClaimed(attempt.claimed, job: attempt.job) }
        queue.add(attempts.filter { $0.context == nil }.map(\.job))
        for attempt in attempts {
            guard let context = attempt.context else { continue }
            ServiceContext.withValue(context) { queue.add(attempt.job) }
        }
    }

    /// What the store is told of an attempt whose Baton job ended so; nil when nothing is (its lease is lost).
    func report(for attempt: ActiveAttempt, outcome: JobOutcome, output: Data?) -> PendingReport? {
        let lease = attempt.claimed.lease
        // A completion the job committed in its own transaction, or one the store refused there: the
        // store has its answer already, whatever the job did after.
        switch attempt.completion.current {
        case .committed, .refused: return nil
        case .open, .committing: break
        }
        func failed(_ message: String, retryable: Bool = true) -> PendingReport {
            .report(AttemptReport(lease: lease, outcome: .failed(message: message, retryable: retryable)))
        }
        switch outcome {
        case .succeeded:
            // An output no store keeps would be refused at every report, for ever: the job fails instead,
            // at once (its next attempt would return as much).
            if let output, output.count > StoredText.valueLimit {
                return failed(
                    "the job's output is \(output.count) bytes, over the \(StoredText.valueLimit) a store keeps; store large results elsewhere (a file, an object store) and return their address",
                    retryable: false)
            }
            return .report(
                AttemptReport(
                    lease: lease, outcome: .succeeded(output: output ?? Data("null".utf8)),
                    additions: attempt.completion.additions))
        case .failed(let error):
            // What no later attempt can change fails the job at once: what the job said so of
            // (`PermanentFailure`), an input that does not decode, or jobs it added that the store refused
            // in its own completion transaction as a cycle or a malformed graph (as `finish` refuses them).
            // A conflict of the moment is retried.
            if let permanent = error as? PermanentFailure {
                return failed(describe(permanent.underlying), retryable: false)
            }
            // A body told to stop often stops with an error of its own (a `URLError.cancelled`, a
            // library's "request aborted"): the stop decides, as when it throws `CancellationError`. A job
            // stopped by the worker's shutdown is given back unattempted, not failed.
            switch attempt.cause {
            case .shutdown: return .release(lease)
            case .leaseLost: return nil
            case .requested(let why): return .report(AttemptReport(lease: lease, outcome: .cancelled(reason: why)))
            case .leaseRunningOut, nil: break
            }
            if let snooze = error as? Snooze {
                if let refusal = snooze.refusal { return failed(refusal) }
                return .report(AttemptReport(lease: lease, outcome: .snoozed(wait: snooze.wait)))
            }
            let durable = error as? DurableError
            let permanent =
                durable?.code == .decoding || (durable?.refusesAddedJobs == true && durable?.code != .conflict)
            return failed(describe(error), retryable: !permanent)
        case .cancelled(let reason):
            if let error = reason as? JobError, error.code == .timedOut { return failed(error.message) }
            switch attempt.cause {
            case .requested(let why): return .report(AttemptReport(lease: lease, outcome: .cancelled(reason: why)))
            case .leaseLost: return nil
            case .leaseRunningOut:
                return failed("stopped: no lease renewal reached the store before the lease ran out")
            case .shutdown: return .release(lease)
            case nil: return failed("cancelled: \(describe(reason))")
            }
        }
    }

    private func describe(_ error: any Error) -> String {
        if let error = error as? DurableError { return error.message }
        if let error = error as? JobError { return error.message }
        // (A PostgreSQL error describes itself as "Generic description to prevent accidental leakage
        // of sensitive data": its store says what the server said.)
        return store.describeFailure(error) ?? "\(error)"
    }
}
