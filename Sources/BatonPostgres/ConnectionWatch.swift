import Baton
import NIOCore
import PostgresNIO

/// Ends the store's calls on a connection as soon as that connection closes, instead of at the
/// operation timeout.
///
/// postgres-nio (1.33) drops a statement written to a connection whose channel has just closed: the
/// write reaches no handler, and the statement's answer never comes (its fix upstream, #487, was
/// reverted in #501). A call that ran a second statement on a leased connection at the moment the
/// server ended that connection (a failover, `pg_terminate_backend`, an idle timeout) waited for the
/// whole operation timeout, 10 s by default, with its worker's report or claim behind it. Each call
/// run through ``PostgresClient/withLiveConnection(_:)`` inside `PostgresTimeout.run` is registered
/// here while it holds its connection; when the connection's `closeFuture` completes, the call is
/// abandoned with ``Closed`` (retried as an unreachable server is), as its timer would have done.
///
/// One lock guards one map, from each connection seen (by identity) to the calls holding it now. A
/// connection's first call registers the one `closeFuture` callback that ends them all and removes
/// its entry (a callback per call would pile up on a long-lived connection). Entries exist only for
/// open connections, so the map is as large as the pools. The callbacks run outside the lock.
final class ConnectionWatch: Sendable {
    /// The connection closed while a call held it.
    struct Closed: Error, CustomStringConvertible {
        var description: String { "the connection closed under the call (it is retried on another)" }
    }

    static let shared = ConnectionWatch()

    private struct State {
        var calls: [ObjectIdentifier: [UInt64: @Sendable (any Error) -> Void]] = [:]
        var next: UInt64 = 0
    }
    private let state = Protected(State())

    /// Registers a call holding `connection`, abandoned by `abandon` if the connection closes before
    /// `leave(_:_:)`. Returns the call's number.
    func enter(_ connection: PostgresConnection, abandon: @escaping @Sendable (any Error) -> Void) -> UInt64 {
        let key = ObjectIdentifier(connection)
        let (number, first) = state.withLock { state -> (UInt64, Bool) in
            state.next &+= 1
            let first = state.calls[key] == nil
            state.calls[key, default: [:]][state.next] = abandon
            return (state.next, first)
        }
        if first {
            // Holds the connection until it closes, so that its identity is not reused by another
            // before its entry is removed. (A future already completed runs the callback at once.)
            connection.closeFuture.whenComplete { [connection] _ in self.closed(ObjectIdentifier(connection)) }
        }
        return number
    }

    /// The call numbered `number` let go of `connection`.
    func leave(_ connection: PostgresConnection, _ number: UInt64) {
        let key = ObjectIdentifier(connection)
        state.withLock { state in _ = state.calls[key]?.removeValue(forKey: number) }
    }

    private func closed(_ key: ObjectIdentifier) {
        let calls = state.withLock { $0.calls.removeValue(forKey: key) } ?? [:]
        for abandon in calls.values { abandon(Closed()) }
    }

    /// How many connections are watched (tests).
    var watchedConnections: Int { state.withLock { $0.calls.count } }
}

extension PostgresClient {
    /// `withConnection(_:)`, with the call ended by ``ConnectionWatch/Closed`` as soon as the leased
    /// connection closes (see ``ConnectionWatch``): at once if it is closed already, and from its close
    /// when the call runs inside `PostgresTimeout.run`.
    func withLiveConnection<T: Sendable>(
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            guard !connection.isClosed else { throw ConnectionWatch.Closed() }
            guard let abandon = PostgresTimeout.abandon else { return try await body(connection) }
            let number = ConnectionWatch.shared.enter(connection, abandon: abandon)
            defer { ConnectionWatch.shared.leave(connection, number) }
            return try await body(connection)
        }
    }
}
