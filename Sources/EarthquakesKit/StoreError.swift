import GRDB

/// Why an ``EarthquakeStore`` operation failed: which database, what the store was doing, and
/// what SQLite or the file system said.
///
/// ```
/// could not import 40 earthquakes into the database at /tmp/quakes.sqlite: row 3 (id "x")
/// was refused: SQLite error 19: CHECK constraint failed: latitude BETWEEN -90 AND 90.
/// Nothing was changed: the import was rolled back.
/// ```
///
/// ### Thread safety
/// A value type and `Sendable`.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the store was doing. New kinds may be added; do not switch over it exhaustively.
    public let code: Code
    /// The database file, or `nil` for an in-memory database.
    public let path: String?
    /// The underlying SQLite or system message in full (with the SQL statement), for logs.
    public let underlying: String
    /// A sentence a person can act on.
    public let description: String

    /// - Parameter operation: what failed, ending with its preposition, such as
    ///   `"import 3 earthquakes into"`; the database's location follows it.
    init(_ code: Code, path: String?, doing operation: String, error: any Error, advice: String = "") {
        self.code = code
        self.path = path
        self.underlying = String(describing: error)
        let location = path.map { "the database at \($0)" } ?? "the in-memory database"
        let sentence = "could not \(operation) \(location): \(Self.shortMessage(for: error))"
        self.description = advice.isEmpty ? sentence : "\(sentence). \(advice)"
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

    /// The most useful text for a person: SQLite's code and message without the SQL.
    static func shortMessage(for error: any Error) -> String {
        switch error {
        case let failure as RowFailure:
            "row \(failure.index) (id \"\(failure.id)\") was refused: \(shortMessage(for: failure.underlying))"
        case let error as DatabaseError:
            "SQLite error \(error.resultCode.rawValue): \(error.message ?? "\(error.resultCode)")"
        default:
            String(describing: error)
        }
    }
}

/// A row the database refused during an import, to name it in the ``StoreError``.
struct RowFailure: Error, CustomStringConvertible {
    var index: Int
    var id: String
    var underlying: any Error

    var description: String { "row \(index) (id \"\(id)\") was refused: \(underlying)" }
}
