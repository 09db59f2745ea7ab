import BatonTesting
import EarthquakesKit
import Foundation
import GRDB
import TestHTTPServer
import Testing

@testable import EarthquakesCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Problems a review of the probe's fixes found; one test (or more) per problem.
@Suite(.timeLimit(.binarySuite)) struct ReviewFixesTests {
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

extension ReviewFixesTests {
    /// "\tearthquake" was an earthquake to refresh, a raw tab in status, "[ earthquake]" in list, and left
    /// out by `--type earthquake`. Types are trimmed once, on import; queries trim rows stored before.
    @Test func typesWithTabsAndLineBreaksFollowOneRule() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        let types: [String?] = ["\tearthquake", "earthquake\n", " \t\r\n", "\tQuarry Blast\n"]
        let quakes = types.enumerated().map { index, type in
            Earthquake(
                id: "t\(index)", latitude: 1, longitude: 2, depth: 3, magnitude: 2, place: "place \(index)",
                time: SampleFeed.referenceDate, type: type)
        }
        #expect(quakes.map(\.type) == ["earthquake", "earthquake", nil, "Quarry Blast"])
        let store = try EarthquakeStore(path: database)
        #expect(try store.importFeed(quakes).otherTypes == ["quarry blast": 1])
        // A row stored by a version that did not trim.
        try store.close()
        let raw = try GRDB.DatabaseQueue(path: database)
        try await raw.write { db in
            try db.execute(
                sql: "INSERT INTO earthquake (id, latitude, longitude, depth, magnitude, place, time, type) "
                    + "VALUES ('old', 1, 2, 3, 2, 'old place', 1700000000000, ?)",
                arguments: ["\r\n\tEarthquake \t"])
        }
        try raw.close()
        let captured = CapturedConsole()
        let cli = EarthquakesCLI.forTests(captured)
        try await cli.status(database: database)
        #expect(captured.stdout.contains("5 events (4 earthquakes, 1 quarry blast)"), "\(captured.stdout)")
        #expect(!captured.stdout.contains("\t"), "\(captured.stdout.debugDescription)")
        let listed = CapturedConsole()
        try EarthquakesCLI.forTests(listed).list(ListOptions(limit: 10), database: database, json: false)
        #expect(!listed.stdout.contains("[ earthquake]") && !listed.stdout.contains("arthquake]"), "\(listed.stdout)")
        #expect(listed.stdout.contains("[Quarry Blast] place 3"), "\(listed.stdout)")
        let only = CapturedConsole()
        try EarthquakesCLI.forTests(only).list(
            ListOptions(limit: 10, types: ["earthquake"]), database: database, json: false)
        for place in ["place 0", "place 1", "place 2", "old place"] {
            #expect(only.stdout.contains(place), "\(place): \(only.stdout)")
        }
        #expect(!only.stdout.contains("place 3"))
    }
}

extension ReviewFixesTests {
    typealias Binary = EarthquakesBinaryTests

    /// `home --cler` and `home -x` were taken for locations ("home expects LAT,LON … got "--cler""), and the
    /// usage said `[<lat,lon> ...]`. A word starting with "-" is a location only when it is a number pair.
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func homeRefusesUnknownOptions() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let environment = ["XDG_CONFIG_HOME": scratch.path("config")]
        for option in ["--cler", "-x"] {
            let run = try await Binary.run(["home", option], environment: environment)
            #expect(run.status == 64, "\(option): \(run.stderr)")
            #expect(run.stderr.contains("Unknown option '\(option)'"), "\(run.stderr)")
            #expect(!run.stderr.contains("expects"), "\(run.stderr)")
        }
        let help = try await Binary.run(["home", "--help"], environment: environment)
        #expect(help.stdout.contains("earthquakes home [<lat,lon>] [--clear]"), "\(help.stdout)")
        #expect(!help.stdout.contains("..."), "\(help.stdout)")
        let set = try await Binary.run(["home", "-33.87,151.21"], environment: environment)
        #expect(set.status == 0, "\(set.stderr)")
        // A southern home typed with a space after the comma is a malformed location, not an option.
        let spaced = try await Binary.run(["home", "-33.87,", "151.21"], environment: environment)
        #expect(spaced.status == 64, "\(spaced.stderr)")
        #expect(spaced.stderr.contains("no space after the comma"), "\(spaced.stderr)")
    }

    /// `--feed X --feed X` went down the several-feeds path (a job store for one feed).
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func aFeedGivenTwiceIsOneFeedWithNoJobStore() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feed = scratch.path("feed.geojson")
        try SampleFeed.geoJSON(count: 3).write(to: URL(fileURLWithPath: feed))
        let database = scratch.path("q.sqlite")
        let run = try await Binary.run(["refresh", "--feed", feed, "--feed", feed, "--database", database])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("given more than once"), "\(run.stderr)")
        #expect(try !JobTables.exist(in: database))
        #expect(try EarthquakeStore(path: database).count() == 3)
    }
}
