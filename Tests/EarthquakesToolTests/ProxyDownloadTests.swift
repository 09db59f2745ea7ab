import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

/// Issue 10, defect 8: with `http_proxy` set, `refresh` goes through the proxy — its reachability check
/// included — even when the feed's host cannot be resolved from this machine. The executable is run as
/// a separate process so that the environment variable is read as a user's shell would pass it.
@Suite(.timeLimit(.binarySuite)) struct ProxyDownloadTests {
    @Test(
        .enabled(
            if: EarthquakesBinaryTests.executable != nil, "the earthquakes executable is not built; skipping"))
    func refreshGoesThroughTheProxyOfHttpProxy() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ProxyDownloadTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let feed = SampleFeed.geoJSON(count: 12)
        // The loopback server plays the proxy: it receives the absolute URL and answers for the server.
        let proxy = try await TestHTTPServer.start { request in
            request.uri == "http://feeds.invalid/2.5_day.geojson" ? .ok(feed) : .status(502)
        }
        let database = folder.appendingPathComponent("q.sqlite").path
        let run = try await EarthquakesBinaryTests.run(
            ["refresh", "--feed", "http://feeds.invalid/2.5_day.geojson", "--database", database],
            environment: ["http_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": ""])
        await proxy.shutdown()

        #expect(run.status == 0, "\(run.stderr)")
        #expect(proxy.requests.map(\.uri) == ["http://feeds.invalid/2.5_day.geojson"])
        #expect(try EarthquakeStore(path: database, mode: .readOnly).count() == 12)
    }
}
