import Foundation

/// Where a `baton` command finds the job store: `--store`, else `$BATON_STORE`.
///
/// - `sqlite:PATH` (or a path ending in `.sqlite`, `.sqlite3` or `.db`): a ``BatonDurable/SQLiteJobStore`` file.
/// - `postgres://user[:password]@host[:port]/database[?…]` (or `postgresql://`): a `PostgresJobStore`, in
///   the schema given by `--schema` (default `baton`).
///
/// ## Thread safety
/// A `Sendable` value.
public enum StoreAddress: Equatable, Sendable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(url: String, schema: String)

    /// The environment variable read when `--store` is not given.
    public static let environmentVariable = "BATON_STORE"

    /// The address of `--store` (or, without it, of `$BATON_STORE`).
    ///
    /// - Throws: A usage ``BatonCLIError`` when neither is given, or the text is neither form.
    public static func resolve(
        option: String?, schema: String?, environment: [String: String]
    ) throws(BatonCLIError) -> StoreAddress {
        let from = option != nil ? "--store" : "$\(environmentVariable)"
        guard let text = option ?? environment[environmentVariable].flatMap({ $0.isEmpty ? nil : $0 }) else {
            throw .usage(
                "which job store? Give --store sqlite:PATH or --store postgres://user@host/database, or set "
                    + "\(environmentVariable) to one of them")
        }
        return try parse(text, schema: schema, from: from)
    }

    /// Reads one address; `from` names where it came from, for the message.
    public static func parse(
        _ text: String, schema: String?, from: String = "--store"
    ) throws(BatonCLIError)
        -> StoreAddress
    {
        let lowered = text.lowercased()
        if lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://") {
            let schema = schema ?? "baton"
            guard !schema.isEmpty else { throw .usage("--schema: give the name of a PostgreSQL schema") }
            return .postgres(url: text, schema: schema)
        }
        if schema != nil {
            throw .usage("--schema is for a PostgreSQL store; \(from) names a SQLite file")
        }
        if lowered.hasPrefix("sqlite:") {
            var path = String(text.dropFirst("sqlite:".count))
            if path.hasPrefix("//") { path.removeFirst(2) }  // sqlite:///var/db/x → /var/db/x
            guard !path.isEmpty else {
                throw .usage("\(from) \(text): give the file, as in sqlite:/var/lib/app/jobs.sqlite")
            }
            return .sqlite(path: path)
        }
        if [".sqlite", ".sqlite3", ".db"].contains(where: { lowered.hasSuffix($0) }) { return .sqlite(path: text) }
        throw .usage(
            "\(from) '\(text)' is not a job store address; write sqlite:PATH or postgres://user@host/database")
    }

    /// The address for messages (a PostgreSQL password is not shown).
    public var description: String {
        switch self {
        case .sqlite(let path): return "sqlite:\(path)"
        case .postgres(let url, let schema):
            guard var components = URLComponents(string: url) else { return "a PostgreSQL store" }
            if components.password != nil { components.password = "***" }
            return (components.string ?? "a PostgreSQL store") + (schema == "baton" ? "" : " (schema \(schema))")
        }
    }
}
