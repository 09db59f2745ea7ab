public import Foundation

/// Where a store and its workers read the time: the system clock, or a manual one in tests.
///
/// Stores compute every time they persist (`notBefore` of a retry, lease expiry) from this clock
/// rather than from the database server's clock, so tests can move time by hand and a store on
/// PostgreSQL behaves the same as one on SQLite.
///
/// ## Thread safety
/// A value; `now()` may be called from any thread.
public struct DurableClock: Sendable {
    private let read: @Sendable () -> Date

    public init(now: @escaping @Sendable () -> Date) { read = now }

    /// The current time.
    public func now() -> Date { read() }

    /// The system's wall clock.
    public static let system = DurableClock { Date() }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var durableSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension Date {
    /// This date moved by `duration`.
    func adding(_ duration: Duration) -> Date { addingTimeInterval(duration.durableSeconds) }
}
