import Baton
import BatonDurable

/// Where a ``PostgresJobStore`` is in its life, behind one lock: made (``PostgresJobStore/run()`` not
/// begun), opening (its pools run; the schema is being checked and migrated), open, failed to open, or
/// closed. Calls wait until the store is open; `run()` waits, once open, until it is closed.
///
/// Transitions: `idle → opening → open → closed`, `opening → failed`, and `closed` from any state.
/// Continuations are resumed after the lock is released.
struct PostgresStoreLifecycle {
    enum State {
        case idle
        case opening
        case open
        case failed(any Error)
        case closed
    }

    /// What an event asks the store to do once the lock is released.
    struct Wake {
        var waiters: [CheckedContinuation<Void, any Error>] = []
        var result: Result<Void, any Error> = .success(())
        var stop: CheckedContinuation<Void, Never>?

        func perform() {
            for waiter in waiters { waiter.resume(with: result) }
            stop?.resume()
        }
    }

    private(set) var state = State.idle
    private var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    private var nextWaiter: UInt64 = 0
    /// `run()` waiting for the close.
    private var stop: CheckedContinuation<Void, Never>?

    /// `run()` begins; throws when it ran before (a store runs once) or the store is closed.
    mutating func begin() throws {
        switch state {
        case .idle: state = .opening
        case .closed: throw PostgresStoreError.closed
        case .opening, .open, .failed:
            throw PostgresStoreError.badConfiguration(
                "PostgresJobStore.run() was called twice; a store runs once (make another store to run again)")
        }
    }

    mutating func opened() -> Wake {
        guard case .opening = state else { return Wake() }
        state = .open
        return Wake(waiters: takeWaiters())
    }

    mutating func failed(_ error: any Error) -> Wake {
        guard case .opening = state else { return Wake() }
        state = .failed(error)
        return Wake(waiters: takeWaiters(), result: .failure(error))
    }

    mutating func close() -> Wake {
        if case .closed = state { return Wake() }
        state = .closed
        defer { stop = nil }
        return Wake(waiters: takeWaiters(), result: .failure(PostgresStoreError.closed), stop: stop)
    }

    /// A call waits (as `number`) until the store is open; the result at once when it need not.
    mutating func enter(
        _ waiter: CheckedContinuation<Void, any Error>, as number: UInt64
    ) -> Result<Void, any Error>? {
        switch state {
        case .open: return .success(())
        case .failed(let error): return .failure(error)
        case .closed: return .failure(PostgresStoreError.closed)
        case .idle, .opening:
            waiters[number] = waiter
            return nil
        }
    }

    /// A number for the next waiter.
    mutating func newWaiter() -> UInt64 {
        nextWaiter &+= 1
        return nextWaiter
    }

    /// The waiter `number` gives up (cancelled, or `run()` never began): removed, to be resumed by the
    /// caller with `error` — unless `onlyIfIdle` and `run()` has begun meanwhile.
    mutating func giveUp(_ number: UInt64, onlyIfIdle: Bool) -> CheckedContinuation<Void, any Error>? {
        if onlyIfIdle, case .idle = state {} else if onlyIfIdle { return nil }
        return waiters.removeValue(forKey: number)
    }

    /// `run()` parks until the close; returns false when the store is closed already.
    mutating func park(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
        if case .closed = state { return false }
        stop = continuation
        return true
    }

    var isOpen: Bool {
        if case .open = state { return true }
        return false
    }

    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    private mutating func takeWaiters() -> [CheckedContinuation<Void, any Error>] {
        defer { waiters = [:] }
        return Array(waiters.values)
    }
}
