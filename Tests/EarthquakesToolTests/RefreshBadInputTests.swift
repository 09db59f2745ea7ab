import BatonDurable
import EarthquakesCLI
import EarthquakesKit
import EarthquakesTestData
import Foundation
import GRDB
import TestHTTPServer
import Testing

/// `earthquakes refresh` on unusual and broken feeds, served over HTTP and read from files: each gives
/// a clear one-line message, and a failure leaves the database exactly as it was.
@Suite(.timeLimit(.minutes(1))) struct RefreshBadInputTests {
    /// Refreshes a database holding the sample feed from `body` served over HTTP; returns the error
    /// message (nil on success), the database rows before and after, and the output.
    private func refresh(
        serving body: Data
    ) async throws -> (
        message: String?, before: [Earthquake], after: [Earthquake], stdout: String, stderr: String
    ) {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        try EarthquakeStore.withSample(at: path)
        let before = try EarthquakeStore(path: path).snapshot()
        let server = try await TestHTTPServer.start { _ in .ok(body) }
        let captured = CapturedConsole()
        var message: String?
        do {
            try await EarthquakesCLI.forTests(captured).refresh(
                feed: server.url("/feed").absoluteString, database: path, json: false)
        } catch {
            message = EarthquakesCLI.message(for: error)
        }
        await server.shutdown()
        return (message, before, try EarthquakeStore(path: path).snapshot(), captured.stdout, captured.stderr)
    }

    @Test func malformedJSONSaysWhereItBroke() async throws {
        let result = try await refresh(serving: Data(#"{"type":"FeatureCollection","features":[{"id":}]}"#.utf8))
        let message = try #require(result.message)
        #expect(message.contains("is not usable: the feed is not valid JSON"))
        #expect(message.contains("line 1, column"))
        #expect(message.hasSuffix("The database was not changed."))
        #expect(result.after == result.before)
    }

    /// A refresh of two feeds into `q.sqlite` in `scratch` — `good.geojson` (3 events) and `broken.geojson`,
    /// which is not valid JSON — that fails for the broken one. A refresh of several feeds: the one whose
    /// steps are durable jobs, each with its retry policy.
    static func refreshWithABrokenFeed(in scratch: Scratch) async throws -> (database: String, broken: String) {
        let path = scratch.path("q.sqlite")
        let broken = scratch.path("broken.geojson")
        let good = scratch.path("good.geojson")
        try Data(#"{"type":"FeatureCollection","features":[{"id":}]}"#.utf8).write(to: URL(fileURLWithPath: broken))
        try SampleFeed.geoJSON(count: 3, seed: 1).write(to: URL(fileURLWithPath: good))
        await #expect(throws: (any Error).self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feeds: [good, broken], resume: false, database: path, json: false)
        }
        return (path, broken)
    }

    /// Parsing the same downloaded file again gives the same answer: a feed that is not usable fails its
    /// parse at the first attempt (it was parsed three times, each failure the same), and the refresh
    /// says so at once.
    @Test func anUnusableFeedIsParsedOnce() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (path, _) = try await Self.refreshWithABrokenFeed(in: scratch)
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        let parses = try queue.read { db in
            try Row.fetchAll(
                db, sql: "SELECT name, state, attempts, last_error FROM baton_jobs WHERE name LIKE 'parse %'")
        }
        let broken = try #require(parses.first { ($0["name"] as String?)?.contains("broken") == true }, "\(parses)")
        #expect(broken["state"] as String? == "failed", "\(parses)")
        #expect(broken["attempts"] as Int? == 1, "\(parses)")
        #expect((broken["last_error"] as String?)?.contains("not valid JSON") == true, "\(parses)")
        let fine = try #require(parses.first { ($0["name"] as String?)?.contains("good") == true }, "\(parses)")
        #expect(fine["state"] as String? == "succeeded", "\(parses)")
    }

    /// A refresh of several feeds that ended with one failed is what `--resume` picks up, once the feed is
    /// fixed: it said "there is no interrupted refresh to resume", and only the same command again worked.
    @Test func aResumeAfterAFailedFeedRefreshesItsFeedsAgain() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (path, broken) = try await Self.refreshWithABrokenFeed(in: scratch)
        #expect(try EarthquakeStore(path: path).count() == 3)
        try SampleFeed.geoJSON(count: 4, seed: 2).write(to: URL(fileURLWithPath: broken))  // fixed
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(feeds: [], resume: true, database: path, json: false)
        #expect(captured.stderr.contains("ended with 1 step failed; refreshing its feeds again"), "\(captured.stderr)")
        #expect(!captured.stderr.contains("There was no interrupted refresh"), "\(captured.stderr)")
        #expect(captured.stdout.contains("Refreshed 2 feeds into \(path)."), "\(captured.stdout)")
        #expect(captured.stdout.contains("Imported 4 events from \(broken)"), "\(captured.stdout)")
        // It succeeded: nothing is left to resume.
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feeds: [], resume: true, database: path, json: false)
        }
        #expect(error?.message.hasPrefix("there is no interrupted refresh to resume") == true)
    }

    @Test func aTruncatedDownloadIsRejected() async throws {
        let full = SampleFeed.geoJSON(count: 20)
        let result = try await refresh(serving: full.prefix(full.count / 2))
        #expect(result.message?.contains("is not usable") == true)
        #expect(result.after == result.before)
    }

    @Test func generatedGeoJSONPIsAcceptedWithAWarning() async throws {
        var wrapped = Data("eqfeed_callback(".utf8)
        wrapped.append(SampleFeed.geoJSON(count: 45))
        wrapped.append(Data(");".utf8))
        let result = try await refresh(serving: wrapped)
        #expect(result.message == nil)
        #expect(result.stderr.contains("warning: the input was GeoJSONP"))
        #expect(result.after.count == 45)
    }

    @Test(.enabled(if: USGSData.isAvailable, USGSData.skipMessage))
    func recordedFixtures() async throws {
        let geojsonp = try await refresh(serving: try USGSData.fixture("all_day-2016-11.geojsonp"))
        #expect(geojsonp.message == nil)
        // The 40 sample events an older version put into the database are removed once real data arrives.
        #expect(geojsonp.after.count == 192)
        #expect(geojsonp.stdout.contains("Removed 40 SAMPLE events"))

        let seconds = try await refresh(serving: try USGSData.fixture("rewritten-seconds-2.5_week.geojson"))
        #expect(seconds.message == nil)
        #expect(seconds.stderr.contains("warning: event times look like seconds"))
        #expect(seconds.after.count == 301)

        let truncated = try await refresh(serving: try USGSData.fixture("truncated-count-mismatch.json"))
        #expect(truncated.message?.contains("metadata.count = 9104 but contains 6 features") == true)
        #expect(truncated.after == truncated.before)

        let detail = try await refresh(serving: try USGSData.fixture("detail-feature.json"))
        #expect(detail.message?.contains("single event's detail document") == true)
        #expect(detail.after == detail.before)
    }

    @Test func aLocalFileAndAMissingFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feed = scratch.path("feed.geojson")
        try SampleFeed.geoJSON(count: 12).write(to: URL(fileURLWithPath: feed))
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(feed: feed, database: scratch.path("q.sqlite"), json: false)
        #expect(captured.stdout.hasPrefix("Imported 12 earthquakes from \(feed)"))

        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: scratch.path("missing.geojson"), database: scratch.path("q.sqlite"), json: false)
        }
        #expect(
            error?.message.hasPrefix("could not read the feed file \(scratch.path("missing.geojson")): no such file")
                == true)
    }

    @Test func anUnsupportedSchemeIsRefusedBeforeAnything() async throws {
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: "ftp://example.com/x", database: "/nonexistent/q", json: false)
        }
        #expect(error?.message == "--feed ftp://example.com/x: use an http(s) address or a file path")
    }
}

/// A refresh of several feeds that waited the whole busy timeout for another program's write lock said
/// "open the store with a longer busyTimeout", advice for a programmer using the library.
@Test func aBusyJobStoreIsToldInTheUsersWords() {
    let busy = DurableError(
        code: .storeFailure,
        message:
            "cannot claim jobs in the job store at 'q.sqlite' (database is locked). Another connection held the database longer than the busy timeout; retry, or open the store with a longer busyTimeout.",
        underlying: DatabaseError(resultCode: .SQLITE_BUSY, message: "database is locked"))
    let message = EarthquakesCLI.message(for: busy)
    #expect(message.contains("the database is in use: another program"), "\(message)")
    #expect(message.contains("earthquakes refresh --resume"), "\(message)")
    #expect(!message.contains("busyTimeout"), "\(message)")
    // Other store failures keep their own message.
    let full = DurableError(
        code: .storeFailure, message: "cannot write the job store: the disk is full",
        underlying: DatabaseError(resultCode: .SQLITE_FULL, message: "database or disk is full"))
    #expect(EarthquakesCLI.message(for: full) == "cannot write the job store: the disk is full")
}
