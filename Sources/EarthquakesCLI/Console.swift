import BatonObservability
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the tool writes: results to standard output, messages and progress to standard error.
///
/// Tests make one that records what was written (``init(isErrorTerminal:out:err:)``).
///
/// ## Thread safety
/// A `Sendable` value; the closures may be called from any thread.
public struct Console: Sendable {
    /// Whether standard error is a terminal: progress is shown only then.
    public var isErrorTerminal: Bool
    /// Whether standard output is a terminal: magnitudes are coloured only then (and without `NO_COLOR`).
    public var isOutputTerminal: Bool
    /// The width of the terminal standard output shows on, in columns; `nil` when it is no terminal (the
    /// `COLUMNS` environment variable is then used, if set). The `list` table fits it.
    public var terminalColumns: Int?
    private let out: @Sendable (String) -> Void
    private let outBytes: @Sendable ([UInt8]) -> Void
    private let err: @Sendable (String) -> Void

    /// A console made of closures that receive text (each call is a complete piece, with its newlines).
    public init(
        isErrorTerminal: Bool, isOutputTerminal: Bool = false, out: @escaping @Sendable (String) -> Void,
        err: @escaping @Sendable (String) -> Void
    ) {
        self.isErrorTerminal = isErrorTerminal
        self.isOutputTerminal = isOutputTerminal
        self.out = out
        self.outBytes = { bytes in out(String(decoding: bytes, as: UTF8.self)) }
        self.err = err
    }

    private init(
        isErrorTerminal: Bool, isOutputTerminal: Bool, out: @escaping @Sendable (String) -> Void,
        outBytes: @escaping @Sendable ([UInt8]) -> Void, err: @escaping @Sendable (String) -> Void
    ) {
        self.isErrorTerminal = isErrorTerminal
        self.isOutputTerminal = isOutputTerminal
        self.out = out
        self.outBytes = outBytes
        self.err = err
    }

    /// The process's standard output and error; progress only if standard error is a terminal.
    public static var standard: Console {
        var console = Console(
            isErrorTerminal: isatty(STDERR_FILENO) == 1,
            isOutputTerminal: isatty(STDOUT_FILENO) == 1,
            out: { text in writeToStandardOutput(Array(text.utf8)) },
            outBytes: { bytes in writeToStandardOutput(bytes) },
            err: { text in _ = OutputFile.writeAll(Array(text.utf8), to: STDERR_FILENO) }
        )
        console.terminalColumns = console.isOutputTerminal ? outputTerminalColumns() : nil
        return console
    }

    /// Writes a line to standard output.
    public func print(_ line: String) { out(line + "\n") }

    /// Writes UTF-8 bytes to standard output.
    public func write(_ bytes: [UInt8]) { outBytes(bytes) }

    /// Writes raw text to standard error.
    public func error(_ text: String) { err(text) }
}

/// The width of the terminal of standard output, from the terminal itself (`TIOCGWINSZ`); `nil` when it
/// does not say.
private func outputTerminalColumns() -> Int? {
    var size = winsize()
    guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
    return Int(size.ws_col)
}

/// Writes all of `bytes` to standard output. Output that could not be written must not look written:
/// at a closed pipe (`| head` with SIGPIPE ignored) the tool ends quietly with status 141, as SIGPIPE
/// would have ended it; on any other failure (a full disk, an I/O error) it says so on standard error
/// and exits with 1.
private func writeToStandardOutput(_ bytes: [UInt8]) {
    guard let failure = OutputFile.writeAll(bytes, to: STDOUT_FILENO) else { return }
    if failure == EPIPE { exit(141) }
    let reason = String(cString: strerror(failure))
    _ = OutputFile.writeAll(
        Array("earthquakes: could not write to standard output: \(reason). What was not written is lost.\n".utf8),
        to: STDERR_FILENO)
    exit(1)
}
