import Baton
import Dispatch

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
/// ``cancellable(onInterrupt:_:)``. A first Ctrl-C during that part calls `onInterrupt` (which cancels
/// the jobs; they delete their temporary files), and the command then reports ``CLIError/cancelled``.
/// A Ctrl-C outside such a part, or a second one, ends the process at once with status 130.
///
/// ## Thread safety
/// `Sendable`: the current handler and the count are kept in a ``Protected`` box; the handler is
/// called after the lock is released.
public final class Interrupts: Sendable {
    private struct State {
        var handler: (@Sendable () -> Void)?
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

    /// What a Ctrl-C does: cancels the running part, or exits with 130 when there is none (or on a second one).
    public func interrupt() {
        let handler = state.withLock { state -> (@Sendable () -> Void)? in
            state.received += 1
            return state.received == 1 ? state.handler : nil
        }
        guard let handler else {
            exit(130)
        }
        handler()
    }

    /// Whether a Ctrl-C has arrived.
    public var wasInterrupted: Bool { state.withLock { $0.received > 0 } }

    /// Runs `body`; a Ctrl-C while it runs calls `onInterrupt` (once) instead of ending the process.
    public func cancellable<T>(
        onInterrupt: @escaping @Sendable () -> Void, _ body: () async throws -> T
    ) async rethrows -> T {
        let alreadyInterrupted = state.withLock { state -> Bool in
            state.handler = onInterrupt
            return state.received > 0
        }
        if alreadyInterrupted { onInterrupt() }
        defer { state.withLock { $0.handler = nil } }
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
