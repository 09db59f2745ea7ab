import Dispatch

/// Runs blocking work (waiting for a child process, reading a pipe to its end) on a thread of its own
/// and returns its result, so that it never occupies a thread of Swift concurrency's pool.
///
/// Use it, not `DispatchQueue.global().async`, in tests: on Linux, Swift concurrency's pool *is*
/// Dispatch's global queue, which runs one block per core and adds a thread for blocked ones only
/// about once a second. A few tests blocking its threads at once stall every other test of the run
/// (their deadlines too, since `Task.sleep` needs the same threads). A serial Dispatch queue made for
/// the call is served by Dispatch's overcommitting pool, which gives it a thread at once.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue(label: "BatonTesting.offThePool").async {
            continuation.resume(with: Result { try body() })
        }
    }
}

/// `offThePool` for work that cannot fail.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue(label: "BatonTesting.offThePool").async { continuation.resume(returning: body()) }
    }
}
