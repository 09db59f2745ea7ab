import Baton

/// Broadcasts wake-ups to the streams it hands out (a store's `wakeups()`): each stream keeps at most one
/// pending wake-up, so a burst of them costs one claim. The one wake-up primitive of the durable layer.
///
/// ## Thread safety
/// All methods may be called from any thread; continuations are resumed after the lock is released.
package final class WakeupHub: Sendable {
    private struct State {
        var next: UInt64 = 0
        var continuations: [UInt64: AsyncStream<Void>.Continuation] = [:]
        var finished = false
    }
    private let state = Protected(State())

    package init() {}

    /// A new stream of wake-ups; it ends when its reader stops iterating, or at ``finishAll()``.
    package func stream() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.next += 1
            state.continuations[state.next] = continuation
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            let removed = self?.state.withLock { $0.continuations.removeValue(forKey: id) }
            _ = removed  // released outside the lock
        }
        return stream
    }

    /// Wakes every stream.
    package func wake() {
        let continuations = state.withLock { Array($0.continuations.values) }
        for continuation in continuations { continuation.yield() }
    }

    /// Ends every stream, and those asked for later at once (the store was closed).
    package func finishAll() {
        let continuations = state.withLock { state -> [AsyncStream<Void>.Continuation] in
            state.finished = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
