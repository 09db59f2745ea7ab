import Dispatch
public import Testing

/// Runs each test of a suite (or one test) on a serial Dispatch queue of its own instead of Swift
/// concurrency's cooperative pool.
///
/// On Linux that pool has one thread per core and is also Dispatch's global queue, so a test that
/// computes for seconds without suspending (parsing a large feed, building a graph of 100,000 jobs)
/// holds one of its two threads on a 2-core machine for that long; two such tests at once stall every
/// other test's tasks, and their deadlines fire. Tests on this trait's queue leave the pool to the
/// others. Their child tasks run on the same queue, one at a time: use it for tests that compute, not
/// for tests whose tasks wait for each other.
///
/// ```swift
/// @Suite(.offThePool) struct ParserTests { … }
/// ```
public struct OffThePoolTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard testCase != nil else { return try await function() }  // a suite's own scope
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *) {
            try await withTaskExecutorPreference(DispatchQueueExecutor(label: "test \(test.name)")) {
                try await function()
            }
        } else {
            try await function()
        }
    }
}

extension Trait where Self == OffThePoolTrait {
    /// Runs the test, or each test of the suite, off Swift concurrency's pool (``OffThePoolTrait``).
    public static var offThePool: Self { OffThePoolTrait() }
}

/// A task executor that runs its jobs one at a time on a serial Dispatch queue of its own.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, *)
final class DispatchQueueExecutor: TaskExecutor {
    private let queue: DispatchQueue

    init(label: String) { queue = DispatchQueue(label: label) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
