import Foundation
import Logging
import NIOSSL
import PostgresNIO

/// Where a ``PostgresJobStore`` keeps its tables, and how it connects.
///
/// Every table lives in one PostgreSQL schema (``schema``, `baton` by default), set as the connections'
/// `search_path`, so several stores can share one database without seeing each other.
///
/// Thread safety: a value type; share it freely.
public struct PostgresStoreConfiguration: Sendable {
    /// Whether connections are encrypted with TLS, and how the server's certificate is checked: the
    /// modes of libpq's `sslmode`, with the same names in ``init(url:schema:environment:)``.
    ///
    /// Connections through a Unix-domain socket (a ``host`` starting with `/`) never use TLS, as with
    /// libpq.
    public enum TLSMode: Sendable, Equatable {
        /// Never TLS (`sslmode=disable`).
        case disable
        /// TLS when the server offers it, plain otherwise; the certificate is not checked
        /// (`sslmode=prefer`, libpq's default). Protects against eavesdropping only.
        case prefer
        /// TLS or no connection; the certificate is not checked (`sslmode=require`).
        case require
        /// TLS, with a certificate signed by a trusted authority, whatever name it is for
        /// (`sslmode=verify-ca`). `rootCertificates`: a PEM file of the authorities to trust
        /// (`sslrootcert`); `nil` trusts the system's.
        case verifyCA(rootCertificates: String? = nil)
        /// TLS, with a certificate signed by a trusted authority and issued for ``host``
        /// (`sslmode=verify-full`), the mode to use across an untrusted network. `rootCertificates` as
        /// for ``verifyCA(rootCertificates:)``.
        case verifyFull(rootCertificates: String? = nil)

        /// libpq's name for the mode.
        public var name: String {
            switch self {
            case .disable: "disable"
            case .prefer: "prefer"
            case .require: "require"
            case .verifyCA: "verify-ca"
            case .verifyFull: "verify-full"
            }
        }
    }

    /// The server's host name or IP address; or, starting with `/`, the directory holding its
    /// Unix-domain socket (`.s.PGSQL.<port>` inside it, as libpq reads `host`).
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    /// The PostgreSQL schema (namespace) holding the store's tables. Letters, digits and `_` only.
    public var schema: String
    /// How long one of the store's statements waits for a lock another session holds before it fails
    /// and is run again (`lock_timeout`). The store's own locks last one short transaction; a longer
    /// wait means a stuck session, and a claim never waits for one (it skips busy rows and categories).
    public var lockTimeout: Duration = .seconds(5)
    /// How long a session of the store may sit in an open transaction without sending anything before
    /// the server ends it, releasing its locks (`idle_in_transaction_session_timeout`): what bounds a
    /// worker paused mid-transaction (a stopped process, a VM pause, a half-open connection).
    public var idleInTransactionTimeout: Duration = .seconds(15)
    /// The most connections the store opens for claims, completions and queries (the listener for
    /// wake-ups has one more of its own, and submissions up to half as many again, opened only when
    /// the store submits).
    public var maximumConnections: Int
    /// How long a connection attempt may take before it fails (and is retried with backoff); also how
    /// long opening a store keeps trying an address that does not answer.
    public var connectTimeout: Duration
    /// How long a call keeps retrying (with backoff from 50 ms to 2 s) while the server cannot be
    /// reached — a restart, a failover, a dropped connection — before it throws.
    public var reconnectDeadline: Duration
    /// While the `LISTEN` connection is down, workers are woken this often instead (polling).
    public var fallbackPollInterval: Duration
    /// How long one attempt of an operation may wait for the server's answer to one of its statements
    /// before it is abandoned and retried (within ``reconnectDeadline``). Each answer starts the limit
    /// over: a transaction of many statements (a completion adding 10,000 jobs, a cascade through
    /// thousands of dependents) may take longer than this in all, as long as no single statement does.
    public var operationTimeout: Duration = .seconds(10)
    /// The `application_name` of the store's connections, as `pg_stat_activity` shows it.
    public var applicationName: String = "baton"
    /// TLS for the connections: ``TLSMode/prefer`` unless set (libpq's default).
    public var tls: TLSMode = .prefer
    /// Whether opening creates the store's schema and tables when they are missing (the default). A tool
    /// that only reads or repairs sets it to `false`: opening a schema without a store then fails with a
    /// ``PostgresStoreError`` whose ``PostgresStoreError/isNoStore`` is true, and nothing is created; a
    /// store of an older version is refused too, not upgraded.
    public var createsStore: Bool = true

    /// Where the store connects, for messages: `host:port`, or the socket's path.
    var endpoint: String { unixSocketPath ?? "\(host):\(port)" }

    /// The path of the server's Unix-domain socket when ``host`` names its directory.
    var unixSocketPath: String? {
        guard host.hasPrefix("/") else { return nil }
        return (host.hasSuffix("/") ? host : host + "/") + ".s.PGSQL.\(port)"
    }

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

    /// Reads a `postgres://user[:password]@host[:port]/database[?parameter=value&…]` address
    /// (`postgresql://` also works), as libpq reads one.
    ///
    /// Parameters: `sslmode` (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`; without it,
    /// the `PGSSLMODE` environment variable, else `prefer`), `sslrootcert` (a PEM file of the
    /// authorities to trust; else `PGSSLROOTCERT`), `host` (a host name, or the directory of a
    /// Unix-domain socket: `postgres://app@/app?host=/var/run/postgresql`, or the directory
    /// percent-encoded in place of the host), `port`, `user`, `password`, `dbname`,
    /// `application_name` and `connect_timeout` (seconds). Any other parameter is an error rather than
    /// ignored: an address that asks for something the store would not do must not connect as if it
    /// had not asked. A user name or password with `@`, `:` or `/` is written percent-encoded.
    ///
    /// - Parameters:
    ///   - url: the address.
    ///   - schema: the PostgreSQL schema holding the store's tables.
    ///   - environment: where `PGSSLMODE` and `PGSSLROOTCERT` are read; `nil`, the process's.
    /// - Throws: ``PostgresStoreError`` naming what is wrong with the address.
    public init(
        url: String, schema: String = "baton",
        environment: [String: String]? = nil
    ) throws {
        let environment = environment ?? ProcessInfo.processInfo.environment
        guard let components = URLComponents(string: url),
            let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql"
        else {
            throw PostgresStoreError.badConfiguration(
                "'\(Self.redacted(url))' is not a PostgreSQL address; write postgres://user[:password]@host[:port]/database"
            )
        }
        var parameters: [String: String] = [:]
        for item in components.queryItems ?? [] {
            guard parameters[item.name] == nil else {
                throw PostgresStoreError.badConfiguration(
                    "'\(Self.redacted(url))' gives the parameter '\(item.name)' twice; keep one")
            }
            parameters[item.name] = item.value ?? ""
        }
        let known: Set = [
            "sslmode", "sslrootcert", "host", "port", "user", "password", "dbname", "application_name",
            "connect_timeout",
        ]
        if let unknown = parameters.keys.sorted().first(where: { !known.contains($0) }) {
            throw PostgresStoreError.badConfiguration(
                "'\(Self.redacted(url))' has the parameter '\(unknown)', which PostgresJobStore does not support; "
                    + "remove it (supported: \(known.sorted().joined(separator: ", ")))")
        }
        let user = parameters["user"] ?? components.user ?? ""
        guard !user.isEmpty else {
            throw PostgresStoreError.badConfiguration(
                "'\(Self.redacted(url))' names no user; write postgres://user@host/database")
        }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let database = parameters["dbname"] ?? path
        guard !database.isEmpty else {
            throw PostgresStoreError.badConfiguration(
                "'\(Self.redacted(url))' names no database; add it after the host: postgres://\(user)@host/database")
        }
        var host = "127.0.0.1"
        if let given = parameters["host"], !given.isEmpty {
            host = given
        } else if let encoded = components.percentEncodedHost, !encoded.isEmpty {
            host = encoded.removingPercentEncoding ?? encoded
        }
        var port = components.port ?? 5432
        if let text = parameters["port"] {
            guard let value = Int(text), (1...65_535).contains(value) else {
                throw PostgresStoreError.badConfiguration(
                    "'\(Self.redacted(url))' has port '\(text)'; give a number from 1 to 65535")
            }
            port = value
        }
        self.init(
            host: host, port: port, username: user, password: parameters["password"] ?? components.password,
            database: database, schema: schema)
        if let name = parameters["application_name"] { applicationName = name }
        if let text = parameters["connect_timeout"] {
            guard let seconds = Int(text), seconds >= 0 else {
                throw PostgresStoreError.badConfiguration(
                    "'\(Self.redacted(url))' has connect_timeout '\(text)'; give whole seconds")
            }
            // libpq: 0 waits for ever; a store call still gives up after `reconnectDeadline`.
            if seconds > 0 { connectTimeout = .seconds(seconds) } else { connectTimeout = reconnectDeadline }
        }
        let modeName = parameters["sslmode"] ?? environment["PGSSLMODE"].flatMap { $0.isEmpty ? nil : $0 }
        let root = parameters["sslrootcert"] ?? environment["PGSSLROOTCERT"].flatMap { $0.isEmpty ? nil : $0 }
        switch modeName ?? "prefer" {
        case "disable", "allow": tls = .disable
        case "prefer": tls = .prefer
        case "require" where root == nil: tls = .require
        // libpq: `require` with a root certificate file checks the authority, as `verify-ca`.
        case "require", "verify-ca": tls = .verifyCA(rootCertificates: root)
        case "verify-full": tls = .verifyFull(rootCertificates: root)
        case let other:
            throw PostgresStoreError.badConfiguration(
                "sslmode '\(other)'\(parameters["sslmode"] == nil ? " (from PGSSLMODE)" : "") is not one of disable, "
                    + "allow, prefer, require, verify-ca, verify-full")
        }
    }

    /// The address with its password replaced by `***`, for messages.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url) else {
            // An address that does not parse is shown with what looks like its password hidden all the
            // same (it was echoed whole: `postgres://u:s3cret@[bad`).
            var text = url.replacingOccurrences(
                of: "password=[^&]*", with: "password=***", options: [.regularExpression, .caseInsensitive])
            if let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].lastIndex(of: "@"),
                let colon = text[scheme.upperBound..<at].firstIndex(of: ":")
            {
                text.replaceSubrange(text.index(after: colon)..<at, with: "***")
            }
            return text
        }
        if components.password != nil { components.password = "***" }
        if let items = components.queryItems, items.contains(where: { $0.name == "password" }) {
            components.queryItems = items.map {
                $0.name == "password" ? URLQueryItem(name: "password", value: "***") : $0
            }
        }
        return components.string ?? url
    }

    /// NIOSSL's settings for ``tls``, and whether TLS is required; `nil` for no TLS.
    var tlsConfiguration: (TLSConfiguration, required: Bool)? {
        var settings = TLSConfiguration.makeClientConfiguration()
        switch tls {
        case .disable:
            return nil
        case .prefer, .require:
            settings.certificateVerification = .none
        case .verifyCA(let roots):
            settings.certificateVerification = .noHostnameVerification
            if let roots { settings.trustRoots = .file(roots) }
        case .verifyFull(let roots):
            settings.certificateVerification = .fullVerification
            if let roots { settings.trustRoots = .file(roots) }
        }
        return (settings, required: tls != .prefer)
    }

    /// The settings of one connection outside the pools (the wake-up listener's, a probe's).
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        var result: PostgresConnection.Configuration
        if let socket = unixSocketPath {
            result = PostgresConnection.Configuration(
                unixSocketPath: socket, username: username, password: password, database: database)
        } else {
            let tls: PostgresConnection.Configuration.TLS =
                switch tlsConfiguration {
                case nil: .disable
                case .some((let settings, required: true)): .require(try NIOSSLContext(configuration: settings))
                case .some((let settings, required: false)): .prefer(try NIOSSLContext(configuration: settings))
                }
            result = PostgresConnection.Configuration(
                host: host, port: port, username: username, password: password, database: database, tls: tls)
        }
        result.options.additionalStartupParameters = [("search_path", schema), ("application_name", applicationName)]
        result.options.connectTimeout = .milliseconds(Int64(connectTimeout.seconds * 1000))
        return result
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
        switch tls {
        case .verifyCA(let roots?), .verifyFull(let roots?):
            do {
                _ = try NIOSSLCertificate.fromPEMFile(roots)
            } catch {
                throw PostgresStoreError.badConfiguration(
                    "cannot read the root certificates '\(roots)' for sslmode \(tls.name) (\(error)); give a "
                        + "readable PEM file of the certificate authorities to trust (sslrootcert)")
            }
        default:
            break
        }
        guard maximumConnections >= 1 else {
            throw PostgresStoreError.badConfiguration(
                "maximumConnections is \(maximumConnections); give at least 1")
        }
        for (name, value) in [
            ("connectTimeout", connectTimeout), ("reconnectDeadline", reconnectDeadline),
            ("operationTimeout", operationTimeout), ("lockTimeout", lockTimeout),
            ("idleInTransactionTimeout", idleInTransactionTimeout), ("fallbackPollInterval", fallbackPollInterval),
        ] where value <= .zero {
            throw PostgresStoreError.badConfiguration("\(name) is \(value); give more than zero")
        }
    }
}
