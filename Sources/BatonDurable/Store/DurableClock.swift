public import Foundation

/// Where a store and its workers read the time: the system clock, or a manual one in tests.
///
/// **Which clock decides.** A lease, a retry's `notBefore` and a category's expiry are decided by one
/// clock per store, so that processes whose clocks are set differently never disagree about them:
/// - `SQLiteJobStore`: one machine, one clock — this one.
/// - `PostgresJobStore`: the database server's (`now()` in its statements). A PostgreSQL store given a
///   clock other than ``system`` (tests) sends that clock's time with each statement instead, as River
///   does (`coalesce($now, now())`).
///
/// A ``DurableWorker`` measures its own leases on this clock from the moment it asked for them, so an
/// offset between its clock and the store's changes nothing.
///
/// ## Thread safety
/// A value; `now()` may be called from any thread.
public struct DurableClock: Sendable {
    private let read: @Sendable () -> Date
    /// Whether this is ``system``: a store that keeps its own clock (PostgreSQL) then uses its own.
    public let isSystem: Bool

    public init(now: @escaping @Sendable () -> Date) {
        read = now
        isSystem = false
    }

    private init(systemOffset offset: TimeInterval) {
        if offset == 0 {
            read = { Date() }
        } else {
            read = { Date().addingTimeInterval(offset) }
        }
        isSystem = true
    }

    /// The current time.
    public func now() -> Date { read() }

    /// The system's wall clock.
    public static let system = DurableClock(systemOffset: 0)

    /// The system's wall clock set `offset` ahead (or behind, when negative): a machine whose clock is
    /// wrong. It counts as ``system`` — a PostgreSQL store on it still uses the server's clock — which is
    /// what tests of clock skew need.
    public static func system(offsetBy offset: Duration) -> DurableClock {
        DurableClock(systemOffset: offset.seconds)
    }
}

extension Date {
    /// This date moved by `duration`.
    func adding(_ duration: Duration) -> Date { addingTimeInterval(duration.seconds) }
}
