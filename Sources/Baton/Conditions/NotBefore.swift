/// Holds the job back until a moment on a clock: a delay that uses no thread while it waits.
///
/// ```swift
/// job.addCondition(NotBefore(.now + .seconds(30), clock: ContinuousClock()))
/// ```
///
/// Pass a manual clock (`BatonTesting`'s `ManualClock`) in tests so they never sleep. Cancelling
/// the job while it waits ends the wait at once (the job finishes cancelled).
public struct NotBefore<C: Clock>: JobCondition where C.Instant: Sendable, C: Sendable {
    public let deadline: C.Instant
    public let clock: C

    public init(_ deadline: C.Instant, clock: C) {
        self.deadline = deadline
        self.clock = clock
    }

    public var name: String { "NotBefore" }

    public func evaluate(for job: Job) async -> ConditionResult {
        do {
            try await clock.sleep(until: deadline, tolerance: nil)
            return .satisfied
        } catch {
            return .failed(error)
        }
    }
}

extension NotBefore where C == ContinuousClock {
    /// Holds the job back for `delay` from now, on the continuous clock. A delay beyond about 100
    /// years counts as 100 years (the clock could not add it to its `now`).
    public init(delay: Duration) {
        self.init(
            ContinuousClock.now.advanced(by: min(delay, ContinuousClock.longestSingleSleep)), clock: ContinuousClock())
    }
}
