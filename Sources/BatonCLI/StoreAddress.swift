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
            // The store's own rule (`PostgresStoreConfiguration`), checked here so that a mistyped name is a
            // command-line mistake (status 64) like an empty one, not a store failure (1).
            let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789_")
            guard schema.count <= 48, schema.allSatisfy(allowed.contains), !schema.first!.isNumber else {
                throw .usage(
                    "--schema: '\(schema)' is not a schema name this store uses: 1 to 48 lowercase letters, digits or '_', not starting with a digit"
                )
            }
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

    /// Whether writing the file at `path` would overwrite this SQLite store's database or one of its
    /// side files (`-wal`, `-shm`, `-journal`), by any name (a link, `..`): `baton timeline 2 -o
    /// jobs.sqlite` replaced the store with the page, and the next command found it damaged.
    public func isOverwritten(by path: String) -> Bool {
        guard case .sqlite(let store) = self else { return false }
        func canonical(_ path: String) -> String {
            let url = URL(fileURLWithPath: path)
            // A file not made yet: its folder's links resolved, and its own name.
            let resolved =
                FileManager.default.fileExists(atPath: path)
                ? url.resolvingSymlinksInPath()
                : url.deletingLastPathComponent().resolvingSymlinksInPath().appendingPathComponent(
                    url.lastPathComponent)
            return resolved.standardizedFileURL.path
        }
        let target = canonical(path)
        var written = stat()
        let exists = stat(path, &written) == 0
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let file = store + suffix
            if canonical(file) == target { return true }
            var kept = stat()
            if exists, stat(file, &kept) == 0, kept.st_dev == written.st_dev, kept.st_ino == written.st_ino {
                return true
            }
        }
        return false
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
