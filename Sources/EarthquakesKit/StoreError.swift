/// Why an ``EarthquakeStore`` operation failed: which database, what the store was doing, and
/// what SQLite or the file system said.
///
/// ```
/// could not import 40 earthquakes into the database at /tmp/quakes.sqlite: row 3 (id "x")
/// was refused: CHECK constraint failed: latitude BETWEEN -90 AND 90. Nothing was changed.
/// ```
///
/// ### Thread safety
/// A value type and `Sendable`.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the store was doing. New kinds may be added; do not switch over it exhaustively.
    public let code: Code
    /// The database file, or `nil` for an in-memory database.
    public let path: String?
    /// The underlying SQLite or system message, for logs.
    public let underlying: String
    /// A sentence a person can act on.
    public let description: String

    init(_ code: Code, path: String?, doing operation: String, underlying: String, advice: String) {
        self.code = code
        self.path = path
        self.underlying = underlying
        let location = path.map { "the database at \($0)" } ?? "the in-memory database"
        let sentence = "could not \(operation) \(code == .open ? "" : "in ")\(location): \(underlying)"
        self.description = advice.isEmpty ? sentence : "\(sentence). \(advice)"
    }

    /// Builds an error from anything a database call threw.
    init(_ code: Code, path: String?, doing operation: String, error: any Error, advice: String = "") {
        self.init(code, path: path, doing: operation, underlying: Self.message(for: error), advice: advice)
    }

    /// The step that failed.
    ///
    /// ### Thread safety
    /// A value type and `Sendable`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Hashable, Sendable { case open, migrate, write, read }
        private let kind: Kind
        private init(_ kind: Kind) { self.kind = kind }

        /// Opening or creating the database file failed.
        public static let open = Code(.open)
        /// Creating or upgrading the schema failed.
        public static let migrate = Code(.migrate)
        /// An import failed; the transaction was rolled back and nothing changed.
        public static let write = Code(.write)
        /// A query failed.
        public static let read = Code(.read)

        public var description: String { kind.rawValue }
    }

    /// The most useful text for an error: SQLite's message and code for database errors.
    static func message(for error: any Error) -> String {
        if let failure = error as? RowFailure { return failure.description }
        return String(describing: error)
    }
}

/// A row the database refused during an import, to name it in the ``StoreError``.
struct RowFailure: Error, CustomStringConvertible {
    var index: Int
    var id: String
    var underlying: any Error

    var description: String {
        "row \(index) (id \"\(id)\") was refused: \(underlying)"
    }
}
