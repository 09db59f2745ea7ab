/// A failure of a `baton` command, said in one line that names what is wrong and what to do.
///
/// ## Thread safety
/// A `Sendable` value.
public struct BatonCLIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The sentence to print after `baton: ` (or after `Error: ` for a usage error).
    public let message: String
    /// A mistake in the command line: the usage is printed with it, and the exit status is 64.
    public let isUsage: Bool

    public init(_ message: String, usage: Bool = false) {
        self.message = message
        self.isUsage = usage
    }

    /// A usage error.
    public static func usage(_ message: String) -> BatonCLIError { BatonCLIError(message, usage: true) }

    /// 64 (`EX_USAGE`) for a usage error, else 1.
    public var exitStatus: Int32 { isUsage ? 64 : 1 }

    public var description: String { message }
}
