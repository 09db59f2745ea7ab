import Baton
import Dispatch
import EarthquakesKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Ctrl-C (SIGINT) turned into a cancellation of the work that is running.
///
/// The executable calls ``installForSIGINT()`` once; a command wraps its cancellable part in
/// ``cancellable(onInterrupt:onSecondInterrupt:_:)``. A first Ctrl-C during that part calls `onInterrupt`
/// (which cancels the jobs; they delete their temporary files), and the command then reports
/// ``CLIError/cancelled``. A second one calls `onSecondInterrupt`, which says what became of the work and
/// ends the process with status 130; without it, and outside such a part, a Ctrl-C ends the process at
/// once with status 130.
///
/// ## Thread safety
/// `Sendable`: the current handler and the count are kept in a ``Protected`` box; the handler is
/// called after the lock is released.
public final class Interrupts: Sendable {
    private struct State {
        var handler: (@Sendable () -> Void)?
        var secondHandler: (@Sendable () -> Void)?
        var received = 0
    }

    private let state = Protected(State())
    // Kept only so the source lives as long as this object; set once in init, never touched again.
    nonisolated(unsafe) private let source: (any DispatchSourceRead)?

    /// An instance that no signal reaches (for tests and library use): ``interrupt()`` drives it.
    public init() {
        source = nil
    }

    private init(signal number: Int32) {
        // A signal handler that writes one byte to a pipe, read by a dispatch source. (A dispatch signal
        // source with the signal ignored loses signals on Linux when a thread that does not block the
        // signal takes it first, which is likely in a process with many threads.)
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else {
            source = nil
            return
        }
        interruptPipeWriteEnd = ends[1]
        let source = DispatchSource.makeReadSource(fileDescriptor: ends[0], queue: .global())
        self.source = source
        source.setEventHandler { [weak self] in
            var bytes = [UInt8](repeating: 0, count: 16)
            let count = read(ends[0], &bytes, bytes.count)
            for _ in 0..<max(0, count) { self?.interrupt() }
        }
        source.resume()
        signal(number, interruptSignalHandler)
    }

    /// Takes over SIGINT for the life of the process.
    public static func installForSIGINT() -> Interrupts {
        Interrupts(signal: SIGINT)
    }

    /// What a Ctrl-C does: cancels the running part, or exits with 130 when there is none; a second one
    /// calls the part's `onSecondInterrupt` (which ends the process), or exits with 130.
    public func interrupt() {
        let handler = state.withLock { state -> (@Sendable () -> Void)? in
            state.received += 1
            if state.received == 1 { return state.handler }
            return state.received == 2 ? state.secondHandler : nil
        }
        guard let handler else {
            exit(130)
        }
        handler()
        TestPause.say("interrupted")
    }

    /// Whether a Ctrl-C has arrived.
    public var wasInterrupted: Bool { state.withLock { $0.received > 0 } }

    /// Runs `body`; a Ctrl-C while it runs calls `onInterrupt` (once) instead of ending the process.
    ///
    /// - Parameter onSecondInterrupt: What a second Ctrl-C does: it must end the process (with status 130,
    ///   after saying what became of the work). Without it, a second Ctrl-C ends the process at once.
    public func cancellable<T>(
        onInterrupt: @escaping @Sendable () -> Void, onSecondInterrupt: (@Sendable () -> Void)? = nil,
        _ body: () async throws -> T
    ) async rethrows -> T {
        let alreadyInterrupted = state.withLock { state -> Bool in
            state.handler = onInterrupt
            state.secondHandler = onSecondInterrupt
            return state.received > 0
        }
        if alreadyInterrupted { onInterrupt() }
        defer {
            state.withLock { state in
                state.handler = nil
                state.secondHandler = nil
            }
        }
        return try await body()
    }
}

/// Where the signal handler writes; set once, before the handler is installed.
nonisolated(unsafe) private var interruptPipeWriteEnd: Int32 = -1

/// Async-signal-safe: only `write(2)`.
private func interruptSignalHandler(_ signal: Int32) {
    var byte: UInt8 = 1
    _ = write(interruptPipeWriteEnd, &byte, 1)
}
