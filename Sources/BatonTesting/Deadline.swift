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
/// body is cancelled and left to finish (or not) on its own. Cancelling the calling task (a test's
/// time limit) cancels the body and throws `CancellationError` at once.
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
    // (The two tasks do not inherit the caller's cancellation: it is passed on, and ends the wait.)
    let result = await withTaskCancellationHandler {
        await outcome.value
    } onCancel: {
        work.cancel()
        outcome.resume(.failure(CancellationError()))
    }
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

/// Like ``withDeadline(_:_:report:_:)``, for work whose speed depends on how loaded the machine is
/// (a stress test sharing two cores with a whole test suite): it fails when `progress()` has not
/// changed for `stall` — the work hung — or, as a backstop, when `limit` passed. Slow work that keeps
/// moving is not a failure; work that stops moving fails within about `stall`, naming `what` and
/// carrying `report()` read at that moment.
///
/// `progress` is sampled eight times per `stall` (or per `limit`, if shorter): any value that changes
/// whenever the work moves (the number of unfinished jobs, a counter of finishes).
///
/// ```swift
/// try await withStallDeadline(
///     stalledFor: .seconds(30), atMost: .seconds(600), "the random graph drains",
///     progress: { queue.jobCount }, report: { queue.diagnose().description }
/// ) {
///     await queue.waitUntilAllJobsAreFinished()
/// }
/// ```
public func withStallDeadline(
    stalledFor stall: Duration, atMost limit: Duration, _ what: String,
    progress: @escaping @Sendable () -> Int, report: @escaping @Sendable () -> String = { "" },
    _ body: @escaping @Sendable () async throws -> Void
) async throws {
    enum Ending: Sendable {
        case finished(Result<Void, any Error>)
        case stalled(at: Int)
        case overLimit(at: Int)
    }
    let outcome = OneShot<Ending>()
    let work = Task {
        do {
            try await body()
            outcome.resume(.finished(.success(())))
        } catch {
            outcome.resume(.finished(.failure(error)))
        }
    }
    let watchdog = Task {
        let clock = ContinuousClock()
        let start = clock.now
        var last = progress()
        var lastChange = start
        let period = min(stall, limit) / 8
        while !Task.isCancelled {
            try? await Task.sleep(for: period)  // the watchdog's sampling period, not a wait for the work
            let now = clock.now
            let value = progress()
            if value != last {
                last = value
                lastChange = now
            } else if now - lastChange >= stall {
                outcome.resume(.stalled(at: value))
                return
            }
            if now - start >= limit {
                outcome.resume(.overLimit(at: value))
                return
            }
        }
    }
    let ending = await withTaskCancellationHandler {
        await outcome.value
    } onCancel: {
        work.cancel()
        outcome.resume(.finished(.failure(CancellationError())))
    }
    watchdog.cancel()
    let failure: String
    switch ending {
    case .finished(let result):
        return try result.get()
    case .stalled(let value):
        failure = "no progress for \(stall) (progress stuck at \(value)): \(what) hung."
    case .overLimit(let value):
        failure = "deadline of \(limit) exceeded while still progressing (at \(value)): \(what) did not finish."
    }
    work.cancel()
    let details = report()
    throw DeadlineExceeded(description: failure + (details.isEmpty ? "" : "\n\(details)"))
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
