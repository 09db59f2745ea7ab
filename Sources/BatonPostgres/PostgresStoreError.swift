/// What went wrong in a ``PostgresJobStore``, said so that the fix is clear.
public struct PostgresStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Code: Sendable, Equatable {
        case badConfiguration
        case newerSchema(found: Int, supported: Int)
        case foreignSchema
        case closed
        case notRunning
        case noStore
        case olderSchema
    }
    let code: Code
    /// A sentence naming the problem and how to fix it.
    public let message: String

    public var description: String { message }

    /// True when the schema holds no store and the configuration said not to create one
    /// (``PostgresStoreConfiguration/createsStore``).
    public var isNoStore: Bool { code == .noStore }

    /// True when the database was migrated by a newer BatonPostgres than this one.
    public var isNewerSchema: Bool {
        if case .newerSchema = code { return true }
        return false
    }

    static func badConfiguration(_ message: String) -> Self { .init(code: .badConfiguration, message: message) }

    static func newerSchema(found: Int, supported: Int, schema: String) -> Self {
        .init(
            code: .newerSchema(found: found, supported: supported),
            message: "the tables in PostgreSQL schema '\(schema)' are at version \(found), newer than this "
                + "BatonPostgres understands (\(supported)); upgrade this program to the version that wrote them, "
                + "or point it at another schema")
    }

    static func foreignSchema(_ schema: String, table: String) -> Self {
        .init(
            code: .foreignSchema,
            message: "PostgreSQL schema '\(schema)' has a table '\(table)' that BatonPostgres did not create; "
                + "use another schema name (PostgresStoreConfiguration.schema) or drop that table")
    }

    static func noStore(_ schema: String, database: String) -> Self {
        .init(
            code: .noStore,
            message: "there is no Baton job store in PostgreSQL schema '\(schema)' of database '\(database)' (it was "
                + "not created: this opening only reads); check the address and the schema, or start a worker to create it"
        )
    }

    static func olderSchema(found: Int, schema: String) -> Self {
        .init(
            code: .olderSchema,
            message: "the store in PostgreSQL schema '\(schema)' is at version \(found), older than this program's "
                + "\(PostgresSchema.current), and this opening only reads: it was not upgraded. Upgrade the workers (stop "
                + "the older ones, start one of this version: it upgrades the store), or use a program of the store's version"
        )
    }

    static let closed = Self(code: .closed, message: "the store was closed; create a new PostgresJobStore")

    static let notRunning = Self(
        code: .notRunning,
        message:
            "the PostgresJobStore is not running: call it inside withPostgresJobStore(configuration:) { store in … }, or run it (store.run()) in a ServiceGroup before the services that use it"
    )
}
