import EarthquakesCLI
import EarthquakesKit
import Foundation
import Testing

/// A mistyped USGS feed name (`--feeds dya`) is read as a file name; the message then lists the names,
/// and a missing `.geojson` file is named as before. Nothing is created, by one feed or several (the
/// several-feed refresh created the database and its job store before it looked for the files).
@Suite struct FeedNameTypoTests {
    @Test func aMistypedFeedNameListsTheNames() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        for feeds in [["dya"], ["day", "5.4_week"]] {
            let error = await #expect(throws: CLIError.self) {
                try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                    feeds: feeds, resume: false, database: database, json: false)
            }
            let message = try #require(error?.message)
            #expect(message.contains("no such file"), "\(message)")
            #expect(message.contains("or name a USGS feed: hour, day, week, month"), "\(message)")
        }
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: scratch.path("missing.geojson"), database: database, json: false)
        }
        #expect(error?.message.contains("USGS feed") == false)
        #expect(scratch.contents.isEmpty)
    }

    @Test func aResumeWithNothingToResumeCreatesNothing() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feeds: [], resume: true, database: scratch.path("q.sqlite"), json: false)
        }
        #expect(error?.message.hasPrefix("there is no interrupted refresh to resume") == true)
        #expect(scratch.contents.isEmpty)
    }
}
