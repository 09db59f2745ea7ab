import Baton
import EarthquakesKit
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1))) struct ParseFeedJobTests {
    @Test func parsesBytesAndFiles() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = URL(fileURLWithPath: directory.path("feed.geojson"))
        try SampleFeed.geoJSON(count: 7).write(to: file)

        let fromData = ParseFeedJob(input: .data(SampleFeed.data))
        let fromFile = ParseFeedJob(input: .file(file))
        JobQueue().add([fromData, fromFile])
        #expect(await fromData.outcome.didSucceed)
        #expect(await fromFile.outcome.didSucceed)
        #expect(fromData.feed?.earthquakes.count == 40)
        #expect(fromFile.feed?.earthquakes.count == 7)
    }

    @Test func failsWithTheParsersErrorOrAFileError() async throws {
        let bad = ParseFeedJob(input: .data(Data("[1,".utf8)))
        let missing = ParseFeedJob(input: .file(URL(fileURLWithPath: "/nonexistent/feed.geojson")))
        JobQueue().add([bad, missing])
        #expect((await bad.outcome.error as? FeedError)?.code == .malformedJSON)
        let fileError = try #require(await missing.outcome.error as? FeedFileError)
        #expect(fileError.description == "could not read the feed file /nonexistent/feed.geojson: no such file")
        #expect(bad.feed == nil)
    }
}
