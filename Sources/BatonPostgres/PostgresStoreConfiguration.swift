import Foundation
import Logging

/// Where a ``PostgresJobStore`` keeps its tables, and how it connects.
///
/// Every table lives in one PostgreSQL schema (``schema``, `baton` by default), set as the connections'
/// `search_path`, so several stores can share one database without seeing each other.
///
/// Thread safety: a value type; share it freely.
public struct PostgresStoreConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    /// The PostgreSQL schema (namespace) holding the store's tables. Letters, digits and `_` only.
    public var schema: String
    /// The most connections the store opens for claims, completions and queries (the listener for
    /// wake-ups has one more of its own, and submissions up to half as many again, opened only when
    /// the store submits).
    public var maximumConnections: Int
    /// How long a connection attempt may take before it fails (and is retried with backoff).
    public var connectTimeout: Duration
    /// How long a call keeps retrying (with backoff from 50 ms to 2 s) while the server cannot be
    /// reached — a restart, a failover, a dropped connection — before it throws.
    public var reconnectDeadline: Duration
    /// While the `LISTEN` connection is down, workers are woken this often instead (polling).
    public var fallbackPollInterval: Duration
    /// How long one attempt of an operation may wait for the server before it is abandoned and retried
    /// (within ``reconnectDeadline``).
    public var operationTimeout: Duration = .seconds(10)
    /// The `application_name` of the store's connections, as `pg_stat_activity` shows it.
    public var applicationName: String = "baton"

    public init(
        host: String = "127.0.0.1", port: Int = 5432, username: String, password: String? = nil,
        database: String, schema: String = "baton", maximumConnections: Int = 8,
        connectTimeout: Duration = .seconds(10), reconnectDeadline: Duration = .seconds(120),
        fallbackPollInterval: Duration = .milliseconds(500)
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.schema = schema
        self.maximumConnections = maximumConnections
        self.connectTimeout = connectTimeout
        self.reconnectDeadline = reconnectDeadline
        self.fallbackPollInterval = fallbackPollInterval
    }

    /// Reads a `postgres://user[:password]@host[:port]/database` address (`postgresql://` also works).
    ///
    /// - Throws: ``PostgresStoreError`` naming what is wrong with the address.
    public init(url: String, schema: String = "baton") throws {
        guard let components = URLComponents(string: url),
            let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql"
        else {
            throw PostgresStoreError.badConfiguration(
                "'\(url)' is not a PostgreSQL address; write postgres://user[:password]@host[:port]/database")
        }
        guard let user = components.user, !user.isEmpty else {
            throw PostgresStoreError.badConfiguration(
                "'\(url)' names no user; write postgres://user@host/database")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard !database.isEmpty else {
            throw PostgresStoreError.badConfiguration(
                "'\(url)' names no database; add it after the host: postgres://\(user)@host/database")
        }
        self.init(
            host: components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1", port: components.port ?? 5432,
            username: user, password: components.password, database: database, schema: schema)
    }

    /// Checks the settings the server cannot check for us.
    func validate() throws {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789_")
        guard !schema.isEmpty, schema.count <= 48, schema.allSatisfy({ allowed.contains($0) }),
            !schema.first!.isNumber
        else {
            throw PostgresStoreError.badConfiguration(
                "schema name '\(schema)' must be 1 to 48 lowercase letters, digits or '_', not starting with a digit")
        }
        guard maximumConnections >= 1 else {
            throw PostgresStoreError.badConfiguration(
                "maximumConnections is \(maximumConnections); give at least 1")
        }
    }
}
