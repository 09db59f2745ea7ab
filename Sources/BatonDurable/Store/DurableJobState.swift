/// Where a durable job is in its life. Stored as its raw value.
///
/// ```
/// pending ──(all dependencies finished)──▶ ready ──(claimed)──▶ running ──▶ succeeded
///                                            ▲                    │   ├──▶ failed
///                                            └─(retry, lease lost,─┘   └──▶ cancelled
///                                               released)
/// ```
/// A pending or ready job may also become cancelled (its run or it was cancelled, or a dependency
/// failed or was cancelled and the edge is not marked to run regardless).
public enum DurableJobState: String, Codable, Sendable, CaseIterable, CustomStringConvertible {
    /// Waiting for dependencies to finish.
    case pending
    /// May be claimed once `notBefore` has passed and its categories have room.
    case ready
    /// Claimed by a worker holding a lease.
    case running
    /// Finished with an output. Final.
    case succeeded
    /// Finished with an error after its last attempt. Final.
    case failed
    /// Cancelled, or never ran because a dependency did not succeed. Final.
    case cancelled

    /// Whether the state is final (succeeded, failed or cancelled).
    public var isFinished: Bool {
        switch self {
        case .succeeded, .failed, .cancelled: true
        case .pending, .ready, .running: false
        }
    }

    public var description: String { rawValue }
}
