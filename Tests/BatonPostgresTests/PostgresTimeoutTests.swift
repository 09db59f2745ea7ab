import Baton
import BatonTesting
import Foundation
import Testing

@testable import BatonPostgres

/// The limit on one attempt of an operation (``PostgresTimeout``), without a server.
@Suite("PostgreSQL operation timeout")
struct PostgresTimeoutTests {
    struct Abandoned: Error {}

    /// A request that never answers and, when cancelled, fails at once with an error of its own (as the
    /// pool's does: `requestCancelled`). Its cancellation handler then holds the cancelling thread for a
    /// moment, so that its error is thrown, on another thread, before the canceller goes on: the
    /// interleaving in which the request's error won before the fix.
    static func abandonedRequest() async throws -> Int {
        enum Step { case waiting, parked(CheckedContinuation<Void, any Error>), cancelled }
        let step = Protected(Step.waiting)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let cancelled = step.withLock { step -> Bool in
                    if case .cancelled = step { return true }
                    step = .parked(continuation)
                    return false
                }
                if cancelled { continuation.resume(throwing: Abandoned()) }
            }
        } onCancel: {
            let parked = step.withLock { step -> CheckedContinuation<Void, any Error>? in
                defer { step = .cancelled }
                if case .parked(let continuation) = step { return continuation }
                return nil
            }
            parked?.resume(throwing: Abandoned())
            // Not a wait for a result: it only gives the request's thread the lead, to provoke the race.
            usleep(50_000)
        }
        return 0
    }

    @Test(
        "a request abandoned at its limit fails as a timeout (which the store retries), never with the error its cancellation raised"
    )
    func timeoutWinsOverTheCancelledRequestsError() async throws {
        var others: [String] = []
        for _ in 0..<20 {
            do {
                _ = try await PostgresTimeout.run(.milliseconds(1)) { try await Self.abandonedRequest() }
                Issue.record("a request that never answers returned")
            } catch is PostgresTimeout {
            } catch {
                others.append("\(error)")
            }
        }
        #expect(others.isEmpty, "\(others.count) of 20 abandoned requests failed with their own error")
        #expect(PostgresFailure.classify(PostgresTimeout()) == .unreachable, "a timeout is retried")
    }

    @Test(
        "an operation that reports progress outlives its limit many times over; once it stops, it is abandoned one limit later"
    )
    func progressStartsTheLimitOver() async throws {
        let clock = ManualClock()
        let (steps, stepper) = AsyncStream.makeStream(of: Void.self)
        let (reports, reporter) = AsyncStream.makeStream(of: Int.self)
        let operation = Task {
            try await PostgresTimeout.run(.seconds(1), clock: clock) {
                var count = 0
                for await _ in steps {
                    PostgresTimeout.progressed()
                    count += 1
                    reporter.yield(count)
                }
                return count
            }
        }
        var reported = reports.makeAsyncIterator()
        for step in 1...3 {
            await clock.waitForSleepers(1)
            stepper.yield()
            #expect(await reported.next() == step)
            // A whole limit passes; the step made within it keeps the operation going.
            clock.advance(by: .seconds(1))
        }
        // Three limits have passed. Now a limit passes with no step: the operation is abandoned.
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(1))
        await #expect(throws: PostgresTimeout.self) { _ = try await operation.value }
        stepper.finish()
    }

    @Test("a request that answers in time returns its answer, and its own error is passed on")
    func answersInTime() async throws {
        #expect(try await PostgresTimeout.run(.seconds(30)) { 7 } == 7)
        await #expect(throws: Abandoned.self) {
            _ = try await PostgresTimeout.run(.seconds(30)) { () async throws -> Int in throw Abandoned() }
        }
    }
}
