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
    private enum State {
        case running(waiters: [CheckedContinuation<Int32, Never>], blocked: [DispatchSemaphore])
        case exited(Int32)
    }

    private let state = Protected<State>(.running(waiters: [], blocked: []))

    /// Installs the termination handler on `process` (replacing any other).
    public init(_ process: Process) {
        precondition(process.processIdentifier == 0, "ProcessExit must be made before the process is run")
        process.terminationHandler = { [state] process in
            let status = process.terminationStatus
            let (waiters, blocked) = state.withLock {
                state -> ([CheckedContinuation<Int32, Never>], [DispatchSemaphore]) in
                guard case .running(let waiters, let blocked) = state else { return ([], []) }
                state = .exited(status)
                return (waiters, blocked)
            }
            for waiter in waiters { waiter.resume(returning: status) }
            for semaphore in blocked { semaphore.signal() }
        }
    }

    /// The exit status, once the process has exited (a signal's number if a signal ended it).
    public func status() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = state.withLock { state -> Int32? in
                switch state {
                case .exited(let status): return status
                case .running(var waiters, let blocked):
                    waiters.append(continuation)
                    state = .running(waiters: waiters, blocked: blocked)
                    return nil
                }
            }
            if let status { continuation.resume(returning: status) }
        }
    }

    /// The exit status, blocking the calling thread until the process has exited (for synchronous code;
    /// from async code, ``status()``).
    public func wait() -> Int32 {
        let semaphore = DispatchSemaphore(value: 0)
        let status = state.withLock { state -> Int32? in
            switch state {
            case .exited(let status): return status
            case .running(let waiters, var blocked):
                blocked.append(semaphore)
                state = .running(waiters: waiters, blocked: blocked)
                return nil
            }
        }
        if let status { return status }
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
