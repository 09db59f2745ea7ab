/// How a job ended. Every job finishes exactly once, with exactly one outcome, and its observers and
/// everyone awaiting it see the same value.
public enum JobOutcome: Sendable, CustomStringConvertible {
    /// The body ran to the end without throwing (a body asked to cancel that completed its work anyway
    /// succeeds too).
    case succeeded
    /// The body threw, a condition failed, or the job was part of a dependency cycle.
    case failed(any Error)
    /// The job was asked to cancel before it finished and stopped: it had not started, or its body
    /// threw `CancellationError`. The associated value is the reason given to ``Job/cancel(reason:)``
    /// (a `CancellationError` when none was given).
    ///
    /// A body that throws `CancellationError` without the job being asked to cancel (something it
    /// awaited was cancelled: a task, a timeout of its own) ends cancelled too, with that error, while
    /// ``Job/isCancelled`` stays `false` and ``Job/onCancel(_:)`` observers are not called.
    case cancelled(any Error)

    /// The failure or cancellation reason, or `nil` for success.
    public var error: (any Error)? {
        switch self {
        case .succeeded: nil
        case .failed(let error), .cancelled(let error): error
        }
    }

    /// Whether the job succeeded.
    public var didSucceed: Bool { if case .succeeded = self { true } else { false } }
    /// Whether the job failed (its body threw, a condition failed, or it was part of a cycle).
    public var didFail: Bool { if case .failed = self { true } else { false } }
    /// Whether the job was cancelled.
    public var isCancelled: Bool { if case .cancelled = self { true } else { false } }

    @available(*, deprecated, renamed: "didSucceed")
    public var isSucceeded: Bool { didSucceed }
    @available(*, deprecated, renamed: "didFail")
    public var isFailed: Bool { didFail }

    /// Throws the failure or cancellation reason; returns for success.
    public func get() throws {
        if let error { throw error }
    }

    public var description: String {
        switch self {
        case .succeeded: "succeeded"
        case .failed(let error): "failed(\(error))"
        case .cancelled(let reason): "cancelled(\(reason))"
        }
    }
}
