/// The order in which ready jobs of one queue start: higher first, and first-in first-out among
/// jobs of the same priority.
public enum JobPriority: Int, Sendable, CaseIterable, Comparable, CustomStringConvertible {
    case veryLow = 0
    case low = 1
    case normal = 2
    case high = 3
    case veryHigh = 4

    public static func < (lhs: JobPriority, rhs: JobPriority) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .veryLow: "veryLow"
        case .low: "low"
        case .normal: "normal"
        case .high: "high"
        case .veryHigh: "veryHigh"
        }
    }

    /// The Swift concurrency priority used for the bodies of ``AsyncJob``s.
    var taskPriority: TaskPriority {
        switch self {
        case .veryLow: .background
        case .low: .utility
        case .normal: .medium
        case .high: .userInitiated
        case .veryHigh: .high
        }
    }
}
