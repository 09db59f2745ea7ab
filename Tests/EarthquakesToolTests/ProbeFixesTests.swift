import BatonTesting
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

@testable import EarthquakesCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Problems an adversarial probe of the tool found, each fixed; one test (or more) per problem.
@Suite(.timeLimit(.binarySuite)) struct ProbeFixesTests {
    typealias Binary = EarthquakesBinaryTests

    /// The help's own example, `earthquakes home -33.87,151.21`, failed: "Unknown option".
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func aSouthernHomeIsTakenAsTyped() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let environment = ["XDG_CONFIG_HOME": scratch.path("config")]
        let set = try await Binary.run(["home", "-33.87,151.21"], environment: environment)
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout.hasPrefix("Home is "))
        let shown = try await Binary.run(["home"], environment: environment)
        #expect(shown.stdout.contains("-33.87"))
        let two = try await Binary.run(["home", "-33.87,151.21", "1,2"], environment: environment)
        #expect(two.status == 64)
        #expect(two.stderr.contains("give one location"))
    }

    /// `--feeds F,F` (or `day,2.5_day`) failed with "graph has two jobs named 'fetch …'".
    @Test func aFeedGivenTwiceIsRefreshedOnce() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feed = scratch.path("feed.geojson")
        try SampleFeed.geoJSON(count: 5).write(to: URL(fileURLWithPath: feed))
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(
            feeds: [feed, feed, scratch.url.path + "/./feed.geojson"], resume: false,
            database: scratch.path("q.sqlite"), json: false)
        #expect(captured.stderr.contains("given more than once"))
        #expect(captured.stdout.contains("Refreshed 1 feed into"))
        #expect(try EarthquakeStore(path: scratch.path("q.sqlite")).count() == 5)
        #expect(FeedRefresh.distinct(["day", "2.5_day"].map(FeedRefresh.expand)).count == 1)
    }

    /// Ctrl-C during a refresh of several feeds exited 1; the contract is 130.
    @Test func controlCDuringSeveralFeedsIsACancellation() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let halfSent = Gate()
        let release = Gate()
        let body = SampleFeed.geoJSON(count: 400)
        let server = try await TestHTTPServer.start { _ in
            .partial(body: body, sentBeforeGate: body.count / 2, sent: halfSent, release: release)
        }
        let interrupts = Interrupts()
        let captured = CapturedConsole()
        // (An existing database: for a new one that nothing was imported into, the message says so instead;
        // see `ProbeFollowUpTests.aCancelledFirstRefreshOfSeveralFeedsSaysNothingWasImported`.)
        try EarthquakeStore(path: scratch.path("q.sqlite")).close()
        let cli = EarthquakesCLI(
            console: captured.console, environment: ["HOME": "/nonexistent-home"],
            session: URLSession(configuration: .ephemeral), interrupts: interrupts)
        let refresh = Task {
            try await cli.refresh(
                feeds: [server.url("/a").absoluteString, server.url("/b").absoluteString], resume: false,
                database: scratch.path("q.sqlite"), json: false)
        }
        await halfSent.waitAsync()
        interrupts.interrupt()
        release.open()  // (the shutdown's grace period need not run out: the downloads may finish)
        let result = await refresh.result
        await server.shutdown()
        let failure: (any Error)?
        if case .failure(let error) = result { failure = error } else { failure = nil }
        let error = try #require(failure as? CLIError)
        #expect(error.isCancellation)
        #expect(error.exitStatus == 130)
        #expect(error.message.contains("--resume"))
    }

    /// Concurrent refreshes of the same feeds said "Resuming the interrupted refresh" though nothing
    /// was interrupted: a run another refresh submitted and nobody has started is joined, not resumed.
    @Test func joiningAnotherRefreshIsNotCalledResuming() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (a, b) = (scratch.path("a.geojson"), scratch.path("b.geojson"))
        try SampleFeed.geoJSON(count: 3, seed: 1).write(to: URL(fileURLWithPath: a))
        try SampleFeed.geoJSON(count: 3, seed: 2).write(to: URL(fileURLWithPath: b))
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).close()
        try await FeedRefresh.submitOnly(feeds: [a, b], strict: false, database: database)
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(
            feeds: [a, b], resume: false, database: database, json: false)
        #expect(!captured.stderr.contains("interrupted"), "\(captured.stderr)")
        #expect(captured.stderr.contains("Joining a refresh of these feeds"))
        #expect(
            FeedRefresh.existingRunNote(imported: 1, of: 3, liveWorkers: 0, deadWorkers: 1, started: true)
                .hasPrefix("Resuming the interrupted refresh: 1 of 3"))
        #expect(
            FeedRefresh.existingRunNote(imported: 0, of: 3, liveWorkers: 1, deadWorkers: 0, started: true)
                .hasPrefix("Another refresh of these feeds is running"))
    }

    /// A failed first refresh said "The database was not changed." about a database it had just created.
    /// It is never deleted (another process may have opened it meanwhile: see
    /// `ReviewFixesTests.aFailedRefreshNeverDeletesWhatAnotherRefreshImported`); the message says what it holds.
    @Test func aFailedFirstRefreshSaysTheNewDatabaseIsEmpty() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { _ in .status(404) }
        let database = scratch.path("q.sqlite")
        let error = await #expect(throws: (any Error).self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: server.url("/missing").absoluteString, database: database, json: false)
        }
        await server.shutdown()
        let text = EarthquakesCLI.message(for: try #require(error))
        #expect(text.contains("Nothing was imported; the new database \(database) holds no events."), "\(text)")
        #expect(!text.contains("was not changed"), "\(text)")
        #expect(try EarthquakeStore(path: database).count() == 0)
        // A database that existed is kept, and said to be unchanged.
        try EarthquakeStore.withSample(at: database).close()
        let again = try await TestHTTPServer.start { _ in .status(404) }
        let second = await #expect(throws: (any Error).self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: again.url("/missing").absoluteString, database: database, json: false)
        }
        await again.shutdown()
        let secondText = EarthquakesCLI.message(for: try #require(second))
        #expect(secondText.hasSuffix("The database was not changed."), "\(secondText)")
        #expect(try EarthquakeStore(path: database).count() == 40)
    }

    /// A corrupt home file made `show` fail and `status` stop half-way; a folder there gave
    /// "NSCocoaErrorDomain error 512".
    @Test func aBrokenHomeIsAWarningNotAFailure() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore.withSample(at: database).close()
        let environment = ["HOME": "/nonexistent-home", "XDG_CONFIG_HOME": scratch.path("config")]
        let file = HomeLocation.path(environment: environment)
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        for junk in ["junk", "95,0"] {
            try Data(junk.utf8).write(to: URL(fileURLWithPath: file))
            let captured = CapturedConsole()
            let cli = EarthquakesCLI(
                console: captured.console, environment: environment, now: { SampleFeed.referenceDate })
            try cli.show(id: "sample0001", database: database, json: false)
            #expect(captured.stdout.contains("sample0001"))
            #expect(captured.stderr.contains("warning: the home location in \(file) is not LAT,LON"))
            #expect(captured.stderr.contains("earthquakes home --clear"))
            try await cli.status(database: database)
            #expect(captured.stdout.contains("Database"))
        }
        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.createDirectory(atPath: file, withIntermediateDirectories: true)
        let cli = EarthquakesCLI(console: CapturedConsole().console, environment: environment)
        let error = #expect(throws: CLIError.self) {
            try cli.home(set: Coordinate(latitude: 1, longitude: 2), clear: false)
        }
        #expect(error?.message.contains("is a folder, not a file") == true)
        #expect(throws: CLIError.self) { try cli.home(set: nil, clear: true) }
        #expect(FileManager.default.fileExists(atPath: file), "--clear never deletes a folder")
    }

    /// "Imported 1 earthquakes".
    @Test func oneEventIsSingular() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feed = scratch.path("feed.geojson")
        try SampleFeed.geoJSON(count: 1).write(to: URL(fileURLWithPath: feed))
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(feed: feed, database: scratch.path("q.sqlite"), json: false)
        #expect(
            captured.stdout.hasPrefix("Imported 1 event from")
                || captured.stdout.hasPrefix("Imported 1 earthquake from"))
    }

    /// `HTTP://…` passed validation, then failed "unsupported URL": schemes are case-insensitive.
    @Test func anUppercaseSchemeIsAnAddress() throws {
        guard case .url(let url) = try EarthquakesCLI.source("HTTP://Example.org/feed.geojson") else {
            Issue.record("not a URL")
            return
        }
        #expect(url.scheme == "http")
        #expect(url.absoluteString == "http://Example.org/feed.geojson")
    }

    /// Types: null showed and counted as earthquake but `--type earthquake` left it out; "" printed as
    /// "[]"; `status` grouped "Earthquake" apart from "earthquake". One rule everywhere now.
    @Test func eventTypesFollowOneRule() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        let types: [String?] = [nil, "", "Earthquake", "Quarry Blast", "quarry blast"]
        let store = try EarthquakeStore(path: database)
        let summary = try store.importFeed(
            types.enumerated().map { index, type in
                Earthquake(
                    id: "t\(index)", latitude: 1, longitude: 2, depth: 3, magnitude: 2, place: "place \(index)",
                    time: SampleFeed.referenceDate, type: type)
            })
        #expect(summary.otherTypes == ["quarry blast": 2])
        #expect(try store.typeCounts().map(\.type) == ["earthquake", "quarry blast"])
        #expect(try store.typeCounts().map(\.count) == [3, 2])
        try store.close()
        let captured = CapturedConsole()
        let cli = EarthquakesCLI.forTests(captured)
        try await cli.status(database: database)
        #expect(captured.stdout.contains("5 events (3 earthquakes, 2 quarry blasts)"), "\(captured.stdout)")
        try cli.list(ListOptions(limit: 10), database: database, json: false)
        #expect(!captured.stdout.contains("[]"))
        #expect(!captured.stdout.contains("[Earthquake]"))
    }
}
