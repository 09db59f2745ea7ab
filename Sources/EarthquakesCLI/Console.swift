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
    private let out: @Sendable (String) -> Void
    private let err: @Sendable (String) -> Void

    /// A console made of closures that receive text (each call is a complete piece, with its newlines).
    public init(
        isErrorTerminal: Bool, out: @escaping @Sendable (String) -> Void, err: @escaping @Sendable (String) -> Void
    ) {
        self.isErrorTerminal = isErrorTerminal
        self.out = out
        self.err = err
    }

    /// The process's standard output and error; progress only if standard error is a terminal.
    public static var standard: Console {
        Console(
            isErrorTerminal: isatty(STDERR_FILENO) == 1,
            out: { text in FileHandle.standardOutput.write(Data(text.utf8)) },
            err: { text in FileHandle.standardError.write(Data(text.utf8)) }
        )
    }

    /// Writes a line to standard output.
    public func print(_ line: String) { out(line + "\n") }

    /// Writes raw text to standard error.
    public func error(_ text: String) { err(text) }
}
