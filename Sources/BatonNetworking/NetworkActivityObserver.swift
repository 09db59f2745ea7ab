public import Baton

/// A job observer that counts the network jobs in flight — started and not yet finished — for a
/// spinner, a status line or the system's network activity indicator.
///
/// ```swift
/// let activity = NetworkActivityObserver { count in statusLine.showsActivity = count > 0 }
/// download.addObserver(activity)
/// upload.addObserver(activity)
/// ```
///
/// Add the same observer to every network job. A job counts from the moment its body starts until it
/// finishes; a job cancelled before it started is never counted.
///
/// ## Thread safety
/// May be shared by any number of jobs on any threads. The count is guarded by a lock; `onChange` is
/// called after the lock is released, on the thread of the job event. When jobs start and finish at
/// the same moment on different threads, calls can arrive out of order; ``activeCount`` is always current.
public final class NetworkActivityObserver: JobObserver, @unchecked Sendable {
    // @unchecked Sendable: `onChange` is immutable; `active` and `count` are guarded by `lock`.
    private let lock = Lock()
    private var active: Set<UInt64> = []
    private let onChange: (@Sendable (Int) -> Void)?

    /// Creates an observer.
    ///
    /// - Parameter onChange: Called with the new number of jobs in flight after each change.
    public init(onChange: (@Sendable (Int) -> Void)? = nil) {
        self.onChange = onChange
    }

    /// The number of observed jobs that started and have not finished.
    public var activeCount: Int { lock.withLock { active.count } }

    public func jobDidStart(_ job: Job) {
        let count = lock.withLock {
            active.insert(job.id)
            return active.count
        }
        onChange?(count)
    }

    public func jobDidFinish(_ job: Job, outcome: JobOutcome) {
        let count: Int? = lock.withLock {
            guard active.remove(job.id) != nil else { return nil }
            return active.count
        }
        if let count { onChange?(count) }
    }
}
