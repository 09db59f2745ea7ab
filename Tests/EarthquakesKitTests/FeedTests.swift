import EarthquakesKit
import Testing

@Suite("Feed and FeedWarning")
struct FeedTests {
    @Test("flags follow the warnings")
    func flags() {
        var feed = Feed(metadata: .init(), earthquakes: [])
        #expect(!feed.wasGeoJSONP)
        #expect(!feed.hadTimesInSeconds)
        feed.warnings = [.strippedGeoJSONPWrapper(callback: "cb"), .convertedSecondsToMilliseconds(count: 3)]
        #expect(feed.wasGeoJSONP)
        #expect(feed.hadTimesInSeconds)
    }

    @Test("warnings explain themselves")
    func descriptions() {
        #expect(
            FeedWarning.strippedGeoJSONPWrapper(callback: "eqfeed_callback").description.contains("eqfeed_callback(…);")
        )
        let seconds = FeedWarning.convertedSecondsToMilliseconds(count: 301).description
        #expect(seconds.contains("seconds"))
        #expect(seconds.contains("301"))
    }
}
