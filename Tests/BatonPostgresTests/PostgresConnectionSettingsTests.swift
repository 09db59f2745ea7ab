import Baton
import BatonDurable
import BatonTesting
import Foundation
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

@testable import BatonPostgres

/// Addresses as libpq reads them: `sslmode` and the other parameters, `PGSSLMODE`, Unix-domain sockets.
@Suite("PostgreSQL addresses")
struct PostgresAddressTests {
    typealias Mode = PostgresStoreConfiguration.TLSMode

    @Test(
        "sslmode in the address, else PGSSLMODE, else prefer",
        arguments: [
            ("postgres://a@h/d", [String: String](), Mode.prefer),
            ("postgres://a@h/d", ["PGSSLMODE": "disable"], .disable),
            ("postgres://a@h/d?sslmode=require", ["PGSSLMODE": "disable"], .require),
            ("postgres://a@h/d?sslmode=disable", [:], .disable),
            ("postgres://a@h/d?sslmode=allow", [:], .disable),
            ("postgres://a@h/d?sslmode=verify-full", [:], .verifyFull(rootCertificates: nil)),
            ("postgres://a@h/d?sslmode=verify-ca&sslrootcert=/r.pem", [:], .verifyCA(rootCertificates: "/r.pem")),
            (
                "postgres://a@h/d?sslmode=verify-full", ["PGSSLROOTCERT": "/e.pem"],
                .verifyFull(rootCertificates: "/e.pem")
            ),
            // libpq: `require` with a root certificate file checks the authority.
            ("postgres://a@h/d?sslmode=require&sslrootcert=/r.pem", [:], .verifyCA(rootCertificates: "/r.pem")),
        ])
    func sslMode(url: String, environment: [String: String], expected: Mode) throws {
        #expect(try PostgresStoreConfiguration(url: url, environment: environment).tls == expected)
    }

    @Test("host, port, user, password and database from the parameters or the address")
    func parameters() throws {
        let socket = try PostgresStoreConfiguration(
            url: "postgres://ann@/jobs?host=/var/run/postgresql&port=5433", environment: [:])
        #expect(socket.host == "/var/run/postgresql")
        #expect(socket.port == 5433)
        #expect(socket.unixSocketPath == "/var/run/postgresql/.s.PGSQL.5433")
        let encoded = try PostgresStoreConfiguration(url: "postgresql://ann@%2Ftmp%2Fpg/jobs", environment: [:])
        #expect(encoded.unixSocketPath == "/tmp/pg/.s.PGSQL.5432")
        let named = try PostgresStoreConfiguration(
            url: "postgres://h:6000/?user=bob&password=p%40ss&dbname=work&application_name=w1&connect_timeout=3",
            environment: [:])
        #expect(named.host == "h" && named.port == 6000 && named.unixSocketPath == nil)
        #expect(named.username == "bob" && named.password == "p@ss" && named.database == "work")
        #expect(named.applicationName == "w1" && named.connectTimeout == .seconds(3))
        let encodedUser = try PostgresStoreConfiguration(url: "postgres://a%40b:c%3Ad@h/d", environment: [:])
        #expect(encodedUser.username == "a@b" && encodedUser.password == "c:d")
    }

    @Test(
        "a parameter the store would not honour is an error, not ignored; passwords stay out of messages",
        arguments: [
            ("postgres://a:secret@h/d?sslcert=/c.pem", "'sslcert', which PostgresJobStore does not support"),
            ("postgres://a:secret@h/d?sslmode=verify", "sslmode 'verify' is not one of"),
            ("postgres://a:secret@h/d?sslmode=disable&sslmode=require", "gives the parameter 'sslmode' twice"),
            ("postgres://a:secret@h/d?port=99999", "give a number from 1 to 65535"),
            ("postgres://a:secret@h/d?connect_timeout=soon", "give whole seconds"),
        ])
    func refused(url: String, expected: String) throws {
        let error = #expect(throws: PostgresStoreError.self) {
            _ = try PostgresStoreConfiguration(url: url, environment: [:])
        }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
        #expect(error?.message.contains("secret") == false)
    }

    @Test("a bad PGSSLMODE is named as coming from the environment")
    func badEnvironment() {
        let error = #expect(throws: PostgresStoreError.self) {
            _ = try PostgresStoreConfiguration(url: "postgres://a@h/d", environment: ["PGSSLMODE": "on"])
        }
        #expect(error?.message.contains("sslmode 'on' (from PGSSLMODE)") == true)
    }

    @Test("an unreadable root certificate file is refused before connecting")
    func unreadableRoots() throws {
        var configuration = try PostgresStoreConfiguration(url: "postgres://a@h/d", environment: [:])
        configuration.tls = .verifyFull(rootCertificates: "/nonexistent/ca.pem")
        let error = #expect(throws: PostgresStoreError.self) { try configuration.validate() }
        #expect(error?.message.contains("cannot read the root certificates '/nonexistent/ca.pem'") == true)
    }
}

/// TLS and Unix-domain sockets against the real server: `.ci/postgres` offers TLS with a throwaway
/// authority (`BATON_POSTGRES_CA`) and listens on a socket in `BATON_POSTGRES_DIR`.
@Suite("PostgreSQL connections", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresConnectionTests {
    struct NoTLS: Error, CustomStringConvertible {
        var description: String {
            "BATON_CI is set but BATON_POSTGRES_CA is not: .ci/postgres could not make a certificate (is openssl installed?)"
        }
    }

    /// The server's TLS authority; `nil` (the test returns) outside CI when the server offers no TLS.
    static func authority(_ name: String) throws -> (trusted: String, other: String)? {
        let environment = TestPostgres.environment
        guard let trusted = environment["BATON_POSTGRES_CA"], let other = environment["BATON_POSTGRES_OTHER_CA"] else {
            if TestPostgres.required { throw NoTLS() }
            print("\(name) skipped: BATON_POSTGRES_CA is not set (start the server with `source .ci/postgres`)")
            return nil
        }
        return (trusted, other)
    }

    /// The store's address with `parameters` added.
    static func url(_ parameters: String) throws -> String {
        guard let url = TestPostgres.url else { throw TestPostgres.Missing() }
        return url + (url.contains("?") ? "&" : "?") + parameters
    }

    /// Whether every connection the store has open (its pool and its wake-up listener) uses TLS.
    static func encryption(of store: PostgresJobStore, application: String) async throws -> (all: Bool, count: Int) {
        let rows = try await store.client.query(
            """
            SELECT coalesce(bool_and(s.ssl), false), count(*)::int FROM pg_stat_activity a
            JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = \(application)
            """)
        for try await (all, count) in rows.decode((Bool, Int).self) { return (all, count) }
        return (false, 0)
    }

    @Test(
        "verify-full with the server's authority: every connection is encrypted, and the store works",
        arguments: ["verify-full", "verify-ca", "require"])
    func encrypted(mode: String) async throws {
        guard let authority = try Self.authority("encrypted") else { return }
        let application = "baton-tls-\(UInt32.random(in: 0...UInt32.max))"
        var configuration = try PostgresStoreConfiguration(
            url: Self.url("sslmode=\(mode)&sslrootcert=\(authority.trusted)&application_name=\(application)"),
            schema: "t_tls_\(String(UInt32.random(in: 0...UInt32.max), radix: 36))")
        // The store's own reconnect deadline (120 s), as every other PostgreSQL test's: at the start of the
        // whole suite, opening any store took 25–31 s here (2 cores; TLS or not, a Unix socket too), and
        // this test's 20 s deadline failed it now and then.
        configuration.maximumConnections = TestPostgres.maximumConnections
        let store = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
        defer { store.close() }
        let outcome = try await PostgresRoundTrip.run(on: store)
        #expect(outcome == "done")
        // The listener connects in the background: wait (bounded) until it is listening.
        let deadline = ContinuousClock.now + .seconds(60)
        while !store.isListening, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(store.isListening, "the wake-up listener did not connect over TLS within 60 s")
        let (all, count) = try await Self.encryption(of: store, application: application)
        #expect(all && count >= 2, "TLS on every connection: \(all), connections: \(count)")
        try await TestPostgres.drop(configuration.schema, using: store)
    }

    @Test("verify-full against an authority that did not sign the server's certificate: refused, saying why")
    func wrongAuthority() async throws {
        guard let authority = try Self.authority("wrongAuthority") else { return }
        var configuration = try PostgresStoreConfiguration(
            url: Self.url("sslmode=verify-full&sslrootcert=\(authority.other)"), schema: "t_tls_refused")
        configuration.reconnectDeadline = .seconds(2)
        configuration.operationTimeout = .seconds(2)
        // A refused certificate is not retried for the connect timeout (a probe: 9.7 s, then "is the
        // server running?"): with an hour's timeout, only failing at once ends within the deadline.
        configuration.connectTimeout = .seconds(3600)
        // Refused, not retried for ever: the deadline (far above the 2 s reconnect deadline, since a
        // loaded machine running the whole suite can take tens of seconds) fires only on a hang.
        let text = Protected("")
        try await withDeadline(.seconds(180), "opening a store whose server certificate is not trusted") {
            [configuration] in
            let error = await #expect(throws: (any Error).self) {
                _ = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            }
            text.withLock { $0 = String(describing: error.map { $0 } as Any) }
        }
        let message = text.withLock { $0 }
        #expect(message.localizedCaseInsensitiveContains("certificate"), "\(message)")
        #expect(!message.contains("is the server running"), "\(message)")
    }

    @Test(
        "an address where no server listens fails within the connect timeout, not the reconnect deadline, saying where it tried"
    )
    func noServer() async throws {
        let port = closedLoopbackPort()  // nothing listens there
        var configuration = try PostgresStoreConfiguration(
            url: "postgres://baton@127.0.0.1:\(port)/baton", schema: "t_no_server", environment: [:])
        configuration.connectTimeout = .seconds(2)
        configuration.reconnectDeadline = .seconds(600)
        let text = Protected("")
        // The deadline fires only if the open keeps retrying for its reconnect deadline (10 minutes).
        try await withDeadline(.seconds(120), "opening a store on a port where no server listens") {
            [configuration] in
            let error = await #expect(throws: DurableError.self) {
                _ = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            }
            text.withLock { $0 = error?.message ?? "" }
        }
        let message = text.current
        #expect(message.contains("cannot connect to 127.0.0.1:\(port)"), "\(message)")
        #expect(message.contains("is the server running"), "\(message)")
    }

    @Test("a Unix-domain socket: host is the socket's directory, as with libpq")
    func unixSocket() async throws {
        guard let directory = TestPostgres.environment["BATON_POSTGRES_DIR"],
            let port = TestPostgres.environment["BATON_POSTGRES_PORT"]
        else {
            if TestPostgres.required { throw TestPostgres.Missing() }
            print("unixSocket skipped: BATON_POSTGRES_DIR is not set (start the server with `source .ci/postgres`)")
            return
        }
        var configuration = try PostgresStoreConfiguration(
            url: "postgres://baton@/baton?host=\(directory)&port=\(port)",
            schema: "t_socket_\(String(UInt32.random(in: 0...UInt32.max), radix: 36))")
        configuration.maximumConnections = TestPostgres.maximumConnections
        let store = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
        defer { store.close() }
        #expect(try await PostgresRoundTrip.run(on: store) == "done")
        let rows = try await store.client.query("SELECT inet_server_addr() IS NULL")
        var local = false
        for try await isNull in rows.decode(Bool.self) { local = isNull }
        #expect(local, "the pool's connection came over TCP, not the socket")
        try await TestPostgres.drop(configuration.schema, using: store)
    }
}

/// One job submitted and run to its end by a worker on the store: the store's round trip.
enum PostgresRoundTrip {
    struct Echo: DurableJob {
        static let kind = "test.pg-echo"
        func run(_ text: String, context: DurableJobContext) async throws -> String { text }
    }

    /// The job's output once the run has finished.
    static func run(on store: PostgresJobStore) async throws -> String {
        var graph = JobGraph(name: "round trip")
        let job = graph.add(Echo.self, input: "done", name: "echo")
        let run = try await store.submit(graph)
        let worker = try DurableWorker(
            store: store, jobs: [Echo()], configuration: .init(id: "round-trip", pollInterval: .milliseconds(50)))
        try await withDeadline(.seconds(30), "the round trip's run") {
            let counts = try await worker.run(until: run).counts
            #expect(counts == [.succeeded: 1])
        }
        return try await store.output(of: job, in: run) ?? "no output"
    }
}
