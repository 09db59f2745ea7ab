import Baton

/// A clock whose time moves only when a test says so (``advance(by:)``), for testing delays,
/// timeouts and backoffs without sleeping.
///
/// ```swift
/// let clock = ManualClock()
/// job.addCondition(NotBefore(clock.now.advanced(by: .seconds(30)), clock: clock))
/// queue.add(job)
/// await clock.waitForSleepers(1)   // the condition is waiting
/// clock.advance(by: .seconds(30))  // …and now it is satisfied
/// ```
///
/// ## Thread safety
/// All methods may be called from any thread or task.
public final class ManualClock: Clock, @unchecked Sendable {
    // @unchecked Sendable: every stored property except `lock` is guarded by `lock`.

    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Time since the clock was created.
        public var offset: Duration

        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "t+\(offset)" }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let lock = Lock()
    private var current = Instant(offset: .zero)
    private var sleepers: [UInt64: Sleeper] = [:]
    private var cancelledBeforeSleeping: Set<UInt64> = []
    private var nextID: UInt64 = 0
    private var sleeperWatchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    public init() {}

    public var now: Instant { lock.withLock { current } }
    public var minimumResolution: Duration { .zero }

    /// How many tasks are sleeping on this clock now.
    public var sleeperCount: Int { lock.withLock { sleepers.count } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = lock.withLock { () -> UInt64 in
            nextID += 1
            return nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Now { case cancelled, due, wait }
                let (now, watchers): (Now, [CheckedContinuation<Void, Never>]) = lock.withLock {
                    if cancelledBeforeSleeping.remove(id) != nil { return (.cancelled, []) }
                    if deadline <= current { return (.due, []) }
                    sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (.wait, takeSatisfiedWatchersLocked())
                }
                switch now {
                case .cancelled: continuation.resume(throwing: CancellationError())
                case .due: continuation.resume()
                case .wait: break
                }
                watchers.forEach { $0.resume() }
            }
        } onCancel: {
            let sleeper: Sleeper? = lock.withLock {
                if let sleeper = sleepers.removeValue(forKey: id) { return sleeper }
                cancelledBeforeSleeping.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration` at once, then resumes every sleeper whose deadline has come:
    /// earliest deadline first, and those of one deadline in the order they began to sleep. The woken
    /// tasks then run concurrently, and read ``now`` as the new time.
    ///
    /// One advance wakes each sleeper once: a task that sleeps again (a loop, a `RepeatJob`'s backoff)
    /// is not woken again by this advance even when its new deadline has passed within it. To see each
    /// tick of a loop, advance one period at a time, waiting for the loop to sleep again in between
    /// (``waitForSleepers(_:)``).
    public func advance(by duration: Duration) {
        let due: [Sleeper] = lock.withLock {
            current = current.advanced(by: duration)
            let due = sleepers.filter { $0.value.deadline <= current }
            for id in due.keys { sleepers[id] = nil }
            return due.sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }.map(\.value)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Waits until at least `count` tasks sleep on this clock (so that advancing it wakes them).
    public func waitForSleepers(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = lock.withLock {
                if sleepers.count >= count { return true }
                sleeperWatchers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private func takeSatisfiedWatchersLocked() -> [CheckedContinuation<Void, Never>] {
        let satisfied = sleeperWatchers.filter { $0.count <= sleepers.count }
        sleeperWatchers.removeAll { $0.count <= sleepers.count }
        return satisfied.map(\.continuation)
    }
}
