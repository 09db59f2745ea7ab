public import Baton
public import Tracing

/// Makes a span (swift-distributed-tracing) of every job of the queues it watches, and runs each job's
/// body inside its span's `ServiceContext`.
///
/// ```swift
/// InstrumentationSystem.bootstrap(OTelTracer(...))  // any tracer
/// JobQueue.defaultInstruments = [JobTracing()]
/// ```
///
/// - A job's span starts when the job is added and ends when it finishes; its events are `ready` and
///   `started`. It is named after the job and carries `baton.queue`, `baton.job.kind`, `baton.job.id`,
///   `baton.attempt` (the attempt number of a `RetryJob`'s attempt, 1 otherwise) and, once
///   finished, `baton.outcome` (`succeeded`, `failed`, `cancelled`). A failed job records its error
///   and the error status.
/// - The parent of a job's span is the span of the running job it was added from (the producer of a
///   produced job, the group whose body added its children), else the span of its `Job.parentGroup`,
///   else the submitter's: the task-local `ServiceContext` of the code that added it. The attempts of
///   a `RetryJob` and the iterations of a `RepeatJob` are siblings under its span (each is added as
///   the previous one finishes, not from inside it).
/// - A job's dependencies are links of its span.
/// - The body runs with `ServiceContext.current` set to the span's context, so spans the body starts
///   are children of the job's, and the submitter's baggage reaches the body.
///
/// A dependency's context is kept after it finished, for dependents added later, for the last
/// `retainedFinishedContexts` jobs. With no tracer bootstrapped (swift-distributed-tracing's
/// `NoOpTracer`) when it is created and none given, the instrument is not enabled (``isEnabled``):
/// queues leave it out.
///
/// ## Thread safety
/// Called by queues from any thread; the spans of live jobs are kept behind one lock, and the tracer
/// (your code) is called outside it.
public final class JobTracing: JobInstrument {
    private let tracer: (any Tracer)?
    private let retainedFinishedContexts: Int
    private let state = Protected(State())

    /// The task-local context key that marks a context as a job's: jobs added while it is current are
    /// that job's children.
    enum JobIDKey: ServiceContextKey {
        typealias Value = UInt64
    }

    /// - Parameters:
    ///   - tracer: Defaults to the bootstrapped one (`InstrumentationSystem.tracer`).
    ///   - retainedFinishedContexts: How many finished jobs' contexts are kept so that dependents
    ///     added after them can link to them.
    public init(tracer: (any Tracer)? = nil, retainedFinishedContexts: Int = 10_000) {
        let chosen = tracer ?? InstrumentationSystem.tracer
        self.tracer = chosen is NoOpTracer ? nil : chosen
        self.retainedFinishedContexts = max(0, retainedFinishedContexts)
    }

    /// Whether a tracer was given or bootstrapped. Queues leave out an instrument that is not enabled.
    public var isEnabled: Bool { tracer != nil }

    struct Live {
        let span: any Span
        /// The span's context, marked with the job's id.
        let context: ServiceContext
        /// Dependencies not added yet, which this job waits to link to.
        var pendingOn: [UInt64] = []
    }

    struct State {
        var live: [UInt64: Live] = [:]
        /// Finished jobs' contexts, for late dependents; the oldest go first.
        var finished: [UInt64: ServiceContext] = [:]
        var finishedOrder: [UInt64] = []
        var finishedStart = 0
        /// Dependents (by id) that wait to link to a dependency (key) not yet added.
        var pendingLinks: [UInt64: [UInt64]] = [:]

        func context(of id: UInt64) -> ServiceContext? { live[id]?.context ?? finished[id] }
    }

    // MARK: JobInstrument

    public func jobWasAdded(_ job: Job, to queue: JobQueue) {
        guard let tracer else { return }
        let current = ServiceContext.current ?? .topLevel
        let group = job.parentGroup
        let dependencies = job.dependencies + job.generatedDependencies
        let adder = current[JobIDKey.self]
        let (groupContext, adderIsLive) = state.withLock { state in
            (group.flatMap { state.context(of: $0.id) }, adder.map { state.live[$0] != nil } ?? false)
        }
        // Added from inside a running job (a producer, a group's body): that job is the parent. A job
        // added while a finished job's context is current (the next attempt of a retry, added as the
        // previous one finishes) belongs under its group instead.
        let parent = adderIsLive || groupContext == nil ? current : groupContext!
        let span = tracer.startSpan(job.name, context: parent, ofKind: .internal)
        span.attributes["baton.queue"] = queue.name
        span.attributes["baton.job.kind"] = JobMetrics.typeName(job)
        span.attributes["baton.job.id"] = Int64(clamping: job.id)
        span.attributes["baton.attempt"] = (group as? RetryJob).map { Int64($0.attempts) } ?? 1
        var context = span.context
        context[JobIDKey.self] = job.id
        let marked = context
        let (links, waiting): ([ServiceContext], [any Span]) = state.withLock { state in
            var live = Live(span: span, context: marked)
            var links: [ServiceContext] = []
            for dependency in dependencies {
                if let found = state.context(of: dependency.id) {
                    links.append(found)
                } else {
                    state.pendingLinks[dependency.id, default: []].append(job.id)
                    live.pendingOn.append(dependency.id)
                }
            }
            state.live[job.id] = live
            let waiting = (state.pendingLinks.removeValue(forKey: job.id) ?? []).compactMap { state.live[$0]?.span }
            return (links, waiting)
        }
        for link in links { span.addLink(SpanLink(context: link, attributes: [:])) }
        for dependent in waiting { dependent.addLink(SpanLink(context: marked, attributes: [:])) }
    }

    public func jobBecameReady(_ job: Job, in queue: JobQueue) {
        span(of: job)?.addEvent("ready")
    }

    public func jobWillStart(_ job: Job, in queue: JobQueue) {
        span(of: job)?.addEvent("started")
    }

    public func withStart(of job: Job, in queue: JobQueue, _ body: () -> Void) {
        guard let context = state.withLock({ $0.live[job.id]?.context }) else { return body() }
        ServiceContext.withValue(context) { body() }
    }

    public func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) {
        let keep = retainedFinishedContexts
        guard
            let live: Live = state.withLock({ state in
                guard let live = state.live.removeValue(forKey: job.id) else { return nil }
                state.pendingLinks[job.id] = nil
                for dependency in live.pendingOn {  // dependencies that were never added here
                    state.pendingLinks[dependency]?.removeAll { $0 == job.id }
                    if state.pendingLinks[dependency]?.isEmpty == true { state.pendingLinks[dependency] = nil }
                }
                if keep > 0 {
                    state.finished[job.id] = live.context
                    state.finishedOrder.append(job.id)
                    if state.finishedOrder.count - state.finishedStart > keep {
                        state.finished[state.finishedOrder[state.finishedStart]] = nil
                        state.finishedStart += 1
                        if state.finishedStart > keep {  // compact now and then
                            state.finishedOrder.removeFirst(state.finishedStart)
                            state.finishedStart = 0
                        }
                    }
                }
                return live
            })
        else { return }
        let span = live.span
        switch outcome {
        case .succeeded:
            span.attributes["baton.outcome"] = "succeeded"
        case .failed(let error):
            span.attributes["baton.outcome"] = "failed"
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error, message: "\(error)"))
        case .cancelled:
            span.attributes["baton.outcome"] = "cancelled"
        }
        span.end()
    }

    private func span(of job: Job) -> (any Span)? {
        state.withLock { $0.live[job.id]?.span }
    }
}
