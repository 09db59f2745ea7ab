/// A category of mutually exclusive work: at most ``limit`` jobs that hold it execute at once, across
/// all queues that share an ``ExclusivityScope``.
///
/// Categories are named by a string (`"database-import"`), or by a type with ``MutuallyExclusive``
/// (`MutuallyExclusive<Alert>()`, as in the WWDC sample). A ``limit`` above 1 makes a *counted*
/// category: "at most 2 downloads across all queues".
///
/// Categories with the same key are the same category. If jobs ask for one key with different limits,
/// the smallest limit asked for so far applies.
public struct ExclusivityCategory: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The category's identity.
    public let key: String
    /// How many jobs may hold it at once (1: mutual exclusion).
    public let limit: Int

    /// - Precondition: `limit >= 1`.
    public init(_ key: String, limit: Int = 1) {
        if limit < 1 { fatalError("Baton: exclusivity category '\(key)' needs a limit of at least 1, not \(limit).") }
        self.key = key
        self.limit = limit
    }

    public init(stringLiteral key: String) {
        self.init(key)
    }

    /// The category named after a type.
    public static func type<T>(_ type: T.Type, limit: Int = 1) -> ExclusivityCategory {
        ExclusivityCategory(String(reflecting: type), limit: limit)
    }

    public var description: String { limit == 1 ? key : "\(key) (at most \(limit))" }
}
