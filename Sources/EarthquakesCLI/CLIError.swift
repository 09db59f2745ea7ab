/// An error of the tool itself, with the one line to show.
///
/// A usage error (``isUsage``) is a mistake in the command line: the tool shows the command's usage
/// after it and exits with 64 (`EX_USAGE`). ``cancelled`` (Ctrl-C) exits with 130; other errors with 1.
///
/// ## Thread safety
/// A `Sendable` value.
public struct CLIError: Error, Sendable, CustomStringConvertible, Equatable {
    /// One line, without the program name.
    public let message: String
    /// Whether the command line is at fault (a bad option value), rather than the data or the system.
    public let isUsage: Bool
    /// Whether the user interrupted the command (Ctrl-C).
    public let isCancellation: Bool
    /// Lines shown under the message, one item each (the feeds that failed, say), so that the message stays
    /// one line however many there are.
    public let details: [String]

    public init(_ message: String, isUsage: Bool = false, details: [String] = []) {
        self.message = message
        self.isUsage = isUsage
        self.isCancellation = false
        self.details = details
    }

    private init(cancelled message: String) {
        self.message = message
        self.isUsage = false
        self.isCancellation = true
        self.details = []
    }

    /// A mistake in the command line.
    public static func usage(_ message: String) -> CLIError { CLIError(message, isUsage: true) }

    /// Ctrl-C stopped a refresh before its import committed.
    public static let cancelled = CLIError(cancelled: "Cancelled; the database was not changed.")

    /// Ctrl-C stopped a refresh before anything was imported; `unchanged` says what the database holds
    /// (``EarthquakesCLI/nothingImported(createdEmpty:database:)``), `more` what to do next.
    public static func cancelled(_ unchanged: String, more: String = "") -> CLIError {
        CLIError(cancelled: "Cancelled. " + unchanged + (more.isEmpty ? "" : " " + more))
    }

    /// Ctrl-C stopped a refresh of several feeds: the feeds already imported are kept.
    public static let cancelledKeepingImports = CLIError(
        cancelled:
            "Cancelled; the feeds imported so far are kept. `earthquakes refresh --resume` finishes the rest.")

    /// A long-running command that Ctrl-C stopped as it should (status 130), saying so in `message`.
    public static func stopped(_ message: String) -> CLIError { CLIError(cancelled: message) }

    /// The process's exit status for this error: 64 for usage errors, 130 for Ctrl-C, else 1.
    public var exitStatus: Int32 { isUsage ? 64 : isCancellation ? 130 : 1 }

    public var description: String { ([message] + details.map { "  " + $0 }).joined(separator: "\n") }
}
