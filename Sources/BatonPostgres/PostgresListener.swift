import Baton
import BatonDurable
import Logging
import NIOPosix
import PostgresNIO

/// The `LISTEN` side of wake-ups: one connection of its own, reconnected with backoff when it drops;
/// while it is down the hub is woken every `fallbackPollInterval` instead (polling), and once more
/// right after it is back (a notification may have been missed meanwhile). Every notification wakes
/// the hub: a notification only wakes, the workers then claim.
final class PostgresListener: Sendable {
    let configuration: PostgresStoreConfiguration
    let channel: String
    let hub: WakeupHub
    let logger: Logger
    private let state = Protected(State())
    private struct State {
        var listening = false
    }

    init(configuration: PostgresStoreConfiguration, channel: String, hub: WakeupHub, logger: Logger) {
        self.configuration = configuration
        self.channel = channel
        self.hub = hub
        self.logger = logger
    }

    var isListening: Bool { state.withLock { $0.listening } }

    private func setListening(_ value: Bool) {
        state.withLock { $0.listening = value }
    }

    /// Listens until the task is cancelled, reconnecting with backoff.
    func run() async {
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
                    self.setListening(true)
                    hub.wake()  // Anything that happened while we were not listening.
                    for try await _ in notifications { hub.wake() }
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
