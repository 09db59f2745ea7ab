import Baton
import Logging
import NIOPosix
import PostgresNIO

/// Broadcasts wake-ups to the streams handed out by ``PostgresJobStore/wakeups()``; each stream
/// keeps at most one pending wake-up, so a burst of notifications costs one claim.
final class PostgresWakeupHub: Sendable {
    private let streams = Protected(State())

    private struct State {
        var next: UInt64 = 0
        var continuations: [UInt64: AsyncStream<Void>.Continuation] = [:]
        var finished = false
    }

    func stream() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = streams.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            state.next += 1
            state.continuations[state.next] = continuation
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.streams.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func wake() {
        let continuations = streams.withLock { Array($0.continuations.values) }
        for continuation in continuations { continuation.yield() }
    }

    func finishAll() {
        let continuations = streams.withLock { state -> [AsyncStream<Void>.Continuation] in
            state.finished = true
            defer { state.continuations = [:] }
            return Array(state.continuations.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}

/// The `LISTEN` side of wake-ups: one connection of its own, reconnected with backoff when it drops;
/// while it is down the hub is woken every `fallbackPollInterval` instead (polling), and once more
/// right after it is back (a notification may have been missed meanwhile).
///
/// A notification with an empty payload wakes the workers; one that carries a hand-over
/// (``HandoverNote``) goes to `handover`, which delivers it if the offer is this store's.
final class PostgresListener: Sendable {
    let configuration: PostgresStoreConfiguration
    let channel: String
    let hub: PostgresWakeupHub
    let logger: Logger
    let handover: @Sendable (String) -> Void
    private let state = Protected(State())

    /// The server process that listens: offers name it, and submissions use an offer only while it lives.
    struct Backend: Sendable, Equatable {
        let pid: Int32
        /// `backend_start` in seconds since 1970 (nil where the server does not show it to this role).
        let started: Double?
    }

    private struct State {
        var task: Task<Void, Never>?
        var listening = false
        var stopped = false
        /// The listening connection while it listens, and whether a call has it (``lend(_:)``).
        var connection: PostgresConnection?
        var lent = false
        var backend: Backend?
    }

    init(
        configuration: PostgresStoreConfiguration, channel: String, hub: PostgresWakeupHub, logger: Logger,
        handover: @escaping @Sendable (String) -> Void
    ) {
        self.configuration = configuration
        self.channel = channel
        self.hub = hub
        self.logger = logger
        self.handover = handover
    }

    var isListening: Bool { state.withLock { $0.listening } }

    /// The server process listening now (nil while the connection is down).
    var backend: Backend? { state.withLock { $0.listening ? $0.backend : nil } }

    func start() {
        let task = Task { [self] in await self.loop() }
        let extra = state.withLock { state -> Task<Void, Never>? in
            if state.stopped || state.task != nil { return task }
            state.task = task
            return nil
        }
        extra?.cancel()
    }

    func stop() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.stopped = true
            defer { state.task = nil }
            return state.task
        }
        task?.cancel()
    }

    private func setListening(_ value: Bool, connection: PostgresConnection? = nil, backend: Backend? = nil) {
        let previous = state.withLock { state -> PostgresConnection? in
            state.listening = value
            state.backend = value ? backend : nil
            defer { state.connection = value ? connection : nil }
            return state.connection
        }
        _ = previous  // released outside the lock
    }

    /// Runs `body` on the listening connection — when it is listening and no other call has it — and
    /// returns its result; nil when the connection is not available. A failure is thrown; one that
    /// says the connection is lost or stopped answering also closes it (the listener reconnects, and
    /// wakes the workers once it is back).
    ///
    /// For a claim that follows a wake-up: the server process behind this connection has just sent the
    /// notification and is awake, where a pooled connection's has slept since its last call, and on
    /// a virtual machine waking it costs most of a round trip.
    func lend<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T? {
        let connection = state.withLock { state -> PostgresConnection? in
            guard state.listening, !state.lent, let connection = state.connection else { return nil }
            state.lent = true
            return connection
        }
        guard let connection else { return nil }
        defer { state.withLock { $0.lent = false } }
        do {
            return try await body(connection)
        } catch {
            if PostgresFailure.classify(error) == .unreachable { connection.close().whenComplete { _ in } }
            throw error
        }
    }

    private func loop() async {
        var wait = Duration.milliseconds(100)
        while !Task.isCancelled {
            do {
                try await listenOnce { wait = .milliseconds(100) }
            } catch {
                if Task.isCancelled { break }
                logger.notice(
                    "wake-up connection lost; polling until it is back",
                    metadata: ["error": "\(PostgresFailure.describe(error))"])
            }
            setListening(false)
            // Poll while reconnecting: wake the workers every fallbackPollInterval until `wait` has passed.
            let deadline = ContinuousClock.now + wait
            while !Task.isCancelled && ContinuousClock.now < deadline {
                hub.wake()
                try? await Task.sleep(for: min(configuration.fallbackPollInterval, deadline - ContinuousClock.now))
            }
            wait = min(wait * 2, .seconds(5))
        }
        setListening(false)
    }

    /// Connects, listens and forwards notifications until the connection ends.
    private func listenOnce(connected: () -> Void) async throws {
        var connectionConfiguration = PostgresConnection.Configuration(
            host: configuration.host, port: configuration.port, username: configuration.username,
            password: configuration.password, database: configuration.database, tls: .disable)
        connectionConfiguration.options.additionalStartupParameters = [
            ("search_path", configuration.schema), ("application_name", configuration.applicationName),
        ]
        connectionConfiguration.options.connectTimeout = .milliseconds(
            Int64(configuration.connectTimeout.storeSeconds * 1000))
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: connectionConfiguration, id: 1,
            logger: logger
        ).get()
        do {
            let hub = hub
            try await withTaskCancellationHandler {
                // Which server process listens: offers name it (before `LISTEN`, which stays the
                // connection's last statement while it only listens).
                let backend = try await PostgresTimeout.run(configuration.operationTimeout) { [logger] in
                    try await connection.query(
                        """
                        SELECT pg_backend_pid(), extract(epoch FROM backend_start)::float8
                        FROM pg_stat_get_activity(pg_backend_pid())
                        """, logger: logger
                    ).collect().first?.decode((Int32, Double?).self)
                }
                try await connection.listen(on: channel) { notifications in
                    connected()
                    self.setListening(
                        true, connection: connection, backend: backend.map { Backend(pid: $0.0, started: $0.1) })
                    hub.wake()  // Anything that happened while we were not listening.
                    for try await notification in notifications {
                        if notification.payload.isEmpty {
                            hub.wake()
                        } else {
                            self.handover(notification.payload)
                        }
                    }
                }
            } onCancel: {
                connection.close().whenComplete { _ in }
            }
            setListening(false)
            try? await connection.close()
        } catch {
            setListening(false)
            try? await connection.close()
            throw error
        }
    }
}
