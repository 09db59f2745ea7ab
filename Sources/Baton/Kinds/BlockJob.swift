import Dispatch

/// A job made of synchronous closures, like `Foundation.BlockOperation`.
///
/// With several blocks (``addExecutionBlock(_:)``), they run concurrently and the job finishes when
/// all have returned. If blocks throw, the job fails with the error of the first failing block in the
/// order they were added.
///
/// ## Thread safety
/// All methods may be called from any thread; the blocks are guarded by the job's lock and dropped
/// once the job finished.
public final class BlockJob: Job, @unchecked Sendable {
    // @unchecked Sendable: `first` and `more` are guarded by the job's lock.
    @exclusivity(unchecked) private var first: (@Sendable () throws -> Void)?
    @exclusivity(unchecked) private var more: [@Sendable () throws -> Void] = []

    /// Creates a job that runs `block`.
    public init(name: String? = nil, priority: JobPriority = .normal, _ block: @escaping @Sendable () throws -> Void) {
        first = block
        super.init(name: name, priority: priority)
    }

    /// Creates a job with no block yet; add them with ``addExecutionBlock(_:)``. With none, the job
    /// simply succeeds (useful as a "barrier" that others depend on).
    public override init(name: String? = nil, priority: JobPriority = .normal) {
        super.init(name: name, priority: priority)
    }

    /// Adds a block that runs concurrently with the others.
    ///
    /// - Precondition: The job has not started executing. Adding to a running or finished job is a
    ///   bug in the calling code and stops the program with a message naming the job.
    public func addExecutionBlock(_ block: @escaping @Sendable () throws -> Void) {
        let state: JobState = withCore { core in
            let state = core.lifecycle.publicState
            guard state < .executing else { return state }
            // `first` and `more` are guarded by the same lock.
            if first == nil { first = block } else { more.append(block) }
            return state
        }
        if state >= .executing { fatalError("Baton: cannot add a block to job '\(name)': it is already \(state).") }
    }

    /// The number of blocks (zero once the job finished).
    public var executionBlockCount: Int {
        mutex.withLock { (first == nil ? 0 : 1) + more.count }
    }

    public override func execute() throws {
        // Take the blocks out: they run once, and the job must not keep them afterwards.
        let (first, more) = mutex.withLock {
            defer {
                self.first = nil
                self.more = []
            }
            return (self.first, self.more)
        }
        guard let first else { return }
        if more.isEmpty { return try first() }
        try Self.runConcurrently([first] + more)
    }

    /// Runs several blocks concurrently; throws the error of the first failing one in their order.
    private static func runConcurrently(_ blocks: [@Sendable () throws -> Void]) throws {
        let failures = Lock()
        nonisolated(unsafe) var firstFailure: (index: Int, error: any Error)?  // guarded by `failures`
        DispatchQueue.concurrentPerform(iterations: blocks.count) { index in
            do {
                try blocks[index]()
            } catch {
                failures.withLock {
                    if firstFailure == nil || index < firstFailure!.index { firstFailure = (index, error) }
                }
            }
        }
        if let failure = failures.withLock({ firstFailure }) { throw failure.error }
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        guard !executed else { return [] }  // `execute()` took them already
        // Moved out under the lock (the array keeps them alive), dropped after it.
        let blocks = mutex.withLock {
            defer { more = [] }
            return (first.take(), more)
        }
        _ = blocks
        return []
    }
}
