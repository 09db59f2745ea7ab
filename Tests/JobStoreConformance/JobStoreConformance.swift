public import BatonDurable
import Foundation

/// The contract of a ``JobStore``, as checks that any store runs in its own tests:
///
/// ```swift
/// @Test(arguments: JobStoreConformance.checks)
/// func conformance(_ check: JobStoreConformance.Check) async throws {
///     try await check.run { clock in try SQLiteJobStore.inMemory(clock: clock) }
/// }
/// ```
///
/// Each check gets a new, empty store from the factory and a ``ManualDurableClock`` that only it moves;
/// stores must take every time from the clock they are given. Checks run one transition at a time,
/// without threads, and throw ``ConformanceFailure`` naming what differed.
public enum JobStoreConformance {
    /// Makes a new, empty store that reads time from the given clock.
    public typealias Factory = @Sendable (DurableClock) async throws -> any JobStore

    public struct Check: Sendable, CustomStringConvertible {
        public let name: String
        let body: @Sendable (any JobStore, ManualDurableClock) async throws -> Void

        public var description: String { name }

        /// Runs the check on a new store from `factory`.
        public func run(_ factory: Factory) async throws {
            let clock = ManualDurableClock()
            try await body(try await factory(clock.clock), clock)
        }
    }

    /// Every check, in a stable order.
    public static let checks: [Check] =
        submitChecks + claimChecks + finishChecks + snoozeChecks + cancelChecks + inspectChecks + recordChecks
        + edgeChecks
        + operateChecks + growthChecks + scheduleChecks

    static func check(
        _ name: String, _ body: @escaping @Sendable (any JobStore, ManualDurableClock) async throws -> Void
    )
        -> Check
    {
        Check(name: name, body: body)
    }
}
