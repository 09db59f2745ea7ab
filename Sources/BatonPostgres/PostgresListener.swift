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
/// right after it is back (a notification may have been missed meanwhile). An empty notification
/// wakes the hub; one with a text (offers and hand-overs between stores, ``RemoteOffer``) goes to the
/// store's handler, which wakes the hub when it means work.
final class PostgresListener: Sendable {
    let configuration: PostgresStoreConfiguration
    let channel: String
    let hub: PostgresWakeupHub
    let logger: Logger
    private let state = Protected(State())
    /// What notifications with a text are given to, and who is told of the listening server process
    /// (nil: none); see ``setHandlers(message:listening:)``. Without handlers every notification wakes
    /// the hub.
    private let handlers = Protected<Handlers?>(nil)

    struct Handlers: Sendable {
        let message: @Sendable (String) -> Void
        let listening: @Sendable ((pid: Int32, started: Int64)?) -> Void
    }

    private struct State {
        var task: Task<Void, Never>?
        var listening = false
        var stopped = false
        /// The listening connection while it listens, and whether a call has it (``lend(_:)``).
        var connection: PostgresConnection?
        var lent = false
    }

    init(configuration: PostgresStoreConfiguration, channel: String, hub: PostgresWakeupHub, logger: Logger) {
        self.configuration = configuration
        self.channel = channel
        self.hub = hub
        self.logger = logger
    }

    var isListening: Bool { state.withLock { $0.listening } }

    /// `message` is given the text of each notification that has one (an empty one wakes the hub);
    /// `listening` is told the server process that listens, once it does, and nil when it stops.
    func setHandlers(
        message: @escaping @Sendable (String) -> Void,
        listening: @escaping @Sendable ((pid: Int32, started: Int64)?) -> Void
    ) {
        let old = handlers.withLock { handlers in
            defer { handlers = Handlers(message: message, listening: listening) }
            return handlers
        }
        _ = old
    }

    private func heard(_ payload: String) {
        if !payload.isEmpty, let handlers = handlers.withLock({ $0 }) {
            handlers.message(payload)
        } else {
            hub.wake()
        }
    }

    private func tell(_ process: (pid: Int32, started: Int64)?) {
        handlers.withLock { $0 }?.listening(process)
    }

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

    private func setListening(_ value: Bool, connection: PostgresConnection? = nil) {
        let previous = state.withLock { state -> PostgresConnection? in
            state.listening = value
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
            tell(nil)
            // Poll while reconnecting: wake the workers every fallbackPollInterval until `wait` has passed.
            let deadline = ContinuousClock.now + wait
            while !Task.isCancelled && ContinuousClock.now < deadline {
                hub.wake()
                try? await Task.sleep(for: min(configuration.fallbackPollInterval, deadline - ContinuousClock.now))
            }
            wait = min(wait * 2, .seconds(5))
        }
        setListening(false)
        tell(nil)
    }

    /// The listening server process and when it started, in microseconds (a process id can be reused).
    static let processQuery: PostgresQuery = """
        SELECT pid, (extract(epoch FROM backend_start) * 1000000)::int8
        FROM pg_stat_get_activity(pg_backend_pid())
        """

    /// Connects, listens and forwards notifications until the connection ends.
    private func listenOnce(connected: () -> Void) async throws {
        let connectionConfiguration = try configuration.connectionConfiguration()
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: connectionConfiguration, id: 1,
            logger: logger
        ).get()
        do {
            let hub = hub
            try await withTaskCancellationHandler {
                try await connection.listen(on: channel) { notifications in
                    connected()
                    // Other stores check that this server process is alive before they hand jobs over
                    // to this store's workers (``RemoteOffer``).
                    let process = try await connection.query(Self.processQuery, logger: logger).collect()
                        .first?.decode((Int32, Int64).self)
                    self.setListening(true, connection: connection)
                    self.tell(process.map { (pid: $0.0, started: $0.1) })
                    hub.wake()  // Anything that happened while we were not listening.
                    for try await notification in notifications { self.heard(notification.payload) }
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
