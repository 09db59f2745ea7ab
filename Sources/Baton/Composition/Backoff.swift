#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How long to wait before the next attempt of a ``RetryJob`` or iteration of a ``RepeatJob``.
public struct Backoff: Sendable {
    private let delayBeforeAttempt: @Sendable (Int) -> Duration

    /// - Parameter delay: The wait before attempt `n` (2 for the first retry, and so on).
    public init(_ delay: @escaping @Sendable (_ attempt: Int) -> Duration) {
        delayBeforeAttempt = delay
    }

    /// The wait before attempt `attempt` (≥ 2).
    public func delay(beforeAttempt attempt: Int) -> Duration {
        max(.zero, delayBeforeAttempt(attempt))
    }

    /// No wait.
    public static let immediate = Backoff { _ in .zero }

    /// The same wait every time.
    public static func constant(_ delay: Duration) -> Backoff { Backoff { _ in delay } }

    /// `initial`, then `initial × multiplier`, … up to `maximum`, each shortened by a random part of
    /// up to `jitter` (0: none, 0.5: up to half) so that many clients do not retry in step.
    ///
    /// The delay is computed in floating point and clamped to `maximum` before it becomes a
    /// `Duration`, so any attempt number — the thousandth poll of a ``RepeatJob``, or `Int.max` — gives
    /// `maximum` instead of overflowing.
    public static func exponential(
        initial: Duration, multiplier: Double = 2, maximum: Duration = .seconds(60), jitter: Double = 0
    ) -> Backoff {
        let jitter = min(max(jitter, 0), 1)
        let initialSeconds = initial.seconds
        let maximumSeconds = maximum.seconds
        return Backoff { attempt in
            let factor = pow(multiplier, Double(max(attempt - 2, 0)))
            // Clamp in floating point first (infinity and NaN too); only a delay below the maximum is
            // computed as a Duration, where it cannot overflow.
            var delay = initialSeconds * factor < maximumSeconds ? initial * factor : maximum
            if jitter > 0 { delay = delay * (1 - jitter * Double.random(in: 0..<1)) }
            return delay
        }
    }

    /// Any rule of your own.
    public static func custom(_ delay: @escaping @Sendable (_ attempt: Int) -> Duration) -> Backoff { Backoff(delay) }
}

extension Duration {
    /// The duration in seconds, as a floating-point number: the package's one conversion.
    package var seconds: Double { self / .seconds(1) }
}

extension Job {
    /// Holds the job back by `delay`, as a condition (so it uses no thread while waiting).
    func addBackoff(_ delay: Duration, sleep: @escaping @Sendable (Duration) async throws -> Void) {
        guard delay > .zero else { return }
        addCondition(
            ClosureCondition(name: "backoff \(delay)") { _ in
                try await sleep(delay)
                return true
            })
    }
}
