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

    /// An HTTP probe: `--feed http://user:s3cret@host/…` sent no credentials, then printed the password
    /// in its error and stored it 26 times in the database. Such an address is refused before anything
    /// is created or sent.
    @Test func anAddressWithAPasswordIsRefusedAndNotStored() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        for feed in ["http://user:s3cret@127.0.0.1:9/feed.geojson", "HTTPS://user@example.com/feed.geojson"] {
            let one = await #expect(throws: CLIError.self) {
                try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                    feed: feed, database: database, json: false)
            }
            let several = await #expect(throws: CLIError.self) {
                try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                    feeds: [feed, "day"], resume: false, database: database, json: false)
            }
            for error in [one, several] {
                #expect(error?.isUsage == true)
                #expect(error?.message.contains("user name or password") == true, "\(String(describing: error))")
                #expect(error?.message.contains("s3cret") == false, "\(String(describing: error))")
            }
        }
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
