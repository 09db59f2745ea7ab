import Baton
import Foundation
import Tracing

// Traces and instruments of a worker's attempts: the attempt's span (a child of the submitter's
// context stored with the run), and the DurableWorkerInstrument calls. Nothing here runs under the
// worker's lock.

extension DurableWorker {
    /// The stored trace contexts of the runs of `claimed`, when the worker traces: asked of the store
    /// once per run (a run's context never changes) and kept for the last 1,024 runs.
    func traceCarriers(for claimed: [ClaimedJob]) async -> [DurableRunID: [String: String]] {
        guard tracer != nil, !claimed.isEmpty else { return [:] }
        var result: [DurableRunID: [String: String]] = [:]
        for run in Set(claimed.map(\.run)) {
            if let known = carriers.withLock({ $0[run] }) {
                result[run] = known
                continue
            }
            let carrier: [String: String]
            do {
                carrier = try await store.traceCarrier(of: run)
            } catch {
                // Not kept: the next attempt of the run asks again (one failed read left every later
                // attempt of the run without a parent until the cache was cleared).
                configuration.logger.warning(
                    "reading the trace context of \(run) failed; this attempt's span has no parent: \(error)")
                result[run] = [:]
                continue
            }
            let dropped = carriers.withLock { cache -> [DurableRunID: [String: String]] in
                var dropped: [DurableRunID: [String: String]] = [:]
                if cache.count >= 1024 { swap(&dropped, &cache) }
                cache[run] = carrier
                return dropped
            }
            _ = dropped  // released outside the lock
            result[run] = carrier
        }
        return result
    }

    /// Starts the span of an attempt, a child of the submitter's context in `carrier`, and returns it
    /// with the context the attempt's body runs in. `nil` when the worker does not trace.
    func beginSpan(of claim: ClaimedJob, carrier: [String: String]?) -> (span: any Span, context: ServiceContext)? {
        guard let tracer else { return nil }
        var parent = ServiceContext.topLevel
        if let carrier, !carrier.isEmpty { tracer.extract(carrier, into: &parent, using: DictionaryCarrier()) }
        let span = tracer.startSpan(claim.name, context: parent, ofKind: .consumer)
        span.attributes["baton.job.kind"] = claim.kind
        span.attributes["baton.attempt"] = Int64(claim.attempt)
        span.attributes["baton.durable.job"] = claim.job.rawValue
        span.attributes["baton.durable.run"] = claim.run.rawValue
        span.attributes["baton.durable.worker"] = configuration.id
        var context = span.context
        context[DurableAttemptKey.self] = claim.job.rawValue
        return (span, context)
    }

    /// Runs an attempt's body in `context` (the attempt span's), unless the body already runs in a
    /// context made from it (a queue instrument such as `JobTracing` started the job's own span as
    /// its child).
    static func runAttempt(
        in context: ServiceContext?, job: DurableJobID, _ body: () async throws -> Data
    ) async throws -> Data {
        guard let context, ServiceContext.current?[DurableAttemptKey.self] != job.rawValue else {
            return try await body()
        }
        return try await ServiceContext.withValue(context) { try await body() }
    }

    func tellClaimed(_ claim: ClaimedJob, job: Job) {
        for instrument in durableInstruments { instrument.attemptClaimed(claim, job: job, worker: self) }
    }

    func tellLostLease(_ attempt: ActiveAttempt) {
        attempt.span?.addEvent("lease lost")
        for instrument in durableInstruments {
            instrument.attemptLostLease(attempt.claimed, job: attempt.job, worker: self)
        }
    }

    /// Ends the attempt's span with the outcome the store recorded, and tells the instruments.
    func tellEnded(_ attempt: ActiveAttempt, _ end: DurableAttemptEnd) {
        if let span = attempt.span {
            span.attributes["baton.outcome"] = end.description
            switch end {
            case .failed(let message), .retryScheduled(let message):
                span.setStatus(SpanStatus(code: .error, message: message))
            case .succeeded, .cancelled, .snoozed, .leaseLost, .released, .rejected: break
            }
            span.end()
        }
        for instrument in durableInstruments {
            instrument.attemptEnded(attempt.claimed, job: attempt.job, end: end, worker: self)
        }
    }
}
