import Baton
public import BatonDurable
import Foundation
public import Logging
import NIOPosix
import NIOSSL
public import PostgresNIO
public import ServiceLifecycle

/// A durable job store on PostgreSQL, for workers in many processes on many machines.
///
/// ```swift
/// let store = try await PostgresJobStore(url: "postgres://app@db.internal/app")
/// let run = try await store.submit(graph, uniqueKey: "nightly-2026-11-23")
/// try await DurableWorker(store: store, jobs: [FetchFeed(), ParseFeed()]).run()   // on every machine
/// ```
///
/// The same contract as `SQLiteJobStore` (the `JobStoreConformance` checks run against both):
/// claims take ready jobs with `FOR UPDATE SKIP LOCKED`, in batches, higher priority first then
/// older first, and admit a job only while each of its counted categories has room — checked and
/// recorded in the claiming transaction under a per-category lock, so the limit holds across all
/// workers. Every claim draws a fresh lease token; completions, renewals and releases are accepted
/// only with the current one. A completion records the output, releases the categories and makes
/// the dependents whose last dependency it was ready in one statement.
///
/// **Wake-ups** use `LISTEN/NOTIFY` on a connection of their own: a submission, a completion that
/// makes jobs ready or frees a category, a release and a cancellation notify every listening
/// process at once. A wake-up only wakes: the worker then claims (`FOR UPDATE SKIP LOCKED`, never
/// more than its free room). When that connection drops, the store reconnects it with backoff and
/// meanwhile wakes its workers every ``PostgresStoreConfiguration/fallbackPollInterval`` (polling).
///
/// **One clock**: every time that decides a lease, a retry or a worker's registration is the server's
/// (`now()` in the statements), so workers on machines whose clocks disagree never judge a lease
/// differently. A store given a clock other than `DurableClock.system` (tests) sends that clock's time
/// with each statement instead.
///
/// **Durable before acknowledged**: every write commits synchronously and is confirmed before its
/// answer counts — a claim, a submission and a completion the caller was told of survive a server
/// crash, and each claim's attempt number is used once.
///
/// **A stuck client stalls nothing else**: a claim skips a category whose lock another session holds
/// (as `SKIP LOCKED` skips busy rows), and the store's sessions run with `lock_timeout` and
/// `idle_in_transaction_session_timeout` (``PostgresStoreConfiguration/lockTimeout``,
/// ``PostgresStoreConfiguration/idleInTransactionTimeout``), so no session of a paused worker holds a
/// lock for long.
///
/// **Faults**: a call that fails because the server went away (restart, a terminated backend, a
/// refused connection) is retried with backoff for up to
/// ``PostgresStoreConfiguration/reconnectDeadline``; deadlocks, serialization failures and lock
/// timeouts are retried at once. Opening a store retries only for
/// ``PostgresStoreConfiguration/connectTimeout``: an address that does not answer fails quickly.
///
/// Tables live in the PostgreSQL schema ``PostgresStoreConfiguration/schema`` and are created and
/// migrated by the store (versioned; a newer schema is refused). PostgreSQL 13 or later, no extension.
///
/// ## Thread safety
/// All methods may be called from any task at once; several processes and machines may share one
/// database. Call ``close()`` when done.
public final class PostgresJobStore: JobStore, Service {
    public let clock: DurableClock
    public let configuration: PostgresStoreConfiguration
    let client: PostgresClient
    /// The connections of submissions' inserts: generic plans only (`plan_cache_mode`), see
    /// ``clientConfiguration(_:genericPlans:)``.
    let submitClient: PostgresClient
    let logger: Logger
    let hub = WakeupHub()
    let channel: String
    /// Faults the tests arm (``PostgresFaults``).
    let faults = PostgresFaults()
    /// Made, opening, open, or closed (see ``run()`` and ``close()``).
    let lifecycle = Protected(PostgresStoreLifecycle())
    let listener: PostgresListener

    /// The schema version this build writes and understands.
    public static var schemaVersion: Int { PostgresSchema.current }

    /// Makes a store; nothing connects until ``run()`` (or use ``withPostgresJobStore(configuration:clock:logger:_:)``,
    /// which runs it for the length of a closure).
    ///
    /// - Throws: ``PostgresStoreError`` for a configuration that cannot work.
    public init(
        configuration: PostgresStoreConfiguration, clock: DurableClock = .system,
        logger: Logger = Logger(label: "baton.postgres")
    ) throws {
        try configuration.validate()
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        self.channel = "baton_\(configuration.schema)"
        client = PostgresClient(configuration: Self.clientConfiguration(configuration), backgroundLogger: logger)
        submitClient = PostgresClient(
            configuration: Self.clientConfiguration(configuration, genericPlans: true), backgroundLogger: logger)
        listener = PostgresListener(configuration: configuration, channel: channel, hub: hub, logger: logger)
    }

    /// Makes a store for a `postgres://user[:password]@host[:port]/database` address.
    public convenience init(
        url: String, schema: String = "baton", clock: DurableClock = .system,
        logger: Logger = Logger(label: "baton.postgres")
    ) throws {
        try self.init(
            configuration: PostgresStoreConfiguration(url: url, schema: schema), clock: clock, logger: logger)
    }

    /// Runs the store: its connection pools and its `LISTEN` connection, as child tasks of this call,
    /// as postgres-nio asks. It first connects and creates or migrates the tables; calls made before
    /// that wait for it. Returns at ``close()``, at a graceful shutdown of the `ServiceGroup` it runs in
    /// (register it before the workers that use it: a group stops its services in reverse order), or
    /// when its task is cancelled; calls after that throw `PostgresStoreError.closed`.
    ///
    /// - Throws: ``PostgresStoreError`` for a newer or foreign schema, or a second `run()`; a
    ///   `DurableError` (`DurableError.Code.storeFailure`) when the server cannot be reached (within
    ///   ``PostgresStoreConfiguration/connectTimeout`` for an address that does not answer).
    public func run() async throws {
        try lifecycle.withLock { try $0.begin() }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.client.run() }
            group.addTask { await self.submitClient.run() }
            do {
                try await open()
            } catch {
                lifecycle.withLock { $0.failed(error) }.perform()
                throw error
            }
            lifecycle.withLock { $0.opened() }.perform()
            group.addTask { await self.listener.run() }
            await withGracefulShutdownHandler {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        if !lifecycle.withLock({ $0.park(continuation) }) { continuation.resume() }
                    }
                } onCancel: {
                    self.close()
                }
            } onGracefulShutdown: {
                self.close()
            }
            group.cancelAll()
        }
    }

    /// Connects and creates or migrates the tables.
    private func open() async throws {
        try await Self.reachServer(configuration, logger: logger)
        do {
            _ = try await Self.retrying(configuration: configuration, logger: logger, "open") {
                [client, configuration, logger] in
                try await client.withConnection { connection in
                    try await PostgresSchema.migrate(
                        on: connection, schema: configuration.schema, logger: logger,
                        mustExistIn: configuration.createsStore ? nil : configuration.database)
                }
            }
        } catch {
            // The pool retries a connection that fails and only says it timed out: one connection of
            // our own tells why (a refused certificate, a password, a missing database).
            if let durable = error as? DurableError, durable.code == .storeFailure,
                let (reason, _) = await Self.connectionFailure(configuration, logger: logger)
            {
                throw DurableError(
                    code: .storeFailure,
                    message: "PostgreSQL failed during open: cannot connect to \(configuration.endpoint): \(reason)",
                    underlying: error)
            }
            throw error
        }
    }

    /// Returns once the store is open; throws if it failed to open or was closed, and — when
    /// ``run()`` has not begun within ``PostgresStoreConfiguration/connectTimeout`` — that it is not
    /// running, saying how to run it (rather than waiting for ever).
    func waitUntilOpen() async throws {
        if lifecycle.withLock({ $0.isOpen }) { return }
        let number = lifecycle.withLock { $0.newWaiter() }
        let timeout = configuration.connectTimeout
        let lifecycle = lifecycle
        let timer = Task {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            lifecycle.withLock { $0.giveUp(number, onlyIfIdle: true) }?.resume(throwing: PostgresStoreError.notRunning)
        }
        defer { timer.cancel() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if let now = lifecycle.withLock({ $0.enter(continuation, as: number) }) {
                    continuation.resume(with: now)
                }
            }
        } onCancel: {
            lifecycle.withLock { $0.giveUp(number, onlyIfIdle: false) }?.resume(throwing: CancellationError())
        }
    }

    /// Before anything else, one connection of our own: an address where no server answers fails in
    /// ``PostgresStoreConfiguration/connectTimeout`` (a refused connection is tried again meanwhile: a
    /// server restarting), and one that refuses us for good (a password, a certificate, a missing
    /// database) fails at once — both saying why — rather than after the pool's retries.
    static func reachServer(_ configuration: PostgresStoreConfiguration, logger: Logger) async throws {
        let start = ContinuousClock.now
        var wait = Duration.milliseconds(50)
        while let (reason, transient) = await connectionFailure(configuration, logger: logger) {
            let elapsed = ContinuousClock.now - start
            guard transient, elapsed + wait < configuration.connectTimeout else {
                throw DurableError(
                    code: .storeFailure,
                    message: "PostgreSQL failed during open: cannot connect to \(configuration.endpoint): \(reason)"
                        + (transient
                            ? " (tried for \(configuration.connectTimeout); is the server running, and is this its address?)"
                            : ""))
            }
            try await Task.sleep(for: wait)
            wait = min(wait * 2, .seconds(1))
        }
    }

    /// Why one connection with the store's settings fails, and whether trying again may help (a refused
    /// connection, no answer); `nil` when it succeeds. A connection that comes after the connect timeout
    /// is closed when it comes.
    static func connectionFailure(
        _ configuration: PostgresStoreConfiguration, logger: Logger
    ) async -> (reason: String, transient: Bool)? {
        let connecting: EventLoopFuture<PostgresConnection>
        do {
            connecting = PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(),
                configuration: try configuration.connectionConfiguration(), id: 0, logger: logger)
        } catch {
            return (PostgresFailure.describe(error), false)
        }
        do {
            let connection = try await PostgresTimeout.run(configuration.connectTimeout) { try await connecting.get() }
            try? await connection.close()
            return nil
        } catch is PostgresTimeout {
            connecting.whenSuccess { connection in connection.close().whenComplete { _ in } }
            return ("no answer within \(configuration.connectTimeout)", true)
        } catch {
            // A certificate refused, or a TLS handshake that failed, fails the same way each time: said
            // at once, not after the connect timeout with a hint about the server not running.
            if let underlying = (error as? PSQLError)?.underlying,
                underlying is NIOSSLError || underlying is BoringSSLError
            {
                return ("the TLS connection failed: \(underlying)", false)
            }
            return (PostgresFailure.describe(error), PostgresFailure.classify(error) == .unreachable)
        }
    }

    /// Ends ``run()`` (its connections close) and the wake-up streams. Calls after this throw
    /// `PostgresStoreError.closed`; closing twice does nothing.
    public func close() {
        lifecycle.withLock { $0.close() }.perform()
        hub.finishAll()
    }

    public func wakeups() -> AsyncStream<Void> { hub.stream() }

    /// Whether ``close()`` was called (or ``run()`` ended): every later call throws `PostgresStoreError.closed`.
    public var isClosed: Bool { lifecycle.withLock { $0.isClosed } }

    /// What the server said of a PostgreSQL error an attempt threw (its `writes`, or its own queries):
    /// "relation "items" does not exist (SQLSTATE 42P01)", where postgres-nio's own description is a
    /// generic sentence that hides the cause from `explain` and `baton job`.
    public func describeFailure(_ error: any Error) -> String? {
        error is PSQLError ? PostgresFailure.describe(error) : nil
    }

    /// Two: a worker's calls commit side by side on two connections, so the attempts that end while one
    /// waits for its commit (a WAL flush) go in the other (a one-worker burn-down: +30 % jobs a second
    /// by the medians of ten interleaved runs against one call at a time, 29 Nov 2026).
    public var reportCallsInFlight: Int { 2 }

    /// Whether the wake-up connection is listening now (false while it reconnects; workers are then
    /// woken by polling).
    public var isListening: Bool { listener.isListening }

    /// The pool's settings. With `genericPlans` (the submissions' pool), the connections plan each
    /// prepared statement once for any values (`plan_cache_mode = force_generic_plan`), and at most
    /// half as many are opened (at least one; none before the first submission). By default the
    /// server plans the submitting statement anew for each call's values, its generic plan looking
    /// costlier: for a one-job graph that planning took 0.4–0.5 ms of server time, more than the
    /// insert itself, on every call (0.07 ms with the generic plan, which joins by hashing and ran a
    /// 50,000-job graph as fast as the custom one). The other statements keep the server's default
    /// choice: the claiming statement's forced generic plan took tens of milliseconds in a trial.
    static func clientConfiguration(
        _ configuration: PostgresStoreConfiguration, genericPlans: Bool = false
    ) -> PostgresClient.Configuration {
        var result: PostgresClient.Configuration
        if let socket = configuration.unixSocketPath {
            result = PostgresClient.Configuration(
                unixSocketPath: socket, username: configuration.username, password: configuration.password,
                database: configuration.database)
        } else {
            let tls: PostgresClient.Configuration.TLS =
                switch configuration.tlsConfiguration {
                case nil: .disable
                case .some((let settings, required: true)): .require(settings)
                case .some((let settings, required: false)): .prefer(settings)
                }
            result = PostgresClient.Configuration(
                host: configuration.host, port: configuration.port, username: configuration.username,
                password: configuration.password, database: configuration.database, tls: tls)
        }
        result.options.additionalStartupParameters = [
            ("search_path", configuration.schema), ("application_name", configuration.applicationName),
            ("lock_timeout", "\(configuration.lockTimeout.milliseconds)ms"),
            ("idle_in_transaction_session_timeout", "\(configuration.idleInTransactionTimeout.milliseconds)ms"),
        ]
        if genericPlans { result.options.additionalStartupParameters.append(("plan_cache_mode", "force_generic_plan")) }
        result.options.maximumConnections =
            genericPlans ? max(1, configuration.maximumConnections / 2) : configuration.maximumConnections
        result.options.connectTimeout = configuration.connectTimeout
        return result
    }

    // MARK: Running statements

    /// Runs `body` in a transaction, retried as ``retrying(configuration:logger:_:_:)`` says.
    func transaction<T: Sendable>(
        _ label: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let logger = logger
        return try await retrying(label) { [client, faults] in
            let result = try await client.withConnection { connection in
                try await connection.liveQuery("BEGIN", logger: logger)
                do {
                    let result = try await body(connection)
                    try await connection.liveQuery("COMMIT", logger: logger)
                    return result
                } catch {
                    // A session the server ended has rolled back; a ROLLBACK sent as its connection
                    // closes could wait for the operation timeout.
                    if PostgresFailure.classify(error) != .unreachable {
                        _ = try? await connection.liveQuery("ROLLBACK", logger: logger)
                    }
                    await Self.discardIfBroken(connection, after: error)
                    throw error
                }
            }
            try faults.afterCommit(label)
            return result
        }
    }

    /// Runs one statement (atomic by itself) and returns its rows, retried as a transaction is.
    ///
    /// Outside `BEGIN`/`COMMIT` the server commits a statement when it handles the `Sync` that
    /// follows it, after it has sent the rows — and PostgresNIO hands the rows over as soon as they
    /// are complete. A connection cut in between would deliver the rows of a transaction that was
    /// rolled back: a completion said accepted but never recorded, a claim that holds nothing (whose
    /// attempt number the next claim would use again), a submission that is not there. So the rows are
    /// returned only once the server has answered a request sent after them on the same connection
    /// (``confirmCommitted(on:logger:)``, `SELECT 1`: one more round trip, measured at 0.05–0.1 ms on
    /// loopback); when that fails the statement is run again, as after any dropped connection. It may
    /// have committed all the same: a repeated completion or submission recognises its own earlier
    /// commit (the kept report, the submission id); a claim whose rows were lost after it committed
    /// leaves its jobs running under a lease nobody holds until it expires — a delay of one lease,
    /// never a loss, and never a second attempt with the same number.
    ///
    /// A statement that only reads (`readOnly`) skips the check: its rows hold whether or not its
    /// transaction commits.
    func statement(_ label: String, _ query: PostgresQuery, readOnly: Bool = false) async throws -> [PostgresRow] {
        let logger = logger
        return try await retrying(label) { [client, faults] in
            let rows = try await client.withConnection { connection in
                try await Self.discardingIfBroken(connection) {
                    let rows = try await connection.liveQuery(query, logger: logger).collect()
                    if !readOnly { try await Self.confirmCommitted(on: connection, logger: logger) }
                    return rows
                }
            }
            try faults.afterCommit(label)
            return rows
        }
    }

    /// Runs a prepared statement (parsed and planned once per connection, then only bound and
    /// executed: a claim or a submission is one round trip without the planning), retried as a
    /// transaction is; its rows count once its commit is confirmed, as ``statement(_:_:readOnly:)`` explains.
    func prepared<Text: PreparedText>(
        _ label: String, _ statement: Prepared<Text>, readOnly: Bool = false
    ) async throws -> [PostgresRow] {
        let logger = logger
        return try await retrying(label) { [client, faults] in
            let rows = try await client.withConnection { connection in
                try await Self.discardingIfBroken(connection) {
                    let rows = try await connection.rows(of: statement, logger: logger)
                    if !readOnly { try await Self.confirmCommitted(on: connection, logger: logger) }
                    return rows
                }
            }
            try faults.afterCommit(label)
            return rows
        }
    }

    /// Runs `body` on `connection`, closing the connection when its failure leaves it unfit for the
    /// retry (``discardIfBroken(_:after:)``).
    static func discardingIfBroken<T>(
        _ connection: PostgresConnection, _ body: () async throws -> T
    ) async throws -> T {
        do {
            return try await body()
        } catch {
            await discardIfBroken(connection, after: error)
            throw error
        }
    }

    /// Closes `connection` when `error` says that it cannot serve the retry:
    ///
    /// - its server is read-only (SQLSTATE 25006: a standby, or a primary demoted in a failover). The
    ///   pool then opens a new connection for the retry, which the address may now take to the new
    ///   primary; kept, the connection would reach the same standby on every retry;
    /// - the session is gone or going (``PostgresFailure/unreachable``: the server ended it, or it left
    ///   a statement unanswered). The server reports the end of a session (57P01) before the
    ///   connection's close is read; given back to the pool meanwhile, the connection's next borrower
    ///   could send a statement that no answer ever comes for (see ``PostgresConnection/liveQuery(_:logger:)``).
    static func discardIfBroken(_ connection: PostgresConnection, after error: any Error) async {
        let readOnly = (error as? PSQLError)?.serverInfo?[.sqlState] == "25006"
        guard readOnly || PostgresFailure.classify(error) == .unreachable else { return }
        try? await connection.close()
    }

    /// Returns once the server has answered a request sent after the last statement on `connection`
    /// (`SELECT 1`: one more round trip, no work) — so that statement's implicit transaction has been
    /// committed — and throws as a lost connection does otherwise.
    static func confirmCommitted(on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.liveQuery("SELECT 1", logger: logger).collect()
    }

    /// `retrying(configuration:logger:_:deadline:_:)` with this store's settings, refused once the store is closed.
    func retrying<T: Sendable>(_ label: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await waitUntilOpen()
        return try await Self.retrying(configuration: configuration, logger: logger, label, body)
    }

    /// Runs `body`, again after a deadlock, a serialization failure or a lock timeout, and with backoff
    /// (50 ms doubling to 2 s) while the server cannot be reached, for up to `deadline` (the configured
    /// ``PostgresStoreConfiguration/reconnectDeadline`` unless given).
    static func retrying<T: Sendable>(
        configuration: PostgresStoreConfiguration, logger: Logger, _ label: String, deadline: Duration? = nil,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let deadline = deadline ?? configuration.reconnectDeadline
        let start = ContinuousClock.now
        var wait = Duration.milliseconds(50)
        while true {
            do {
                return try await PostgresTimeout.run(configuration.operationTimeout, body)
            } catch let error as PostgresStoreError {
                throw error
            } catch let error as DurableError {
                throw error
            } catch let error as ApplicationWritesError {
                throw error  // the application's own, from a completion transaction: never retried here
            } catch let error as PSQLError where error.code == .poolClosed {
                // The store's pool was shut down by `close()` while the call was under way.
                throw PostgresStoreError.closed
            } catch {
                let kind = PostgresFailure.classify(error)
                let elapsed = ContinuousClock.now - start
                switch kind {
                case .conflict where elapsed < deadline:
                    continue
                case .unreachable where elapsed < deadline:
                    logger.notice(
                        "PostgreSQL unreachable; retrying",
                        metadata: ["operation": "\(label)", "error": "\(PostgresFailure.describe(error))"])
                    try await Task.sleep(for: wait)
                    wait = min(wait * 2, .seconds(2))
                default:
                    if error is CancellationError { throw error }
                    throw DurableError(
                        code: .storeFailure,
                        message: "PostgreSQL failed during \(label): \(PostgresFailure.describe(error))"
                            + (kind == .unreachable
                                ? " (gave up after \(deadline); is the server running?)" : ""),
                        underlying: error)
                }
            }
        }
    }

    /// Runs one statement on the store's database — with the store's schema first on the search path,
    /// and the store's retries and timeouts — for an application's own tables beside the store's
    /// (the chaos harness keeps its side log this way).
    @discardableResult
    public func query(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await statement("query", query)
    }

    /// Tells every listening process (and this one) that work may have become claimable.
    func notifySQL() -> String { "pg_notify('\(channel)', '')" }

    /// The time the statements take for "now", or nil: the server's clock decides
    /// (`coalesce($now, …now())` in the statements), unless a test gave the store a clock of its own.
    var nowOverride: Double? { clock.isSystem ? nil : clock.now().storeTime }

    /// "Now" in the transaction on `connection`, in seconds since 1970: the server's clock (the time its
    /// transaction began), or the store's own clock when a test gave it one (``nowOverride``).
    func serverTime(on connection: PostgresConnection) async throws -> Double {
        try await connection.liveQuery(
            "SELECT coalesce(\(nowOverride)::float8, extract(epoch FROM now())::float8)", logger: logger
        ).collect().first?.decode(Double.self) ?? 0
    }
}

/// The text of a prepared statement: its SQL, with `$1`, `$2`, … for the values, and a name that
/// changes whenever the SQL does (connections keep prepared statements by name).
protocol PreparedText {
    static var name: String { get }
    static var sql: String { get }
}

/// Every statement the store sends goes through one of these two, which refuse a connection that has
/// closed instead of writing to it. (A submission in an application's own transaction sends its
/// statements with postgres-nio's `query`, so that the application sees postgres-nio's errors as it
/// does for its own statements on that connection.)
///
/// postgres-nio (1.33) writes a statement to its channel without a promise for the write. When the
/// channel has closed by the time the write reaches the event loop (the server ended the session
/// between two statements of one call: a terminated backend, a failover, an idle timeout), the write
/// finds no handler, and the statement's answer never comes — its fix upstream (#487) was reverted
/// (#501). The call then waited for the operation timeout, 10 s by default, with its worker's report
/// or claim behind it.
///
/// So the look at the connection and the write happen in one turn of the connection's event loop,
/// the thread that closes the channel: the statement is started from a task that prefers that event
/// loop as its executor (``EventLoopTaskExecutor``), and postgres-nio writes at once when it is called
/// on the event loop. Either the channel was open at the look, and the statement reaches the
/// connection's handler, which answers it or fails it when the connection ends; or it had closed, and
/// the call fails with ``ConnectionClosed``, retried on another connection as after any dropped
/// connection. Nothing the server answered is thrown away: a statement whose answer came is done
/// before the next one is looked at.
extension PostgresConnection {
    /// The connection closed before the statement could be sent.
    struct ConnectionClosed: Error, CustomStringConvertible {
        var description: String { "the connection had closed (the statement was not sent)" }
    }

    /// Runs `send` on this connection's event loop after a look at the connection, with no other work of
    /// the event loop between the look and `send`'s first step (see above): ``ConnectionClosed`` at once
    /// when the connection has closed.
    func whileOpen<T>(_ send: () async throws -> T) async throws -> T {
        guard #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) else {
            // No task executors before these systems: the look and the write are apart, as before.
            guard !isClosed else { throw ConnectionClosed() }
            return try await send()
        }
        return try await withTaskExecutorPreference(EventLoopTaskExecutor(eventLoop)) {
            // The closure starts on the preferred executor because a nonisolated async closure hops to it
            // (it would not under `NonisolatedNonsendingByDefault`: then the look would be off the loop).
            assert(
                eventLoop.inEventLoop, "a statement's look at its connection must run on the connection's event loop")
            guard !isClosed else { throw ConnectionClosed() }
            return try await send()
        }
    }

    /// `query(_:logger:)`, or ``ConnectionClosed`` at once when the connection has closed. A statement
    /// the server answered is progress of the operation under way (``PostgresTimeout/progressed()``):
    /// the operation timeout bounds how long one request waits for its answer, not how many requests a
    /// transaction sends.
    @discardableResult
    func liveQuery(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        let rows = try await whileOpen { try await self.query(query, logger: logger) }
        PostgresTimeout.progressed()
        return rows
    }

    /// Runs a prepared statement and returns all its rows (``ConnectionClosed`` at once when the
    /// connection has closed).
    func rows<Text: PreparedText>(of statement: Prepared<Text>, logger: Logger) async throws -> [PostgresRow] {
        let sequence = try await whileOpen { try await execute(statement, logger: logger) }
        var rows: [PostgresRow] = []
        for try await row in sequence { rows.append(row) }
        PostgresTimeout.progressed()
        return rows
    }
}

/// Runs a task's work on one NIO event loop, for `withTaskExecutorPreference`: code that prefers it
/// runs on the event loop's thread, so what it asks of a channel of that loop happens at once, in
/// order with the channel's own events.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// A statement of `Text` with its values, in the order of its placeholders.
struct Prepared<Text: PreparedText>: PostgresPreparedStatement {
    typealias Row = PostgresRow
    static var name: String { Text.name }
    static var sql: String { Text.sql }
    var bindings: PostgresBindings
    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

/// Faults injected by the tests: "the server committed, but the reply was lost" for the next call
/// of an operation (by its label: "submit", "finish", …), which the store then retries as it would
/// after a dropped connection. Nothing is armed outside the tests.
final class PostgresFaults: Sendable {
    private let armed = Protected([String: Int]())

    /// The next `times` calls of `label` lose their reply after committing.
    func loseReply(of label: String, times: Int = 1) {
        armed.withLock { $0[label, default: 0] += times }
    }

    /// Throws as a lost connection would when a fault is armed for `label`.
    func afterCommit(_ label: String) throws {
        let fire = armed.withLock { armed -> Bool in
            guard let left = armed[label], left > 0 else { return false }
            armed[label] = left - 1
            return true
        }
        if fire { throw PostgresTimeout() }
    }
}

/// How a PostgreSQL error should be handled.
enum PostgresFailure: Equatable {
    /// A deadlock or serialization failure: run the transaction again.
    case conflict
    /// The connection or the server went away: retry with backoff.
    case unreachable
    /// Anything else: report it.
    case other

    static func classify(_ error: any Error) -> PostgresFailure {
        if error is PostgresTimeout || error is PostgresConnection.ConnectionClosed { return .unreachable }
        guard let error = error as? PSQLError else { return .other }
        switch error.code {
        case .server:
            let state = error.serverInfo?[.sqlState] ?? ""
            // 40001 serialization failure, 40P01 deadlock, 55P03 lock not available (`lock_timeout`: a
            // session held a row or lock the statement needed for longer; run it again).
            if state == "40001" || state == "40P01" || state == "55P03" { return .conflict }
            // 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now, 08xxx connection
            // exceptions, 53300 too many connections (others' connections end), 25006 read-only
            // transaction (a standby answered during a failover; the address soon reaches the primary).
            if state.hasPrefix("57P") || state.hasPrefix("08") || state == "53300" || state == "25006" {
                return .unreachable
            }
            return .other
        case .connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection:
            return .unreachable
        default:
            return .other
        }
    }

    static func describe(_ error: any Error) -> String {
        if error is PostgresTimeout { return "no answer within the operation timeout" }
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] {
            return "\(message) (SQLSTATE \(error.serverInfo?[.sqlState] ?? "?"))"
        }
        return "\(error.code)" + (error.underlying.map { ": \($0)" } ?? "")
    }
}

extension Date {
    /// Seconds since 1970, as the store keeps times.
    var storeTime: Double { timeIntervalSince1970 }
    init(storeTime: Double) { self.init(timeIntervalSince1970: storeTime) }
}

extension Duration {
    /// Whole milliseconds, at least 1 (for the server's settings).
    var milliseconds: Int64 { max(1, Int64((seconds * 1000).rounded())) }
}

/// A limit on one attempt of an operation. A request that the server will never answer — seen when a
/// connection was being opened as the server restarted — is abandoned (cancelled, not awaited) and
/// the operation retried on a new connection.
struct PostgresTimeout: Error {
    /// Where one `run(_:_:)` is: nobody waits and no result yet, the caller waits, the result waits
    /// for the caller, or the caller was given its result.
    enum Settling<T: Sendable>: Sendable {
        case waiting
        case parked(CheckedContinuation<T, any Error>)
        case settled(Result<T, any Error>)
        case done
    }

    /// How many steps the operation under way in this task has reported (`progressed()`), or nil
    /// outside `run(_:_:)`.
    @TaskLocal static var steps: Protected<Int>?

    /// Reports that the operation under way made progress: a statement of a long transaction (a cascade
    /// through thousands of dependents, an addition of 10,000 jobs) was answered by the server, or rows of
    /// a long answer arrived. Every statement reports its answer (`liveQuery`, `rows(of:)`). The limit
    /// then starts over: it is the longest the server may leave a request unanswered, not the longest
    /// an operation may take.
    /// A cascade of 10,000 jobs took longer than the limit, was abandoned — still running on the
    /// server, holding its connection and its locks — and retried, and each retry waited for the
    /// abandoned ones' locks until it was abandoned in turn.
    static func progressed() {
        steps?.withLock { $0 &+= 1 }
    }

    /// Runs `body`, abandoning it (cancelled, not awaited) and throwing a `PostgresTimeout` when it
    /// has neither finished nor reported progress (`progressed()`) within `limit` on `clock` (a test's
    /// manual clock, or the continuous clock).
    static func run<T: Sendable, C: Clock<Duration>>(
        _ limit: Duration, clock: C = ContinuousClock(), _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T where C: Sendable {
        // One state under one lock: the result and the waiting caller were kept under two locks, and a
        // result that arrived while the caller was between its two looks was stored after the caller's
        // second look — the caller then waited for the timer and reported a timeout.
        let state = Protected(Settling<T>.waiting)
        @Sendable func settle(_ value: Result<T, any Error>) {
            let continuation = state.withLock { state -> CheckedContinuation<T, any Error>? in
                switch state {
                case .waiting:
                    state = .settled(value)
                    return nil
                case .parked(let continuation):
                    state = .done
                    return continuation
                case .settled, .done:
                    return nil
                }
            }
            continuation?.resume(with: value)
        }
        let steps = Protected(0)
        let work = Task {
            await $steps.withValue(steps) {
                let value: Result<T, any Error>
                do { value = .success(try await body()) } catch { value = .failure(error) }
                settle(value)
            }
        }
        let timer = Task {
            var seen = 0
            while true {
                try? await clock.sleep(for: limit)
                let now = steps.withLock { $0 }
                if Task.isCancelled || now == seen { break }
                seen = now
            }
            if !Task.isCancelled {
                // Settled before the work is cancelled: the cancelled request's own error (the pool's
                // `requestCancelled`, not retried) used to win the race now and then, and the call then
                // failed instead of being retried (a commit-window test, opening its store on a loaded
                // machine, failed so in CI).
                settle(.failure(PostgresTimeout()))
                work.cancel()
            }
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let early = state.withLock { state -> Result<T, any Error>? in
                    if case .settled(let value) = state {
                        state = .done
                        return value
                    }
                    state = .parked(continuation)
                    return nil
                }
                if let early { continuation.resume(with: early) }
            }
        } onCancel: {
            work.cancel()
        }
    }
}

/// Runs a ``PostgresJobStore`` for the length of `body`: its connection pools and `LISTEN` connection
/// run as child tasks of this call (structured, as postgres-nio asks), the tables are created or
/// migrated before `body` begins, and the store is closed when it ends.
///
/// ```swift
/// try await withPostgresJobStore(url: "postgres://app@db.internal/app") { store in
///     try await DurableWorker(store: store, jobs: [FetchFeed(), ParseFeed()]).run()
/// }
/// ```
///
/// In a `ServiceGroup`, run the store itself as a service instead (``PostgresJobStore/run()``).
public func withPostgresJobStore<Result: Sendable>(
    configuration: PostgresStoreConfiguration, clock: DurableClock = .system,
    logger: Logger = Logger(label: "baton.postgres"), _ body: (PostgresJobStore) async throws -> Result
) async throws -> Result {
    let store = try PostgresJobStore(configuration: configuration, clock: clock, logger: logger)
    return try await withThrowingTaskGroup(of: Void.self, returning: Result.self) { group in
        group.addTask { try await store.run() }
        let result: Swift.Result<Result, any Error>
        do {
            try await store.waitUntilOpen()
            result = .success(try await body(store))
        } catch {
            result = .failure(error)
        }
        store.close()
        // The store's own failure (it could not open) is the one to report.
        do { try await group.waitForAll() } catch { if case .failure = result { throw error } }
        return try result.get()
    }
}

/// ``withPostgresJobStore(configuration:clock:logger:_:)`` for a
/// `postgres://user[:password]@host[:port]/database` address.
public func withPostgresJobStore<Result: Sendable>(
    url: String, schema: String = "baton", clock: DurableClock = .system,
    logger: Logger = Logger(label: "baton.postgres"), _ body: (PostgresJobStore) async throws -> Result
) async throws -> Result {
    try await withPostgresJobStore(
        configuration: PostgresStoreConfiguration(url: url, schema: schema), clock: clock, logger: logger, body)
}
