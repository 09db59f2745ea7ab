/// A value that many threads share, guarded by a lock that it owns: the only way to the value is
/// through the lock, so code that reads it unlocked does not compile.
///
/// It is the way to keep state in a ``Job`` subclass without a lock of your own:
///
/// ```swift
/// final class ImportJob: Job, @unchecked Sendable {
///     // Sendable: every stored property is a `let` of a Sendable type.
///     let imported = Protected(0)
///
///     override func execute() throws {
///         for row in rows {
///             try insert(row)
///             imported.withLock { $0 += 1 }
///         }
///     }
/// }
/// ```
///
/// Swift makes every subclass of a `Sendable` class restate `@unchecked Sendable`; when all stored
/// properties of the subclass are `let`s of `Sendable` types (such as `Protected`), that restatement
/// is true and there is nothing else to check.
///
/// ## Thread safety
/// All methods may be called from any thread. Keep the closures short: they run with the lock held,
/// so they must not wait or call into Baton (which may call your code back).
public final class Protected<Value> {
    // Sendable (below, when Value is): `value` is only read or written while holding `lock`.
    private let lock = Lock(checked: false)
    private var value: Value

    public init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value and returns what it returns.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }

    /// A copy of the current value.
    public var current: Value {
        lock.withLock { value }
    }

    /// Replaces the value and returns the previous one.
    @discardableResult
    public func exchange(_ newValue: Value) -> Value {
        lock.withLock {
            let old = value
            value = newValue
            return old
        }
    }
}

extension Protected: @unchecked Sendable where Value: Sendable {}
