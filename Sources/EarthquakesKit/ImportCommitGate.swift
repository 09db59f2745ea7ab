import Baton

/// Decides, once, whether an import commits or rolls back when a cancel (Ctrl-C) races with its end.
///
/// ```swift
/// let gate = ImportCommitGate()
/// // elsewhere, on Ctrl-C:
/// switch gate.cancel() {
/// case .willRollBack: print("Cancelled; the database was not changed.")
/// case .tooLate: print("The import had already committed.")
/// }
/// try store.importFeed(feed, commitGate: gate)   // throws CancellationError after rolling back
/// ```
///
/// An import given a gate checks ``isCancelled`` as it goes, and asks ``beginCommit()`` just before its
/// `COMMIT`: once the gate has said yes there, a cancel is too late (``CancelResult/tooLate``) and the
/// import's rows are in; before, a cancel makes the import roll back. So whoever cancels always knows
/// which of the two happened, and can say so.
///
/// ``whenSettled(_:)`` runs code once the outcome is known: at once, unless a `COMMIT` is under way
/// (then when it returns). A second Ctrl-C, which ends the process at once, uses it so that it never
/// ends the process in the middle of a commit, and can say whether the data is in.
///
/// ## Thread safety
/// `Sendable`: one lock guards one state machine (a struct with one method per event); the closures given to
/// ``whenSettled(_:)`` run after the lock is released.
public final class ImportCommitGate: Sendable {
    /// What a cancel request achieved.
    public enum CancelResult: Sendable, Equatable {
        /// The import has not begun to commit: it rolls back (or never starts).
        case willRollBack
        /// The import began its commit before the request: its rows are (or are about to be) in.
        case tooLate
    }

    /// How an import ended, for ``whenSettled(_:)``.
    public enum Settlement: Sendable, Equatable {
        /// The import committed.
        case committed
        /// The import has not committed and will not: it was cancelled, failed, or is still running
        /// (and rolls back if the process ends now).
        case notCommitted
    }

    private let machine = Protected(Machine())

    /// A gate for one import.
    public init() {}

    /// Asks the import to roll back.
    ///
    /// - Returns: ``CancelResult/willRollBack`` when the import has not begun to commit (it throws
    ///   `CancellationError` after rolling back, or does not start), ``CancelResult/tooLate`` when it has.
    @discardableResult
    public func cancel() -> CancelResult {
        machine.withLock { $0.cancel() }
    }

    /// Whether a cancel request arrived before the commit began: the import must roll back.
    public var isCancelled: Bool {
        machine.withLock { $0.isCancelled }
    }

    /// Whether the import committed.
    public var hasCommitted: Bool {
        machine.withLock { $0.hasCommitted }
    }

    /// Called by the import just before its `COMMIT`. `false` when a cancel came first: then it rolls
    /// back instead. After `true`, call ``endCommit(succeeded:)`` once the `COMMIT` returned.
    public func beginCommit() -> Bool {
        machine.withLock { $0.beginCommit() }
    }

    /// Called by the import once its `COMMIT` returned (or failed). Runs the closures that waited.
    public func endCommit(succeeded: Bool) {
        let waiting = machine.withLock { $0.endCommit(succeeded: succeeded) }
        let settlement: Settlement = succeeded ? .committed : .notCommitted
        for body in waiting { body(settlement) }
    }

    /// Runs `body` with the import's outcome as soon as it is known: at once (on the calling thread)
    /// unless a `COMMIT` is under way, and then on the importing thread when it returns.
    public func whenSettled(_ body: @escaping @Sendable (Settlement) -> Void) {
        let now = machine.withLock { $0.whenSettled(body) }
        if let now { body(now) }
    }

    /// The state machine of a gate, without threads (tested on its own).
    struct Machine {
        /// Where the import is.
        enum State {
            /// Running (or not started); a cancel makes it roll back.
            case open
            /// A cancel came before the commit began.
            case cancelled
            /// The `COMMIT` is under way; closures wait for its end.
            case committing(waiting: [@Sendable (Settlement) -> Void])
            /// The `COMMIT` returned: `committed` says whether it succeeded.
            case ended(committed: Bool)
        }

        private(set) var state = State.open

        var isCancelled: Bool {
            if case .cancelled = state { true } else { false }
        }

        var hasCommitted: Bool {
            if case .ended(committed: true) = state { true } else { false }
        }

        mutating func cancel() -> CancelResult {
            switch state {
            case .open, .cancelled:
                state = .cancelled
                return .willRollBack
            case .committing, .ended(committed: true):
                return .tooLate
            case .ended(committed: false):
                return .willRollBack
            }
        }

        mutating func beginCommit() -> Bool {
            switch state {
            case .open:
                state = .committing(waiting: [])
                return true
            case .cancelled, .ended(committed: false):
                return false
            case .committing, .ended(committed: true):
                preconditionFailure("an import began to commit twice through one ImportCommitGate")
            }
        }

        /// The closures to run now that the commit ended.
        mutating func endCommit(succeeded: Bool) -> [@Sendable (Settlement) -> Void] {
            guard case .committing(let waiting) = state else {
                preconditionFailure("ImportCommitGate.endCommit(succeeded:) without beginCommit()")
            }
            state = .ended(committed: succeeded)
            return waiting
        }

        /// The outcome to give `body` now, or `nil` when it waits for the commit's end.
        mutating func whenSettled(_ body: @escaping @Sendable (Settlement) -> Void) -> Settlement? {
            switch state {
            case .open, .cancelled, .ended(committed: false): return .notCommitted
            case .ended(committed: true): return .committed
            case .committing(var waiting):
                waiting.append(body)
                state = .committing(waiting: waiting)
                return nil
            }
        }
    }
}
