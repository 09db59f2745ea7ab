import Baton

/// A test step took longer than its deadline; ``description`` says what hung.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public let description: String
}

/// Runs `body` and returns when it finishes, or throws ``DeadlineExceeded`` once `limit` passed —
/// whether or not `body` ever returns. The error names `what` and carries `report()` (for example a
/// queue's `JobQueue.diagnose()`), read at the moment the deadline fired.
///
/// Unlike a task group (which waits for every child before it returns), a body that ignores
/// cancellation cannot keep this waiting: a hang fails the test within `limit`, naming what hung. The
/// body is cancelled and left to finish (or not) on its own.
///
/// ```swift
/// try await withDeadline(.seconds(30), "the random graph drains", report: { queue.diagnose().description }) {
///     await queue.waitUntilAllJobsAreFinished()
/// }
/// ```
public func withDeadline(
    _ limit: Duration, _ what: String, report: @escaping @Sendable () -> String = { "" },
    _ body: @escaping @Sendable () async throws -> Void
) async throws {
    let outcome = OneShot<Result<Void, any Error>?>()
    let work = Task {
        do {
            try await body()
            outcome.resume(.success(()))
        } catch {
            outcome.resume(.failure(error))
        }
    }
    let timer = Task {
        try? await Task.sleep(for: limit)  // the deadline itself, not a wait for the work
        outcome.resume(nil)
    }
    let result = await outcome.value
    timer.cancel()
    guard let result else {
        work.cancel()
        let details = report()
        throw DeadlineExceeded(
            description: "deadline of \(limit) exceeded: \(what) did not finish."
                + (details.isEmpty ? "" : "\n\(details)"))
    }
    try result.get()
}

/// Waits until `predicate` holds, checking every millisecond, for at most `limit`. Returns whether it
/// held. For state that no gate or continuation can announce (a test of internals); prefer a ``Gate``.
public func eventually(within limit: Duration = .seconds(10), _ predicate: @Sendable () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now.advanced(by: limit)
    while !predicate() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))  // polling interval: the predicate decides
    }
    return true
}

/// A value set once, awaited by one task.
final class OneShot<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `value` and `continuation` are guarded by `lock`.
    private let lock = Lock()
    private var result: Value?
    private var done = false
    private var continuation: CheckedContinuation<Value, Never>?

    /// Sets the value (the first call wins) and wakes the waiter.
    func resume(_ value: Value) {
        let waiter: CheckedContinuation<Value, Never>? = lock.withLock {
            guard !done else { return nil }
            done = true
            result = value
            defer { continuation = nil }
            return continuation
        }
        waiter?.resume(returning: value)
    }

    var value: Value {
        get async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value, Never>) in
                let ready: Value? = lock.withLock {
                    if done { return result }
                    self.continuation = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
