import BatonTesting
import EarthquakesCLI
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Ctrl-C during a refresh of several feeds.
@Suite(.timeLimit(.minutes(1))) struct RefreshInterruptTests {
    /// The review: Ctrl-C began the worker's graceful shutdown, which let the downloads run on for its
    /// grace period (10 s) and printed nothing meanwhile. Now the downloads are cancelled at once: the
    /// refresh ends while the server still holds both transfers half-way, says which feeds it stopped,
    /// and leaves no temporary download file. The grace period is set to an hour, so that ending at
    /// all within the deadline proves the downloads were cancelled, however slow the machine.
    @Test func controlCCancelsTheRunningDownloadsAtOnce() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let sent = ["/a": Gate(), "/b": Gate()]
        let release = Gate()
        defer { release.open() }
        let body = SampleFeed.geoJSON(count: 400)
        let server = try await TestHTTPServer.start { request in
            .partial(body: body, sentBeforeGate: body.count / 2, sent: sent[request.path], release: release)
        }
        let interrupts = Interrupts()
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).close()
        var cli = EarthquakesCLI(
            console: CapturedConsole().console, environment: ["HOME": "/nonexistent-home"],
            session: URLSession(configuration: .ephemeral), interrupts: interrupts)
        cli.shutdownGracePeriod = .seconds(3600)
        let addresses = ["/a", "/b"].map { server.url($0).absoluteString }
        let refresh = Task {
            try await cli.refresh(feeds: addresses, resume: false, database: database, json: false)
        }
        await sent["/a"]!.waitAsync()
        await sent["/b"]!.waitAsync()
        interrupts.interrupt()
        // Both transfers stay half-sent until the refresh has ended: only cancelling them ends it.
        try await withDeadline(.seconds(45), "the refresh ends after Ctrl-C without waiting for the grace period") {
            _ = await refresh.result
        }
        release.open()
        await server.shutdown()
        let failure: (any Error)?
        if case .failure(let error) = await refresh.result { failure = error } else { failure = nil }
        let error = try #require(failure as? CLIError)
        #expect(error.isCancellation)
        #expect(error.exitStatus == 130)
        #expect(
            error.message.contains("Stopped before importing \(addresses[0]), \(addresses[1]).")
                || error.message.contains("Stopped before importing \(addresses[1]), \(addresses[0])."),
            "\(error.message)")
        let left = (FileManager.default.subpaths(atPath: scratch.url.path) ?? []).filter {
            ($0 as NSString).lastPathComponent.hasPrefix(".baton-download-")
        }
        #expect(left.isEmpty, "temporary download files left: \(left)")
        #expect(try EarthquakeStore(path: database).count() == 0)
    }
}
