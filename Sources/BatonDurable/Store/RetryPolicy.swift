public import Baton
import Foundation

/// How often a durable job may be attempted and how long to wait between attempts — data, so that it
/// is stored with the job and a retry's `notBefore` survives a restart.
///
/// The waits mean what Baton's in-process `Backoff` means (``backoff`` builds one). An attempt ends
/// by the job throwing, by its time limit, or by its lease expiring (its worker died or stalled); each
/// counts — a ``Snooze`` does not (it raises the job's maximum by one). After `maxAttempts` the job
/// fails with its last error.
public struct RetryPolicy: Hashable, Codable, Sendable, CustomStringConvertible {
    /// The number of attempts in all (1: no retry), snoozes aside; a retry of the job in the store gives
    /// it this many again.
    public var maxAttempts: Int
    /// The wait before each retry.
    public var delay: Delay

    /// A wait rule that can be stored.
    public enum Delay: Hashable, Codable, Sendable {
        /// Retry at once.
        case immediate
        /// The same wait before every retry.
        case constant(Duration)
        /// `initial`, then `initial × multiplier`, … up to `maximum`, each shortened by a random part of
        /// up to `jitter` (0…1), as `Backoff.exponential(initial:multiplier:maximum:jitter:)`.
        case exponential(initial: Duration, multiplier: Double, maximum: Duration, jitter: Double)
    }

    /// Fewer than 1 attempt is refused when a graph with the policy is submitted (it was raised to 1 in
    /// silence).
    public init(maxAttempts: Int, delay: Delay) {
        self.maxAttempts = maxAttempts
        self.delay = delay
    }

    /// One attempt, no retry.
    public static let never = RetryPolicy(maxAttempts: 1, delay: .immediate)

    /// The default: 5 attempts, waiting 1 s, 2 s, 4 s, 8 s between them.
    public static let standard = RetryPolicy.exponential(maxAttempts: 5)

    /// Up to `maxAttempts` attempts with exponentially growing waits.
    public static func exponential(
        maxAttempts: Int, initial: Duration = .seconds(1), multiplier: Double = 2, maximum: Duration = .seconds(300),
        jitter: Double = 0
    ) -> RetryPolicy {
        RetryPolicy(
            maxAttempts: maxAttempts,
            delay: .exponential(initial: initial, multiplier: multiplier, maximum: maximum, jitter: jitter))
    }

    /// Up to `maxAttempts` attempts with the same wait between them.
    public static func constant(maxAttempts: Int, delay: Duration) -> RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, delay: .constant(delay))
    }

    /// Up to `maxAttempts` attempts without waiting.
    public static func immediate(maxAttempts: Int) -> RetryPolicy {
        RetryPolicy(maxAttempts: maxAttempts, delay: .immediate)
    }

    /// The in-process rule these waits follow.
    public var backoff: Backoff {
        switch delay {
        case .immediate: .immediate
        case .constant(let wait): .constant(wait)
        case .exponential(let initial, let multiplier, let maximum, let jitter):
            .exponential(initial: initial, multiplier: multiplier, maximum: maximum, jitter: jitter)
        }
    }

    /// The wait before attempt `attempt` (≥ 2).
    public func wait(beforeAttempt attempt: Int) -> Duration { backoff.delay(beforeAttempt: attempt) }

    public var description: String {
        switch delay {
        case .immediate: "\(maxAttempts) attempts"
        case .constant(let wait): "\(maxAttempts) attempts, \(wait) apart"
        case .exponential(let initial, let multiplier, let maximum, _):
            "\(maxAttempts) attempts, waits from \(initial) ×\(multiplier) up to \(maximum)"
        }
    }
}

extension RetryPolicy {
    /// The policy a store keeps as JSON text, or `nil` when the text does not decode (a damaged row).
    package static func stored(_ text: String) -> RetryPolicy? {
        try? JSONDecoder().decode(RetryPolicy.self, from: Data(text.utf8))
    }

    /// Added to the error of a job whose stored retry policy could not be read, which fails it.
    package static let unreadable =
        " (not retried: the job's stored retry policy could not be read — the database row was changed or damaged)"
}
