import Baton
import BatonTesting
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

@testable import BatonPostgres

/// Statements sent on a connection whose session the server is ending. postgres-nio drops a statement
/// written after its channel closed, and its answer never comes; the store looks at the connection and
/// writes in one turn of the connection's event loop (`PostgresConnection.whileOpen`), so every such
/// statement either reaches the connection (answered, or failed as the connection ends) or is refused
/// with `ConnectionClosed`.
@Suite(
    "PostgreSQL: statements on an ending session", .serialized,
    .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresEndedSessionTests {
    /// Whether a job given to the connection's event loop has run.
    final class Turn: Sendable {
        let ran = Protected(false)
    }

    /// Says whether it runs on `eventLoop` with `turn`'s job not yet run: a nonisolated async function
    /// that hops to its executor on entry (postgres-nio's `execute` and `query` do not even hop: they run
    /// on their caller's executor). The look itself asserts that it runs on the loop.
    nonisolated static func firstStep(on eventLoop: any EventLoop, _ turn: Turn) async -> (Bool, Bool) {
        (eventLoop.inEventLoop, turn.ran.withLock { $0 })
    }

    @Test(
        "a statement's look at its connection and the first step of the call that writes it run on the connection's event loop, with no other work of the loop between them"
    )
    func lookAndWriteAreOneTurn() async throws {
        guard #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) else { return }  // (no task executors)
        let configuration = try TestPostgres.configuration("ended_turn")
        let connection = try await TestPostgres.connect(configuration, id: 1)
        let eventLoop = connection.eventLoop
        for _ in 0..<100 {
            let turn = Turn()
            let (looked, first) = try await connection.whileOpen { () async throws -> (Bool, (Bool, Bool)) in
                let looked = eventLoop.inEventLoop
                // Work given to the loop now runs at its next turn: it must not have run when the
                // call's first step does.
                eventLoop.execute { turn.ran.withLock { $0 = true } }
                return (looked, await Self.firstStep(on: eventLoop, turn))
            }
            #expect(looked, "the look at the connection did not run on its event loop")
            #expect(first.0, "the call that writes the statement did not start on the connection's event loop")
            #expect(!first.1, "the event loop took a turn between the look and the call's first step")
        }
        // Afterwards the caller is back off the event loop.
        #expect(!eventLoop.inEventLoop)
        try await connection.close()
    }

    @Test(
        "statements sent one after another while the server ends their session: each is answered, fails as the session ends, or is refused as the connection has closed; none waits (50 sessions, the time between look and write widened to 0.3 ms)"
    )
    func statementsRacingTheEndOfTheirSession() async throws {
        // Without task executors the look is apart from the write (bounded by the operation timeout).
        guard #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) else { return }
        let configuration = try TestPostgres.configuration("ended_race")
        let killer = try await TestPostgres.connect(configuration, id: 2)
        var failedAsEnding = 0
        for session in 0..<50 {
            let connection = try await TestPostgres.connect(configuration, id: 100 + session)
            let pid = try await connection.liveQuery("SELECT pg_backend_pid()", logger: TestPostgres.logger)
                .collect().first!.decode(Int32.self)
            let failed = Protected(0)
            // The statements go on after the failure of the one under way when the server ends the session
            // (57P01): the next one is sent while postgres-nio is closing the channel, the moment at which
            // a statement used to be dropped.
            try await withDeadline(.seconds(30), "statements on session \(session), ended by the server") {
                let sender = Task {
                    while !Task.isCancelled {
                        do {
                            // The time between the look and the write, widened as a thread preempted
                            // there widens it: a session ended then used to drop the statement.
                            _ = try await connection.whileOpen {
                                usleep(300)
                                return try await connection.query("SELECT 1", logger: TestPostgres.logger)
                            }.collect()
                        } catch is PostgresConnection.ConnectionClosed {
                            return
                        } catch {
                            failed.withLock { $0 += 1 }
                            // The statement under way when the session ended, or one that reached the
                            // closing connection: failed, not lost. Go on until the look refuses one.
                            #expect(
                                PostgresFailure.classify(error) == .unreachable,
                                "session \(session): \(String(reflecting: error))")
                        }
                    }
                }
                try await withTaskCancellationHandler {
                    _ = try await killer.liveQuery(
                        "SELECT pg_terminate_backend(\(pid))", logger: TestPostgres.logger
                    ).collect()
                    await sender.value
                } onCancel: {
                    sender.cancel()
                }
            }
            if failed.withLock({ $0 }) > 0 { failedAsEnding += 1 }
            try? await connection.close()
        }
        try await killer.close()
        // The session's end reached statements under way (failed, not lost) in some of the sessions: the
        // ends fell among the statements, not only between them.
        #expect(failedAsEnding > 0, "no statement was under way when a session ended")
    }
}
