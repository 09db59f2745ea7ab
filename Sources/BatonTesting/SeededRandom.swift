import Baton

/// A small, fast, deterministic random number generator (SplitMix64) for tests that explore random
/// interleavings, graphs or cancel points: the same seed gives the same sequence on every platform, so a
/// failure can be replayed.
///
/// ```swift
/// var rng = SeededRandom(seed: 42)
/// let cancelAt = Int.random(in: 0..<100, using: &rng)
/// ```
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var generator: SplitMix64

    public init(seed: UInt64) {
        generator = SplitMix64(seed: seed)
    }

    public mutating func next() -> UInt64 { generator.next() }
}
