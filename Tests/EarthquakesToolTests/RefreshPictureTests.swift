import EarthquakesCLI
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

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
}
