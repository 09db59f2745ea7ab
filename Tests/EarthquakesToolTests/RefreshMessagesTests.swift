import BatonTesting
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

@testable import EarthquakesCLI

/// Issue 31, defect 7: what a refresh of several feeds says. It showed no download progress on a
/// terminal; `status` never mentioned an interrupted refresh waiting for `--resume`; "Imported before the
/// interruption: …" appeared when the refresh merely joined a running one; and when every feed failed,
/// the error was one enormous line naming each address twice.
@Suite(.timeLimit(.binarySuite), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct RefreshMessagesTests {
    typealias Binary = EarthquakesBinaryTests

    @Test func whenEveryFeedFailsEachHasALineNamingItOnce() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { _ in .status(404) }
        let feeds = ["/a.geojson", "/b.geojson"].map { server.url($0).absoluteString }
        let database = scratch.path("q.sqlite")
        let run = try await Binary.run(["refresh", "--feeds", feeds.joined(separator: ","), "--database", database])
        await server.shutdown()
        #expect(run.status == 1)
        let lines = run.stderr.split(separator: "\n").map(String.init)
        #expect(
            lines.first
                == "earthquakes: 2 of 2 feeds could not be refreshed (below). Nothing was imported; the new database "
                + "\(database) holds no events.", "\(run.stderr)")
        #expect(lines.count == 3, "\(run.stderr)")
        for feed in feeds {
            #expect(run.stderr.components(separatedBy: feed).count == 2, "\(feed) once in:\n\(run.stderr)")
            #expect(lines.contains { $0.hasPrefix("  ") && $0.contains(feed) && $0.contains("HTTP 404") })
        }
    }

    @Test func statusNamesAnUnfinishedRefresh() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore.withSample(at: database).close()
        try await FeedRefresh.submitOnly(
            feeds: ["https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/2.5_day.geojson", "/data/week.geojson"],
            strict: false, database: database)
        let status = try await Binary.run(["status", "--database", database])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(
            status.stdout.contains(
                "Unfinished refresh of 2.5_day, week (interrupted, started just now): 0 of 2 feeds imported; "
                    + "`earthquakes refresh --resume` finishes it\n"), "\(status.stdout)")
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/dev/ptmx"), "no /dev/ptmx (Linux pseudo-terminals)"))
    func aTerminalShowsTheDownloads() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let body = SampleFeed.geoJSON(count: 300)
        let server = try await TestHTTPServer.start { _ in .ok(body) }
        let feeds = ["/day.geojson", "/week.geojson"].map { server.url($0).absoluteString }
        let shown = try await PseudoTerminal.run(
            Binary.executable!,
            ["refresh", "--feeds", feeds.joined(separator: ","), "--database", scratch.path("q.sqlite")],
            columns: 100, errorsToo: true)
        await server.shutdown()
        let progress = shown.components(separatedBy: "\u{1B}[K").filter { $0.hasPrefix("Downloading ") }
        #expect(progress.contains { $0.contains("day ") && $0.contains(" KB") }, "\(shown.debugDescription)")
        #expect(progress.contains { $0.contains("week ") }, "\(shown.debugDescription)")
        #expect(shown.contains("Refreshed 2 feeds into"), "\(shown.debugDescription)")
    }

    /// A refresh that joins one running now says the earlier imports were that refresh's, not from before
    /// an interruption. The first refresh stops once it printed its first feed (the second feed's download
    /// is held by the server); the second joins it; then both go on.
    @Test func aJoinedRefreshDoesNotSpeakOfAnInterruption() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        let quick = SampleFeed.geoJSON(count: 5, seed: 1)
        let slow = SampleFeed.geoJSON(count: 300, seed: 2)
        let release = Gate()
        defer { release.open() }
        let server = try await TestHTTPServer.start { request in
            request.path == "/a.geojson"
                ? .ok(quick) : .partial(body: slow, sentBeforeGate: slow.count / 2, sent: nil, release: release)
        }
        let feeds = ["/a.geojson", "/b.geojson"].map { server.url($0).absoluteString }
        let arguments = ["refresh", "--feeds", feeds.joined(separator: ","), "--database", database]

        let first = try PausedRun(arguments, pauseAt: "feed-reported")
        try await first.waitUntilPaused()
        let second = try PausedRun(arguments, pauseAt: "submitted")
        try await second.waitUntilPaused()
        #expect(second.text.contains("Another refresh of these feeds is running; joining it"), "\(second.text)")
        release.open()
        second.resume()
        first.resume()
        let joined = try await second.finish("the joining refresh to end")
        let original = try await first.finish("the first refresh to end")
        await server.shutdown()
        #expect(original.status == 0, "\(original.stderr)")
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(
            joined.stdout.contains("By the refresh this one joined: Imported 5 events from \(feeds[0])"),
            "\(joined.stdout)")
        #expect(!joined.stdout.contains("interruption"), "\(joined.stdout)")
    }
}
