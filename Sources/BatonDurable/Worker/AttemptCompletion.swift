import Baton
package import Foundation

/// An attempt's completion in a transaction of its job's own (`DurableJobContext.complete(returning:writes:)`):
/// the worker's store and the attempt's lease, and whether the success was committed there — in which
/// case the worker reports nothing more for the attempt.
///
/// One small machine behind one lock: `open` → `committing` → `committed` or back to `open` (the
/// transaction failed and may be tried again) or `refused` (the lease had ended: the attempt's
/// writes were rolled back, and nothing of it will be recorded).
///
/// ## Thread safety
/// All methods may be called from any thread.
package final class AttemptCompletion: Sendable {
    package enum State: Sendable, Equatable {
        case open, committing, committed, refused

        /// The job's own transaction is under way or committed: the worker neither renews the lease nor
        /// stops the attempt for it (the completion ends the lease, or says it had ended).
        package var isRecording: Bool { self == .committing || self == .committed }
    }

    package let store: any JobStore
    package let lease: Lease
    let jobName: String
    private let state = Protected(State.open)

    init(store: any JobStore, lease: Lease, jobName: String) {
        self.store = store
        self.lease = lease
        self.jobName = jobName
    }

    package var current: State { state.current }

    /// Moves to `committing`; throws when a completion already began, succeeded or was refused.
    package func begin() throws {
        let previous = state.withLock { state -> State in
            defer { if state == .open { state = .committing } }
            return state
        }
        switch previous {
        case .open: return
        case .committing, .committed:
            throw DurableError(
                code: .misuse, jobs: [jobName],
                message:
                    "job '\(jobName)' called complete(returning:writes:) twice: an attempt completes once. Make one call with all of its writes, and return its result."
            )
        case .refused:
            throw Self.lost(jobName)
        }
    }

    /// Ends the transaction begun by ``begin()``: `true` committed, `false` refused (the lease had
    /// ended), `nil` failed (rolled back; the attempt may try again or throw).
    package func end(_ committed: Bool?) {
        state.withLock { state in
            switch committed {
            case true?: state = .committed
            case false?: state = .refused
            case nil: state = .open
            }
        }
    }

    /// The error of a completion the store refused.
    package static func lost(_ name: String) -> DurableError {
        DurableError(
            code: .leaseLost, jobs: [name],
            message:
                "the lease of job '\(name)' had ended before its completion was committed (it expired, or the job was cancelled or finished by another attempt); the transaction was rolled back, writes included"
        )
    }

    /// The error of a context that belongs to no attempt of a worker.
    static func noAttempt(_ name: String) -> DurableError {
        DurableError(
            code: .misuse, jobs: [name],
            message:
                "complete(returning:writes:) needs the context of an attempt run by a DurableWorker; this one was made by hand (DurableJobContext.init), so there is no lease to complete"
        )
    }

    /// Runs `body` (the store's transaction) between ``begin()`` and ``end(_:)`` and returns `output`.
    package func complete<Output>(
        _ output: Output, _ body: () async throws -> Bool
    ) async throws -> Output {
        try begin()
        let committed: Bool
        do {
            committed = try await body()
        } catch {
            end(nil)
            throw error
        }
        end(committed)
        guard committed else { throw Self.lost(jobName) }
        return output
    }
}

/// What the application's writes threw inside a store's completion transaction, carried through the
/// store's own error handling so that the job sees its own error.
package struct ApplicationWritesError: Error {
    package let error: any Error
    package init(_ error: any Error) { self.error = error }
}

extension DurableJobContext {
    /// The body of each store's `complete(returning:writes:)`: this attempt's completion, refused with
    /// ``DurableError/Code/misuse`` when the worker's store is not a `Store` (`storeName` says which the
    /// job asked for), then `record` — the store's transaction, given the store, the lease and the
    /// encoded output — between the completion's `begin()` and `end(_:)`.
    package func complete<Store: JobStore, Output: Encodable & Sendable>(
        returning output: Output, on _: Store.Type, storeName: String,
        _ record: (Store, Lease, Data) async throws -> Bool
    ) async throws -> Output {
        let completion = try attemptCompletion()
        guard let store = completion.store as? Store else {
            throw DurableError(
                code: .misuse, jobs: [name],
                message:
                    "job '\(name)' asked for a \(storeName) completion transaction, but its worker's store is \(type(of: completion.store)). Use the form of complete(returning:writes:) for that store."
            )
        }
        let data = try DurableCoding.encode(output)
        return try await completion.complete(output) { try await record(store, completion.lease, data) }
    }
}
