extension Clock where Duration == Swift.Duration {
    /// The longest single sleep Baton asks a clock for: about 100 years, far inside what any clock can
    /// add to its `now` without overflowing.
    static var longestSingleSleep: Duration { .seconds(3_155_760_000) }

    /// Sleeps for `duration`, however long: a duration a clock cannot add to its `now` (such as
    /// `.seconds(Int64.max)`, written to mean "no limit") would stop the program in the standard
    /// library ("Not enough bits to represent the passed value"), so a longer one is slept in steps of
    /// about 100 years — in practice, until the sleep is cancelled.
    func sleepAnyLength(for duration: Duration) async throws {
        var left = duration
        while left > Self.longestSingleSleep {
            try await sleep(for: Self.longestSingleSleep)
            left -= Self.longestSingleSleep
        }
        try await sleep(for: left)
    }
}
