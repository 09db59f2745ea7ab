import Baton

/// A thread-safe list of values that tests append to from any thread and read at the end.
///
/// ## Thread safety
/// All methods may be called from any thread.
public final class Recorder<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `storage` is guarded by `lock`.
    private let lock = Lock()
    private var storage: [Value] = []

    public init() {}

    /// Appends a value.
    public func record(_ value: Value) {
        lock.withLock { storage.append(value) }
    }

    /// Everything recorded so far, in order.
    public var values: [Value] { lock.withLock { storage } }

    /// How many values were recorded.
    public var count: Int { lock.withLock { storage.count } }
}

/// A thread-safe counter that also remembers the highest value it reached.
public final class ConcurrencyGauge: @unchecked Sendable {
    // @unchecked Sendable: `current` and `highest` are guarded by `lock`.
    private let lock = Lock()
    private var current = 0
    private var highestValue = 0

    public init() {}

    /// Counts one more; returns the new value.
    @discardableResult
    public func enter() -> Int {
        lock.withLock {
            current += 1
            highestValue = max(highestValue, current)
            return current
        }
    }

    /// Counts one fewer.
    public func leave() {
        lock.withLock { current -= 1 }
    }

    /// The highest value reached.
    public var highest: Int { lock.withLock { highestValue } }
    /// The current value.
    public var value: Int { lock.withLock { current } }
}
