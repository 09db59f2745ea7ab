import BatonTesting
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

@testable import EarthquakesCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Problems a review of the probe's fixes found; one test (or more) per problem.
@Suite(.timeLimit(.minutes(1))) struct ReviewFixesTests {
    /// A failed first refresh deleted "its" new database: another refresh that had imported into the same
    /// file meanwhile lost every event. Nothing is deleted now, and the message says what is there.
    @Test func aFailedRefreshNeverDeletesWhatAnotherRefreshImported() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        let headSent = Gate()
        let release = Gate()
        let broken = Data(
            ("{\"type\":\"FeatureCollection\",\"features\":[" + String(repeating: " ", count: 64) + "oops").utf8)
        let server = try await TestHTTPServer.start { _ in
            .partial(body: broken, sentBeforeGate: 16, sent: headSent, release: release)
        }
        // A: a first refresh (it creates the database) whose download stalls, then turns out broken.
        let first = Task {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: server.url("/feed").absoluteString, database: database, json: false)
        }
        await headSent.waitAsync()
        #expect(FileManager.default.fileExists(atPath: database), "A opened the database before downloading")
        // B: another refresh into the same database, while A waits.
        let feed = scratch.path("feed.geojson")
        try SampleFeed.geoJSON(count: 25).write(to: URL(fileURLWithPath: feed))
        try await EarthquakesCLI.forTests(CapturedConsole()).refresh(feed: feed, database: database, json: false)
        release.open()
        let result = await first.result
        await server.shutdown()
        let failure: (any Error)?
        if case .failure(let error) = result { failure = error } else { failure = nil }
        let text = EarthquakesCLI.message(for: try #require(failure))
        #expect(text.contains("The database was not changed."), "\(text)")
        #expect(try EarthquakeStore(path: database).count() == 25, "B's events were lost")
    }
}
