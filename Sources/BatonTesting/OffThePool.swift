import Baton
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

/// Lets at most `limit` callers at a time into ``run(_:)``; the others wait without holding a thread.
///
/// For tests that start child processes: each process needs a core, so starting one per test at once
/// on a small machine makes all of them slow enough to miss their time limits.
public final class AsyncLimit: @unchecked Sendable {
    // @unchecked Sendable: `available` and `waiters` are guarded by `lock`.
    private let lock = Lock()
    private var available: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// - Parameter limit: How many callers may be inside ``run(_:)`` at once (at least 1).
    public init(_ limit: Int) {
        available = max(1, limit)
    }

    /// Waits for a place, runs `body`, then gives the place to the next waiter.
    public func run<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = lock.withLock { () -> Bool in
                if available > 0 {
                    available -= 1
                    return true
                }
                waiters.append(continuation)
                return false
            }
            if admitted { continuation.resume() }
        }
    }

    private func release() {
        let next = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            if waiters.isEmpty {
                available += 1
                return nil
            }
            return waiters.removeFirst()
        }
        next?.resume()  // the place passes straight to it
    }
}
