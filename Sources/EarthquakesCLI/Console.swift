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
            out: { text in FileHandle.standardOutput.write(Data(text.utf8)) },
            outBytes: { bytes in writeToStandardOutput(bytes) },
            err: { text in FileHandle.standardError.write(Data(text.utf8)) }
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

/// Writes all of `bytes` to standard output with `write(2)`; stops quietly at a closed pipe (`| head`).
private func writeToStandardOutput(_ bytes: [UInt8]) {
    bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Void in
        guard let base = raw.baseAddress else { return }
        var offset = 0
        while offset < raw.count {
            let written = write(STDOUT_FILENO, base + offset, raw.count - offset)
            if written < 0, errno == EINTR { continue }
            if written <= 0 { break }
            offset += written
        }
    }
}
