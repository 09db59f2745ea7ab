/// Where a job is in its life.
///
/// ```
/// initialized ─▶ pending ─▶ evaluatingConditions ─▶ ready ─▶ executing ─▶ finishing ─▶ finished
///      │            │                   │                │                     ▲
///      └────────────┴───────────────────┴────────────────┴─────────────────────┘
///         (cancelled, a failed condition, part of a dependency cycle, or abandoned by its group)
/// ```
///
/// A job that is evaluating its conditions or ready goes back to `pending` when a dependency is added
/// before its body starts.
///
/// - `initialized`: created, not yet added to a queue or started.
/// - `pending`: added to a queue; waiting for its dependencies to finish.
/// - `evaluatingConditions`: dependencies finished; its conditions are being evaluated.
/// - `ready`: waiting for a free slot in its queue (and, with conditions, for its exclusivity categories).
/// - `executing`: its body is running.
/// - `finishing`: its outcome is decided; observers are being told.
/// - `finished`: done. Dependents have been released and its closures dropped.
///
/// Cancellation is a request, not a state: see ``Job/cancel(reason:)``.
public enum JobState: Int, Sendable, CaseIterable, Comparable, CustomStringConvertible {
    case initialized
    case pending
    case evaluatingConditions
    case ready
    case executing
    case finishing
    case finished

    /// The single table of allowed transitions. Debug builds check every state change against it.
    static let allowedTransitions: [JobState: [JobState]] = [
        // .executing: `start()` by hand, without a queue; .ready: joining a queue with nothing to wait for;
        // .finishing: cancelled before, or abandoned by its group.
        .initialized: [.pending, .evaluatingConditions, .ready, .executing, .finishing],
        .pending: [.evaluatingConditions, .ready, .finishing],
        .evaluatingConditions: [.pending, .ready, .finishing],
        .ready: [.pending, .executing, .finishing],
        .executing: [.finishing],
        .finishing: [.finished],
        .finished: [],
    ]

    /// Bit `from * 8 + to` is set when `from → to` is allowed; derived once from the table.
    private static let transitionBits: UInt64 = {
        var bits: UInt64 = 0
        for (from, targets) in allowedTransitions {
            for to in targets { bits |= 1 << UInt64(from.rawValue * 8 + to.rawValue) }
        }
        return bits
    }()

    /// Whether the table allows going from `self` to `next`.
    @inline(__always)
    func canTransition(to next: JobState) -> Bool {
        JobState.transitionBits & (1 << UInt64(rawValue * 8 + next.rawValue)) != 0
    }

    public static func < (lhs: JobState, rhs: JobState) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .initialized: "initialized"
        case .pending: "pending"
        case .evaluatingConditions: "evaluatingConditions"
        case .ready: "ready"
        case .executing: "executing"
        case .finishing: "finishing"
        case .finished: "finished"
        }
    }
}
