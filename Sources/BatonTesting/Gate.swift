import Baton
import Dispatch

/// A one-shot latch for tests: closed until ``open()``, then open for ever.
///
/// Waiters block (``wait()``) or suspend (``waitAsync()``) until it opens, so tests can hold a job's
/// body at a chosen point and release it deterministically instead of sleeping.
///
/// ## Thread safety
/// All methods may be called from any thread.
public final class Gate: @unchecked Sendable {
    // @unchecked Sendable: `isOpen`, `continuations` and `semaphores` are guarded by `lock`.
    private let lock = Lock()
    private var isOpenValue = false
    private var continuations: [CheckedContinuation<Void, Never>] = []
    private var semaphores: [DispatchSemaphore] = []

    public init() {}

    /// Whether the gate is open.
    public var isOpen: Bool { lock.withLock { isOpenValue } }

    /// Opens the gate and releases every waiter. Opening twice does nothing.
    public func open() {
        let (continuations, semaphores) = lock.withLock {
            () -> ([CheckedContinuation<Void, Never>], [DispatchSemaphore]) in
            guard !isOpenValue else { return ([], []) }
            isOpenValue = true
            defer {
                self.continuations = []
                self.semaphores = []
            }
            return (self.continuations, self.semaphores)
        }
        continuations.forEach { $0.resume() }
        semaphores.forEach { $0.signal() }
    }

    /// Blocks the calling thread until the gate opens.
    @available(*, noasync, message: "Use 'await gate.waitAsync()' instead")
    public func wait() {
        let semaphore = DispatchSemaphore(value: 0)
        let open = lock.withLock {
            if isOpenValue { return true }
            semaphores.append(semaphore)
            return false
        }
        if !open { semaphore.wait() }
    }

    /// Blocks until the gate opens or `seconds` pass; returns whether it opened. For watchdogs in
    /// tests that must fail rather than hang.
    @available(*, noasync)
    public func wait(timeoutSeconds seconds: Double) -> Bool {
        let semaphore = DispatchSemaphore(value: 0)
        let open = lock.withLock {
            if isOpenValue { return true }
            semaphores.append(semaphore)
            return false
        }
        if open { return true }
        return semaphore.wait(timeout: .now() + seconds) == .success || isOpen
    }

    /// Suspends until the gate opens.
    public func waitAsync() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = lock.withLock {
                if isOpenValue { return true }
                continuations.append(continuation)
                return false
            }
            if open { continuation.resume() }
        }
    }
}
