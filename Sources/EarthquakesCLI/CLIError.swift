/// An error of the tool itself, with the one line to show.
///
/// ## Thread safety
/// A `Sendable` value.
public struct CLIError: Error, Sendable, CustomStringConvertible, Equatable {
    /// One line, without the program name.
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
