/// A tiny, fast, deterministic pseudo-random generator (SplitMix64, Steele et al. 2014).
///
/// The one copy in the package: EarthquakesKit's sample feed draws from it so that the same seed
/// yields the same bytes on every platform and toolchain (through ``next()`` and ``unit()`` only,
/// never the standard library's `random(in:using:)`, whose algorithm is not promised to stay fixed),
/// and BatonTesting's `SeededRandom` wraps it for tests.
///
/// Not for cryptography.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in `0..<1` with 53 random bits.
    package mutating func unit() -> Double {
        Double(next() >> 11) * 0x1p-53
    }

    /// A uniform value in `range`.
    package mutating func uniform(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound + unit() * (range.upperBound - range.lowerBound)
    }

    /// A uniform index in `0..<count`.
    package mutating func index(below count: Int) -> Int {
        precondition(count > 0, "index(below:) needs a positive count")
        return Int(next() % UInt64(count))
    }
}
