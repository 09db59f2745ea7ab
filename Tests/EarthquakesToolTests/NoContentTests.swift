import EarthquakesCLI
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

/// An FDSN event query (`fdsnws/event/1/query?format=geojson&…`) that matches no event is answered
/// "204 No Content" (the service's `nodata` default): a refresh of it imports no events and succeeds, and
/// the database keeps what it holds.
@Suite(.timeLimit(.minutes(1))) struct NoContentTests {
    static let query = "/fdsnws/event/1/query?format=geojson&starttime=2014-01-01&minmagnitude=9.6"
    static let oneEvent =
        #"{"type":"FeatureCollection","metadata":{"generated":1761800000000,"count":1},"features":[{"type":"Feature","#
        + #""properties":{"mag":4.2,"place":"10 km N of Somewhere","time":1761700000000,"updated":1761700100000,"#
        + #""type":"earthquake"},"geometry":{"type":"Point","coordinates":[-150.25,61.5,30.1]},"id":"ak0251"}]}"#

    @Test func aNoContentAnswerIsAFeedOfNoEvents() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        try EarthquakeStore(path: path).importFeed(
            try FeedParser().parse(
                Data(Self.oneEvent.utf8)))
        let before = try EarthquakeStore(path: path).snapshot()
        let server = try await TestHTTPServer.start { _ in .respond(status: 204, headers: [], body: Data()) }
        defer { Task { await server.shutdown() } }
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(
            feed: server.url(Self.query).absoluteString, database: path, json: false)
        #expect(captured.stdout.hasPrefix("Imported 0 earthquakes from "), "\(captured.stdout)")
        #expect(try EarthquakeStore(path: path).snapshot() == before)
        #expect(before.count == 1)
    }

    @Test func aNoContentAnswerIsAFeedOfNoEventsAmongSeveralFeeds() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let server = try await TestHTTPServer.start { request in
            request.path.hasPrefix("/fdsnws") ? .respond(status: 204, headers: [], body: Data()) : .ok(SampleFeed.data)
        }
        defer { Task { await server.shutdown() } }
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(
            feeds: [server.url(Self.query).absoluteString, server.url("/feed").absoluteString], resume: false,
            database: path, json: false)
        #expect(captured.stdout.contains("Imported 0 events from \(server.url(Self.query).absoluteString)"))
        #expect(captured.stdout.hasSuffix("Refreshed 2 feeds into \(path).\n"), "\(captured.stdout)")
        #expect(try EarthquakeStore(path: path).count() == SampleFeed.defaultCount)
    }

    @Test func aNoContentAnswerFromAnAddressThatIsNoFDSNQueryIsAnError() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let server = try await TestHTTPServer.start { _ in .respond(status: 204, headers: [], body: Data()) }
        defer { Task { await server.shutdown() } }
        await #expect(throws: (any Error).self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: server.url("/earthquakes/feed/v1.0/summary/all_day.geojson").absoluteString, database: path,
                json: false)
        }
        await #expect(throws: (any Error).self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feeds: [server.url("/all_day.geojson").absoluteString, server.url("/all_hour.geojson").absoluteString],
                resume: false, database: path, json: false)
        }
    }

    /// A probe (7 December 2026, night): a query asking for "404 Not Found" when it matches nothing
    /// (`nodata=404`) failed with "There is no feed at that address".
    @Test func aNotFoundAnswerToAQueryAskingForItIsAFeedOfNoEvents() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let server = try await TestHTTPServer.start { request in
            request.path.hasPrefix("/fdsnws")
                ? .respond(status: 404, headers: [], body: Data("Error 404: No data".utf8)) : .ok(SampleFeed.data)
        }
        defer { Task { await server.shutdown() } }
        let query = server.url(Self.query + "&nodata=404").absoluteString
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(feed: query, database: path, json: false)
        #expect(captured.stdout.hasPrefix("Imported 0 earthquakes from "), "\(captured.stdout)")
        let several = CapturedConsole()
        try await EarthquakesCLI.forTests(several).refresh(
            feeds: [query, server.url("/feed").absoluteString], resume: false, database: path, json: false)
        #expect(several.stdout.contains("Imported 0 events from \(query)"), "\(several.stdout)")
        #expect(try EarthquakeStore(path: path).count() == SampleFeed.defaultCount)
        // Without `nodata=404`, a 404 is an error, as from any address.
        await #expect(throws: (any Error).self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: server.url(Self.query).absoluteString, database: path, json: false)
        }
    }

    @Test func anEmptyBodyWithStatus200IsStillAnError() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let server = try await TestHTTPServer.start { _ in .ok(Data()) }
        defer { Task { await server.shutdown() } }
        await #expect(throws: (any Error).self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: server.url("/feed").absoluteString, database: path, json: false)
        }
    }
}
