import EarthquakesCLI
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

/// An HTTP error status says what to do about it: check the address (404, 400…), or try again later
/// (503, 429…), for one feed and among several.
@Suite(.timeLimit(.minutes(1))) struct HTTPStatusAdviceTests {
    /// The message of a refresh of a feed answered with `status`.
    private func message(status: Int) async throws -> String {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { _ in .status(status) }
        defer { Task { await server.shutdown() } }
        let url = server.url("/feed").absoluteString
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: url, database: scratch.path("q.sqlite"), json: false)
        }
        let message = EarthquakesCLI.message(for: try #require(error))
        #expect(message.hasPrefix("HTTP \(status) "))
        #expect(message.contains("from \(url). "))
        return message
    }

    @Test func notFoundSaysToCheckTheAddress() async throws {
        let message = try await message(status: 404)
        #expect(message.contains("There is no feed at that address: check it (USGS feeds end in .geojson"))
        #expect(message.hasSuffix("holds no events."))
    }

    @Test func badRequestSaysToCheckTheQuery() async throws {
        #expect(try await message(status: 400).contains("check the address (for an FDSN event query, its parameters)"))
    }

    @Test func serverErrorsSayToTryAgainLater() async throws {
        for status in [503, 429] {
            #expect(try await message(status: status).contains("The server is busy or failing: try again later."))
        }
    }

    @Test func aFeedNotFoundAmongSeveralSaysToCheckTheAddress() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { request in
            request.path == "/missing" ? .status(404) : .ok(SampleFeed.data)
        }
        defer { Task { await server.shutdown() } }
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feeds: [server.url("/missing").absoluteString, server.url("/feed").absoluteString], resume: false,
                database: scratch.path("q.sqlite"), json: false)
        }
        let details = try #require(error).details
        #expect(
            details.count == 1
                && details[0].contains(
                    "HTTP 404 (Not Found) from \(server.url("/missing").absoluteString). There is no feed"),
            "\(details)")
    }
}
