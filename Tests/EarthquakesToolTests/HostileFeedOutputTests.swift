import BatonTesting
import EarthquakesKit
import Foundation
import GRDB
import Testing

@testable import EarthquakesCLI

/// What a hostile-feed probe found in the tool's output (7 December 2026): feed text and file names
/// printed raw, a warning line for every one of 20,000 unreadable features, and a refresh that imported
/// nothing from a feed none of whose features could be read reported as a success.
@Suite(.timeLimit(.minutes(1))) struct HostileFeedOutputTests {
    static func feature(_ id: String, type: String = "earthquake", mag: String = "3") -> String {
        #"{"type":"Feature","properties":{"mag":\#(mag),"time":1700000000000,"type":"\#(type)"},"geometry":{"type":"Point","coordinates":[139.7,35.7,10]},"id":"\#(id)"}"#
    }

    static func feed(_ features: [String]) -> Data {
        Data(#"{"type":"FeatureCollection","features":[\#(features.joined(separator: ","))]}"#.utf8)
    }

    @Test func anEventTypeAndAFileNameReachTheTerminalSafe() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feed = scratch.path("x\u{1B}[31mred.geojson")
        try Self.feed([Self.feature("a"), Self.feature("b", type: #"\u001b[31mboom"#)]).write(
            to: URL(fileURLWithPath: feed))
        let captured = CapturedConsole()
        let cli = EarthquakesCLI.forTests(captured)
        let database = scratch.path("q.sqlite")
        try await cli.refresh(feed: feed, database: database, json: false)
        try await cli.status(database: database)
        #expect(!captured.stdout.contains("\u{1B}"), "\(captured.stdout.debugDescription)")
        #expect(!captured.stderr.contains("\u{1B}"), "\(captured.stderr.debugDescription)")
        #expect(captured.stdout.contains("\u{FFFD}[31mboom"), "\(captured.stdout)")
        #expect(EarthquakesCLI.feedName(feed) == "x\u{FFFD}[31mred")
    }

    /// A refresh of several feeds read each file twice (parse, then import), and mapped it: a pipe failed
    /// with "You don't have permission".
    @Test func aPipeIsOneOfSeveralFeeds() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let fifo = scratch.path("pipe.geojson")
        #expect(mkfifo(fifo, 0o600) == 0)
        let bytes = Self.feed([Self.feature("p1"), Self.feature("p2")])
        let writer = Thread {
            if let handle = FileHandle(forWritingAtPath: fifo) {
                handle.write(bytes)
                try? handle.close()
            }
        }
        writer.start()
        let other = scratch.path("other.geojson")
        try Self.feed([Self.feature("o1")]).write(to: URL(fileURLWithPath: other))
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(
            feeds: [fifo, other], resume: false, database: scratch.path("q.sqlite"), json: false)
        #expect(try EarthquakeStore(path: scratch.path("q.sqlite")).count() == 3, "\(captured.stderr)")
    }

    @Test func aFeedOfOnlyUnreadableFeaturesFailsWithItsWarningsCounted() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feed = scratch.path("bad.geojson")
        try Self.feed((0..<50).map { Self.feature("f\($0)", mag: "\"bad\"") }).write(to: URL(fileURLWithPath: feed))
        let captured = CapturedConsole()
        let cli = EarthquakesCLI.forTests(captured)
        let error = try await #require(throws: CLIError.self) {
            try await cli.refresh(feed: feed, database: scratch.path("q.sqlite"), json: false)
        }
        #expect(error.message.contains("none of the 50 features"), "\(error.message)")
        // The database this first refresh created is kept and said to hold nothing, as after any failed
        // first refresh (a doc audit: this one alone did not say so).
        #expect(
            error.message.hasSuffix(". The new database \(scratch.path("q.sqlite")) holds no events"),
            "\(error.message)")
        let warnings = captured.stderr.split(separator: "\n")
        #expect(warnings.count == 21, "\(captured.stderr)")
        #expect(warnings.last?.contains("30 more warnings not shown") == true, "\(captured.stderr)")
        // Not recorded as a refresh; in JSON, the error is said.
        let status = CapturedConsole()
        try await EarthquakesCLI.forTests(status).status(database: scratch.path("q.sqlite"))
        #expect(status.stdout.contains("Refreshed  not recorded"), "\(status.stdout)")
        let json = CapturedConsole()
        await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(json).refresh(feed: feed, database: scratch.path("q.sqlite"), json: true)
        }
        #expect(json.stdout.contains("\"error\" : \"none of the 50 features"), "\(json.stdout)")
        // One readable feature among them: a refresh that imported something succeeds, as before.
        try Self.feed([Self.feature("ok")] + (0..<5).map { Self.feature("g\($0)", mag: "\"bad\"") })
            .write(to: URL(fileURLWithPath: feed))
        try await cli.refresh(feed: feed, database: scratch.path("q.sqlite"), json: false)
    }

    /// Among several feeds, one whose every feature is unreadable fails and is not recorded as a refresh:
    /// the log of refreshes (what `status` shows as the last one) named it as one that imported nothing.
    @Test func anUnreadableFeedAmongSeveralIsNotRecordedAsARefresh() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let good = scratch.path("good.geojson")
        try Self.feed([Self.feature("a")]).write(to: URL(fileURLWithPath: good))
        let bad = scratch.path("bad.geojson")
        try Self.feed((0..<3).map { Self.feature("f\($0)", mag: "\"bad\"") }).write(to: URL(fileURLWithPath: bad))
        let database = scratch.path("q.sqlite")
        let captured = CapturedConsole()
        let error = try await #require(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(captured).refresh(
                feeds: [good, bad], resume: false, database: database, json: false)
        }
        #expect(error.message.contains("1 of 2 feeds could not be refreshed"), "\(error.message)")
        #expect(try EarthquakeStore(path: database).count() == 1)
        let sources = try await DatabaseQueue(path: database).read { db in
            try String.fetchAll(db, sql: "SELECT source FROM refresh_log")
        }
        #expect(sources == [good], "only the readable feed's refresh is recorded")
    }

    /// `refresh --json` of one feed wrote nothing on standard output when the refresh failed: a script
    /// read empty input exactly when something went wrong.
    @Test func aFailedRefreshStillWritesItsJSON() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        struct Failure: Decodable {
            var source: String
            var database: String
            var error: String
        }
        let database = scratch.path("q.sqlite")
        let broken = scratch.path("broken.geojson")
        try Data("[1,".utf8).write(to: URL(fileURLWithPath: broken))
        for (feed, says) in [(scratch.path("missing.geojson"), "missing.geojson"), (broken, "not valid JSON")] {
            let captured = CapturedConsole()
            let error = try await #require(throws: CLIError.self) {
                try await EarthquakesCLI.forTests(captured).refresh(feed: feed, database: database, json: true)
            }
            #expect(!error.isUsage)
            let object = try JSONDecoder().decode(Failure.self, from: Data(captured.stdout.utf8))
            #expect(object.source.hasSuffix(feed.split(separator: "/").last.map(String.init) ?? feed))
            #expect(object.database == database)
            #expect(object.error == error.message)
            #expect(object.error.contains(says), "\(object.error)")
        }
    }

    /// `status` showed only the feeds a refresh of several feeds imported, not that another failed.
    @Test func statusSaysTheLastRefreshOfSeveralFeedsFailed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let good = scratch.path("good.geojson")
        try Self.feed([Self.feature("a")]).write(to: URL(fileURLWithPath: good))
        let broken = scratch.path("broken.geojson")
        try Data("[1,".utf8).write(to: URL(fileURLWithPath: broken))
        let database = scratch.path("q.sqlite")
        await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feeds: [good, broken], resume: false, database: database, json: false)
        }
        let status = CapturedConsole()
        try await EarthquakesCLI.forTests(status).status(database: database)
        #expect(
            status.stdout.contains(
                "The last refresh of good, broken ended with 1 step failed; "
                    + "`earthquakes refresh --resume` refreshes its feeds again"), "\(status.stdout)")
    }
}
