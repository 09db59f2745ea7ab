import Baton
import Foundation
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

    /// An error whose cause is stated in words rather than taken from an underlying error.
    init(
        _ code: Code, path: String?, doing operation: String, reason: String, advice: String, error: (any Error)? = nil
    ) {
        self.code = code
        self.path = path
        self.underlying = error.map { String(describing: $0) } ?? reason
        let location = path.map { "the database at \($0)" } ?? "the in-memory database"
        self.description = "could not \(operation) \(location): \(reason). \(advice)"
    }

    /// An error opening the file, with the advice that fits SQLite's result code.
    static func opening(path: String, error: any Error, timeout: Duration) -> StoreError {
        if let known = classified(path: path, error: error, timeout: timeout) { return known }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return StoreError(
            .open, path: path, doing: "open", error: error,
            advice: "Check that the folder \(folder) exists and is writable."
        )
    }

    /// The errors whose cause is clear from SQLite's result code — another process holds the lock,
    /// the file is read-only, the file is not a database — worded for that cause; `nil` for others.
    static func classified(path: String?, error: any Error, timeout: Duration) -> StoreError? {
        let resultCode: ResultCode
        switch error {
        case let failure as RowFailure:
            guard let database = failure.underlying as? DatabaseError else { return nil }
            resultCode = database.resultCode
        case let database as DatabaseError:
            resultCode = database.resultCode
        default:
            return nil
        }
        switch resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            let waited = timeout > .zero ? " after waiting \(Self.seconds(timeout))" : ""
            return StoreError(
                .busy, path: path, doing: "use",
                reason: "another program (probably another refresh of this database) was still using it\(waited)",
                advice: "Try again when it has finished; nothing was changed.", error: error
            )
        case .SQLITE_READONLY:
            return StoreError(
                .readOnly, path: path, doing: "write to",
                reason: "the file or its folder is read-only",
                advice: "Make both writable or use another database file; nothing was changed.", error: error
            )
        case .SQLITE_FULL:
            return StoreError(
                .write, path: path, doing: "write to",
                reason: "the disk (or the file system holding it) is full",
                advice: "Free some space and try again; nothing was changed.", error: error
            )
        case .SQLITE_NOTADB, .SQLITE_CORRUPT:
            let what = resultCode == .SQLITE_CORRUPT ? "damaged" : "not a SQLite database"
            return StoreError(
                .notADatabase, path: path, doing: "read",
                reason: "the file is \(what) (SQLite error \(resultCode.rawValue))",
                advice:
                    "If --database (or BATON_EARTHQUAKES_DATABASE) names the wrong file, give the right one; if this is "
                    + "the tool's damaged database, move it aside and import the feed again to build a new one.",
                error: error
            )
        default:
            return nil
        }
    }

    private static func seconds(_ duration: Duration) -> String {
        let seconds = duration.seconds
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }

    /// The step that failed.
    ///
    /// ### Thread safety
    /// A value type and `Sendable`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Hashable, Sendable {
            case open, migrate, write, read, busy, readOnly, notADatabase, missing, foreign, cancelled
        }
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
        /// Another connection (usually another process importing) held the database locked for longer
        /// than the store's busy timeout.
        public static let busy = Code(.busy)
        /// The file, or the folder SQLite needs for its journal, cannot be written.
        public static let readOnly = Code(.readOnly)
        /// The file is not a SQLite database, or is damaged.
        public static let notADatabase = Code(.notADatabase)
        /// The file holds a table named `earthquake` that this program did not create: it belongs to
        /// another program and is never changed.
        public static let foreign = Code(.foreign)
        /// The file does not exist and the store was opened with ``EarthquakeStore/OpenMode/mustExist``.
        public static let missing = Code(.missing)
        /// The import was cancelled (see ``ImportCommitGate``) before it committed: it was rolled back and
        /// nothing changed.
        public static let cancelled = Code(.cancelled)

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

/// A call on a store after ``EarthquakeStore/close()``.
struct StoreClosed: Error, CustomStringConvertible {
    var description: String { "the store was closed (EarthquakeStore.close()); open the database again to use it" }
}
