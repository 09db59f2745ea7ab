import Baton

/// A wake-up flag one task waits on and any thread raises: a raise while nobody waits is kept (once)
/// for the next wait. Continuations are resumed after the lock is released.
///
/// ## Thread safety
/// `raise()` from any thread; `wait(timeout:)` from one task at a time.
final class WakeSignal: Sendable {
    private struct State {
        var raised = false
        var waiter: CheckedContinuation<Void, Never>?
        var generation: UInt64 = 0
    }
    private let state = Protected(State())

    /// Wakes the waiter, or the next one.
    func raise() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter.take() else {
                state.raised = true
                return nil
            }
            state.generation += 1  // the wait's timer, if it fires later, does nothing
            return waiter
        }
        waiter?.resume()
    }

    /// Returns when raised, after `timeout`, or when the task is cancelled.
    /// Waits for a raise, or for the task's cancellation, with no timer: no task is created, so a
    /// loop woken once per job (the report loop) costs one wake-up per job, not three.
    func wait() async {
        await wait(timeout: nil)
    }

    func wait(timeout: Duration) async {
        await wait(timeout: Optional(timeout))
    }

    private func wait(timeout: Duration?) async {
        let generation = state.withLock { state -> UInt64? in
            if state.raised {
                state.raised = false
                return nil
            }
            state.generation += 1
            return state.generation
        }
        guard let generation else { return }
        let timer = timeout.map { timeout in
            Task { [weak self] in
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                self?.fire(generation)
            }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.raised || state.generation != generation {
                        state.raised = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            self.fire(generation)
        }
        timer?.cancel()
    }

    /// Ends the wait of `generation` (a timer or a cancellation), if it is still the current one.
    private func fire(_ generation: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.generation == generation else { return nil }
            state.generation += 1  // a later fire of this generation does nothing
            if let waiter = state.waiter.take() { return waiter }
            state.raised = true  // the wait has not stored its continuation yet: let it return at once
            return nil
        }
        waiter?.resume()
    }
}

extension Optional {
    /// Returns the value and leaves `nil`.
    mutating func take() -> Wrapped? {
        defer { self = nil }
        return self
    }
}
