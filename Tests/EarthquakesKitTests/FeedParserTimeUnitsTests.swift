import Testing

@testable import EarthquakesKit

@Suite("FeedParser time units")
struct FeedParserTimeUnitsTests {
    typealias Unit = FeedParser.TimeUnit

    @Test(
        "detects seconds only when every time is small and generated does not contradict",
        arguments: [
            ([Double](), nil as Double?, Unit.milliseconds),
            ([1_761_765_129_224, 1_761_764_597_889], 1_761_770_396_000, .milliseconds),  // USGS, 2025
            ([1_688_419_585, 1_687_819_625], 1_688_421_209_000, .seconds),  // rewritten feed, 2023
            ([1_688_419_585, 1_687_819_625], nil, .seconds),  // no generated: magnitude alone decides
            ([1_688_419_585, 1_761_765_129_224], nil, .milliseconds),  // mixed: milliseconds
            ([1_000_000_000, 1_500_000_000], 1_761_770_396_000, .seconds),  // 2001 and 2017 in seconds
            ([40_000_000_000, 50_000_000_000], 60_000_000_000, .milliseconds),  // archive of 1971 events in ms
            ([40_000_000_000, 50_000_000_000], 1_761_770_396_000, .milliseconds),  // as seconds: year 3200 > 2025
            ([-100_000_000_000, 1_000], nil, .milliseconds),  // 1966 in ms: large magnitude
        ]
    )
    func detect(times: [Double], generated: Double?, expected: Unit) {
        #expect(FeedParser.detectTimeUnit(times: times, generatedMilliseconds: generated) == expected)
    }

    @Test("generated is read as seconds when small")
    func generated() {
        #expect(FeedParser.generatedMilliseconds(nil) == nil)
        #expect(FeedParser.generatedMilliseconds(1_688_421_209) == 1_688_421_209_000)
        #expect(FeedParser.generatedMilliseconds(1_688_421_209_000) == 1_688_421_209_000)
    }
}
