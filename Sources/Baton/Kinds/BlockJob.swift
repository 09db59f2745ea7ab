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
    // @unchecked Sendable: `blocks` is guarded by the job's lock.
    @exclusivity(unchecked) private var blocks = Blocks()

    /// The job's closures. One value, so that they are taken out under the lock as one: a closure
    /// returned on its own through the lock's generic result (or a local it is swapped into) costs an
    /// allocation each way.
    private struct Blocks {
        var first: (@Sendable () throws -> Void)?
        var more: [@Sendable () throws -> Void] = []
    }

    /// Creates a job that runs `block`.
    public init(name: String? = nil, priority: JobPriority = .normal, _ block: @escaping @Sendable () throws -> Void) {
        blocks.first = block
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
            // `blocks` is guarded by the same lock.
            if blocks.first == nil { blocks.first = block } else { blocks.more.append(block) }
            return state
        }
        if state >= .executing { fatalError("Baton: cannot add a block to job '\(name)': it is already \(state).") }
    }

    /// The number of blocks (zero once the job finished).
    public var executionBlockCount: Int {
        mutex.withLock { (blocks.first == nil ? 0 : 1) + blocks.more.count }
    }

    public override func execute() throws {
        // Read, not taken out: the job lets go of them in its hand-over (`didComplete`), as every kind does,
        // so that a `deinit` of what they captured is part of the job's finish — where waiting for the next
        // job of a serial queue, or for one that needs the job's categories, works. Released here, such a
        // `deinit` ran in the body, the job's slot and categories still held, and waited for ever.
        let blocks = mutex.withLock { self.blocks }
        guard let first = blocks.first else { return }
        if blocks.more.isEmpty { return try first() }
        try Self.runConcurrently([first] + blocks.more)
    }

    override func didComplete(outcome: JobOutcome, executed: Bool, extras: JobExtras?) -> [(Job, JobOutcome)] {
        let blocks = mutex.withLock {
            defer { self.blocks = Blocks() }
            return self.blocks
        }
        _ = blocks  // released outside the lock
        return []
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

}
