import Baton
public import Foundation

/// Waits for a child process to exit without keeping a core busy.
///
/// Foundation's `Process.waitUntilExit()` on Linux runs the calling thread's run loop in 50 ms slices
/// until the child has exited. On a thread whose run loop has no sources — every thread but the main
/// one — each slice returns at once, so the wait spins for as long as the child runs: `sleep 2` waited
/// for on a Dispatch thread costs 2.0 s of CPU. On a two-core machine, that took a core from the very
/// processes a test or a benchmark waited for. This waits on the process's termination handler instead.
///
/// Make it before `run()`, which must not have been called: the handler has to be in place before the
/// child can exit. If `run()` throws, no child exists and nothing ends a wait: don't wait then.
///
/// ```swift
/// let process = Process()
/// process.executableURL = URL(fileURLWithPath: "/bin/true")
/// let exit = ProcessExit(process)
/// try process.run()
/// let status = await exit.status()
/// ```
public final class ProcessExit: Sendable {
    /// Someone waiting for the exit: a task, or a blocked thread.
    private enum Waiter {
        case task(CheckedContinuation<Int32, Never>)
        case thread(DispatchSemaphore)
    }

    private enum State {
        case running([Waiter])
        case exited(Int32)
    }

    private let state = Protected<State>(.running([]))

    /// Installs the termination handler on `process` (replacing any other).
    public init(_ process: Process) {
        precondition(process.processIdentifier == 0, "ProcessExit must be made before the process is run")
        process.terminationHandler = { [state] process in
            let status = process.terminationStatus
            let waiters = state.withLock { state -> [Waiter] in
                guard case .running(let waiters) = state else { return [] }
                state = .exited(status)
                return waiters
            }
            for waiter in waiters {
                switch waiter {
                case .task(let continuation): continuation.resume(returning: status)
                case .thread(let semaphore): semaphore.signal()
                }
            }
        }
    }

    /// The exit status if the process has exited; otherwise `waiter` is added, to be woken at the exit.
    private func statusOrWait(_ waiter: Waiter) -> Int32? {
        state.withLock { state in
            switch state {
            case .exited(let status): return status
            case .running(let waiters):
                state = .running(waiters + [waiter])
                return nil
            }
        }
    }

    /// The exit status, once the process has exited (a signal's number if a signal ended it).
    public func status() async -> Int32 {
        await withCheckedContinuation { continuation in
            if let status = statusOrWait(.task(continuation)) { continuation.resume(returning: status) }
        }
    }

    /// The exit status, blocking the calling thread until the process has exited (for synchronous code;
    /// from async code, ``status()``).
    public func wait() -> Int32 {
        let semaphore = DispatchSemaphore(value: 0)
        if let status = statusOrWait(.thread(semaphore)) { return status }
        semaphore.wait()
        guard case .exited(let status) = state.current else { preconditionFailure("woken before the exit") }
        return status
    }

    /// Whether the process has exited.
    public var hasExited: Bool {
        if case .exited = state.current { return true }
        return false
    }
}
