import EarthquakesCLI
import Foundation
import Testing

/// `--feeds A,B`: a comma inside an address's query belongs to the address. (A probe, 7 December 2026,
/// night: an FDSN query with `eventtype=earthquake,explosion` was cut there, and "explosion" read as a
/// feed file that does not exist.)
@Suite struct FeedListTests {
    static let query = "https://earthquake.usgs.gov/fdsnws/event/1/query?format=geojson&eventtype=earthquake,explosion"

    @Test func aCommaInAnAddressQueryStaysInTheAddress() {
        #expect(FeedRefresh.feedList(Self.query) == [Self.query])
        #expect(FeedRefresh.feedList("\(Self.query),quarry blast") == [Self.query + ",quarry blast"])
    }

    @Test func whatReadsAsAFeedAfterAQueryIsAFeedOfItsOwn() {
        #expect(FeedRefresh.feedList("\(Self.query),day") == [Self.query, "day"])
        #expect(FeedRefresh.feedList("\(Self.query), 4.5_week") == [Self.query, "4.5_week"])
        #expect(FeedRefresh.feedList("\(Self.query),/tmp/feed.geojson") == [Self.query, "/tmp/feed.geojson"])
        #expect(FeedRefresh.feedList("\(Self.query),data/feed.geojson") == [Self.query, "data/feed.geojson"])
        #expect(FeedRefresh.feedList("\(Self.query),https://example.org/b") == [Self.query, "https://example.org/b"])
    }

    @Test func withoutAQueryEveryCommaSeparatesFeeds() {
        #expect(FeedRefresh.feedList("hour,day , week") == ["hour", "day", "week"])
        #expect(
            FeedRefresh.feedList("https://example.org/a.geojson,b.geojson") == [
                "https://example.org/a.geojson", "b.geojson",
            ])
        #expect(FeedRefresh.feedList(",,hour,,") == ["hour"])
        #expect(FeedRefresh.feedList("") == [])
    }
}
