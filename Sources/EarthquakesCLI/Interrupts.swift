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

/// Ctrl-C (SIGINT) turned into a cancellation of the work that is running; so are SIGTERM (`kill`, a
/// service manager stopping the tool) and SIGHUP (its terminal closed), unless the process was started
/// with them ignored (`nohup`): they left a partial download of any size behind. The exit status is
/// 128 plus the first signal's number (130, 143, 129).
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
        /// The first signal that came (SIGINT for ``interrupt(signal:)`` called without one).
        var signal: Int32?
    }

    private let state = Protected(State())
    // Kept only so the source lives as long as this object; set once in init, never touched again.
    nonisolated(unsafe) private let source: (any DispatchSourceRead)?

    /// An instance that no signal reaches (for tests and library use): ``interrupt(signal:)`` drives it.
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
            for byte in bytes.prefix(max(0, count)) { self?.interrupt(signal: Int32(byte)) }
        }
        source.resume()
        signal(number, interruptSignalHandler)
        for other in [SIGTERM, SIGHUP] {
            // Left alone when the process was started with it ignored (`nohup` ignores SIGHUP).
            var current = sigaction()
            guard sigaction(other, nil, &current) == 0, !Self.isIgnored(current) else { continue }
            signal(other, interruptSignalHandler)
        }
    }

    private static func isIgnored(_ action: sigaction) -> Bool {
        #if canImport(Darwin)
        unsafeBitCast(action.__sigaction_u.__sa_handler, to: Int.self) == 1  // SIG_IGN
        #else
        unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self) == 1  // SIG_IGN
        #endif
    }

    /// Takes over SIGINT, SIGTERM and SIGHUP for the life of the process.
    public static func installForSIGINT() -> Interrupts {
        Interrupts(signal: SIGINT)
    }

    /// 128 plus the number of the first signal that came (130 for Ctrl-C, 143 for SIGTERM, 129 for
    /// SIGHUP): the status to exit with once it has been handled.
    public var exitStatus: Int32 { 128 + (state.withLock { $0.signal } ?? SIGINT) }

    /// What a Ctrl-C does: cancels the running part, or exits with 130 when there is none; a second one
    /// calls the part's `onSecondInterrupt` (which ends the process), or exits with 130.
    public func interrupt(signal: Int32? = nil) {
        let signal = signal ?? SIGINT
        let (handler, first) = state.withLock { state -> ((@Sendable () -> Void)?, Int32) in
            state.received += 1
            if state.signal == nil { state.signal = signal }
            let first = state.signal ?? signal
            if state.received == 1 { return (state.handler, first) }
            return (state.received == 2 ? state.secondHandler : nil, first)
        }
        guard let handler else {
            exit(128 + first)
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

/// Async-signal-safe: only `write(2)`, of the signal's number.
private func interruptSignalHandler(_ signal: Int32) {
    var byte = UInt8(truncatingIfNeeded: signal)
    _ = write(interruptPipeWriteEnd, &byte, 1)
}
