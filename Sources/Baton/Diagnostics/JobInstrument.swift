/// Watches every job of the queues it is given to: the hook that metrics, traces and timelines are
/// built on (see `BatonObservability`).
///
/// A queue tells its instruments, in order, that a job was added, became ready to run (its
/// dependencies finished, its conditions were satisfied, its categories were granted), started, and
/// finished. Jobs that finish without running (cancelled or failed while waiting) are told of as
/// added, then finished. The children of a ``GroupJob`` run on a queue of the group's, which has the
/// same instruments.
///
/// ```swift
/// let queue = JobQueue(name: "import", instruments: [JobMetrics(), timeline])
/// ```
///
/// Calls come on the thread that caused the event, outside every lock, and must be quick: the job's
/// next step waits for them. A queue without instruments pays one check per event.
///
/// ## Thread safety
/// Implementations are called from any thread, concurrently for different jobs.
public protocol JobInstrument: Sendable {
    /// `job` joined `queue`.
    func jobWasAdded(_ job: Job, to queue: JobQueue)
    /// `job` is ready and waits only for a free slot of `queue`.
    func jobBecameReady(_ job: Job, in queue: JobQueue)
    /// `job`'s body is about to run, on the calling thread.
    func jobWillStart(_ job: Job, in queue: JobQueue)
    /// `job` finished with `outcome`; its observers were told. Called before those waiting for `job`
    /// (`await job.outcome`) resume and before the jobs that were waiting for it are released; waiting
    /// for it synchronously from here returns its outcome at once. A job that starts waiting only after `job` finished (added in the
    /// same call, say) finds it finished and may be reported ready before this call.
    func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome)
    /// Runs `body`, which starts `job`'s body (for an ``AsyncJob``, creates its task), so that the
    /// instrument can surround it: bind a task-local `ServiceContext`, say, which tasks created inside
    /// inherit. The default runs `body`. Instruments nest in the order they were given.
    func withStart(of job: Job, in queue: JobQueue, _ body: () -> Void)
    /// Whether the instrument wants to be told anything. A queue asks once, when it is created, and
    /// leaves out instruments that answer `false` (metrics with no backend, say), so that it costs
    /// exactly what a queue without them costs. The default is `true`.
    var isEnabled: Bool { get }
}

extension JobInstrument {
    public func jobWasAdded(_ job: Job, to queue: JobQueue) {}
    public func jobBecameReady(_ job: Job, in queue: JobQueue) {}
    public func jobWillStart(_ job: Job, in queue: JobQueue) {}
    public func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) {}
    public func withStart(of job: Job, in queue: JobQueue, _ body: () -> Void) { body() }
    public var isEnabled: Bool { true }
}

extension JobQueue {
    /// The instruments that queues created from now on get when none are given (``JobQueue/main``
    /// included, if it is first used afterwards). Set it once, early, to watch every queue.
    public static var defaultInstruments: [any JobInstrument] {
        get { defaultInstrumentsBox.current }
        set { defaultInstrumentsBox.exchange(newValue) }
    }

    private static let defaultInstrumentsBox = Protected<[any JobInstrument]>([])

    /// Runs `body` inside every instrument's ``JobInstrument/withStart(of:in:_:)``, outermost first.
    func withInstruments(starting job: Job, _ body: () -> Void) {
        func wrap(_ index: Int) {
            guard index < instruments.count else { return body() }
            instruments[index].withStart(of: job, in: self) { wrap(index + 1) }
        }
        wrap(0)
    }
}
