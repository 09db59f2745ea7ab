import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

@testable import EarthquakesCLI

/// `refresh --timeline PATH --trace PATH` writes the picture of that refresh's jobs.
@Suite struct RefreshPictureTests {
    @Test func aRefreshWritesItsTimelinePageAndTrace() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { _ in .ok(SampleFeed.data) }
        let captured = CapturedConsole(isErrorTerminal: false)
        let (html, trace) = (scratch.path("run.html"), scratch.path("run.json"))
        try await EarthquakesCLI.forTests(captured).refresh(
            feed: server.url("/feed").absoluteString, database: scratch.path("q.sqlite"), json: false,
            picture: RunPicture(timeline: html, trace: trace))
        await server.shutdown()

        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.hasPrefix("<!DOCTYPE html>"))
        #expect(page.contains("queue get earthquakes"))
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: trace)))
        let events = try #require((object as? [String: Any])?["traceEvents"] as? [[String: Any]])
        let ran = events.filter { $0["ph"] as? String == "X" }
        #expect(ran.count >= 3, "the refresh group, its download/parse and its import")
        #expect(ran.allSatisfy { $0["cat"] as? String == "succeeded" })
        #expect(captured.stderr.contains("Wrote the timeline of \(ran.count) jobs to \(html)."))
        #expect(captured.stderr.contains("Wrote the trace of \(ran.count) jobs to \(trace)."))
    }

    @Test func aRefreshOfSeveralFeedsDrawsEveryAttempt() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feeds = ["/a": RefreshFeedsTests.feeds["/a"]!, "/b": RefreshFeedsTests.feeds["/b"]!]
        let server = try await TestHTTPServer.start { request in feeds[request.path].map { .ok($0) } ?? .status(404) }
        let captured = CapturedConsole(isErrorTerminal: false)
        let (html, trace) = (scratch.path("run.html"), scratch.path("run.json"))
        let addresses = ["/a", "/b"].map { server.url($0).absoluteString }
        try await EarthquakesCLI.forTests(captured).refresh(
            feeds: addresses, resume: false, database: scratch.path("q.sqlite"), json: false,
            picture: RunPicture(timeline: html, trace: trace))
        await server.shutdown()

        let page = try String(contentsOfFile: html, encoding: .utf8)
        #expect(page.hasPrefix("<!DOCTYPE html>"))
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: trace)))
        let events = try #require((object as? [String: Any])?["traceEvents"] as? [[String: Any]])
        let ran = events.filter { $0["ph"] as? String == "X" }
        let names = Set(ran.compactMap { $0["name"] as? String })
        for address in addresses {
            for step in ["fetch", "parse", "import"] {
                #expect(names.contains("\(step) \(address)"), "no \(step) of \(address) in \(names.sorted())")
            }
        }
        #expect(ran.allSatisfy { $0["cat"] as? String == "succeeded" })
        #expect(captured.stderr.contains("Wrote the timeline of \(ran.count) jobs to \(html)."))
    }

    @Test func aPathInAFolderThatDoesNotExistIsAUsageError() {
        let error = #expect(throws: CLIError.self) {
            try RunPicture.check("/nonexistent-folder/run.html", option: "--timeline")
        }
        #expect(
            error?.message
                == "--timeline /nonexistent-folder/run.html: the folder /nonexistent-folder does not exist; create it or give another path"
        )
        #expect(throws: Never.self) { try RunPicture.check(nil, option: "--trace") }
    }

    /// The probe: `--timeline` naming the database overwrote it with HTML, `--trace` the feed file, and a
    /// folder was found only after the import. All are refused before anything is read or written.
    @Test func aPicturePathThatIsTheDatabaseAFeedOrAFolderIsRefusedFirst() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (database, feed) = (scratch.path("q.sqlite"), scratch.path("feed.geojson"))
        try EarthquakeStore.withSample(at: database).close()
        try SampleFeed.data.write(to: URL(fileURLWithPath: feed))
        try FileManager.default.createDirectory(atPath: scratch.path("folder"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: scratch.path("link"), withDestinationPath: scratch.url.path)
        let databaseBytes = try Data(contentsOf: URL(fileURLWithPath: database))
        let cases: [(RunPicture, String)] = [
            (RunPicture(timeline: database, trace: nil), "would overwrite the database"),
            (RunPicture(timeline: scratch.path("link") + "/q.sqlite", trace: nil), "would overwrite the database"),
            (RunPicture(timeline: nil, trace: database + "-wal"), "would overwrite the database"),
            (
                RunPicture(timeline: nil, trace: scratch.path("./folder/../earthquakes-sample.sqlite")),
                "sample database"
            ),
            (RunPicture(timeline: nil, trace: feed), "would overwrite the feed file"),
            (RunPicture(timeline: scratch.path("folder"), trace: nil), "is a folder"),
            (RunPicture(timeline: scratch.path("same"), trace: scratch.path("same")), "the --timeline file"),
        ]
        for (picture, expected) in cases {
            for several in [false, true] {
                let captured = CapturedConsole()
                let cli = EarthquakesCLI.forTests(captured)
                let error = await #expect(throws: CLIError.self) {
                    if several {
                        try await cli.refresh(
                            feeds: [feed, feed + ".b"], resume: false, database: database, json: false,
                            picture: picture)
                    } else {
                        try await cli.refresh(feed: feed, database: database, json: false, picture: picture)
                    }
                }
                #expect(error?.isUsage == true)
                #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
                #expect(!captured.stdout.contains("Imported"))
            }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == databaseBytes)
        #expect(try Data(contentsOf: URL(fileURLWithPath: feed)) == SampleFeed.data)
        #expect(!FileManager.default.fileExists(atPath: LegacyJobStore.path(forDatabase: database)))
    }
    /// The review: `--timeline /unwritable/run.html` was found only after the import. A folder that
    /// cannot be written in is a usage error before anything is read or written.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/sys/kernel")))
    func aPictureInAFolderThatCannotBeWrittenIsRefusedFirst() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        for several in [false, true] {
            let captured = CapturedConsole()
            let cli = EarthquakesCLI.forTests(captured)
            let picture = RunPicture(timeline: "/sys/run.html", trace: nil)
            let error = await #expect(throws: CLIError.self) {
                if several {
                    try await cli.refresh(
                        feeds: ["/nonexistent/a.geojson", "/nonexistent/b.geojson"], resume: false,
                        database: database, json: false, picture: picture)
                } else {
                    try await cli.refresh(
                        feed: "/nonexistent/a.geojson", database: database, json: false, picture: picture)
                }
            }
            #expect(error?.isUsage == true)
            #expect(
                error?.message.hasPrefix("--timeline /sys/run.html: cannot write in the folder /sys (") == true,
                "\(error?.message ?? "no error")")
        }
        #expect(!FileManager.default.fileExists(atPath: database))
        #expect(FileManager.default.subpaths(atPath: "/sys")?.contains { $0.hasPrefix(".earthquakes-picture") } != true)
    }

    /// The review: when the picture could not be written after the import (its folder was checked, but
    /// went away meanwhile), the refresh ended with exit 1 before saying what it imported, recording the
    /// refresh, or (several feeds) removing its downloads. Now all of that happens, then the command fails
    /// naming the file.
    @Test func aPictureThatCannotBeWrittenAfterTheImportFailsTheCommandAfterTheReport() async throws {
        for several in [false, true] {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let pictures = scratch.path("pictures")
            try FileManager.default.createDirectory(atPath: pictures, withIntermediateDirectories: true)
            let feeds = ["/a": RefreshFeedsTests.feeds["/a"]!, "/b": RefreshFeedsTests.feeds["/b"]!]
            let server = try await TestHTTPServer.start { request in
                try? FileManager.default.removeItem(atPath: pictures)  // gone once the refresh has begun
                return feeds[request.path].map { .ok($0) } ?? .status(404)
            }
            let captured = CapturedConsole(isErrorTerminal: false)
            let cli = EarthquakesCLI.forTests(captured)
            let database = scratch.path("q.sqlite")
            let html = pictures + "/run.html"
            let error = await #expect(throws: CLIError.self) {
                if several {
                    try await cli.refresh(
                        feeds: ["/a", "/b"].map { server.url($0).absoluteString }, resume: false, database: database,
                        json: false, picture: RunPicture(timeline: html, trace: nil))
                } else {
                    try await cli.refresh(
                        feed: server.url("/a").absoluteString, database: database, json: false,
                        picture: RunPicture(timeline: html, trace: nil))
                }
            }
            await server.shutdown()
            #expect(error?.isUsage == false)
            #expect(error?.exitStatus == 1)
            let message = error?.message ?? ""
            #expect(
                message.hasPrefix("the refresh finished (see above), but could not write the timeline to \(html)"),
                "\(message)")
            #expect(captured.stdout.contains("Imported 5 "), "\(captured.stdout)")
            if several { #expect(captured.stdout.contains("Refreshed 2 feeds into \(database).")) }
            let store = try EarthquakeStore(path: database, mode: .readOnly)
            defer { try? store.close() }
            #expect(try store.lastRefresh() != nil, "the refresh was not recorded")
            #expect(try store.count() == (several ? 11 : 5))
            let downloads = database + ".downloads"
            let left = (try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? []
            #expect(left.isEmpty, "downloads left behind in \(downloads): \(left)")
        }
    }
}
