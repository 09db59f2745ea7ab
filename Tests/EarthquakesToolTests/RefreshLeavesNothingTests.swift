import BatonNetworking
import BatonTesting
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

/// Issue 10, defect 7: a refresh that times out, is cut off or is cancelled leaves neither its
/// temporary folder nor a partial file, and does not touch the store.
@Suite(.timeLimit(.minutes(1))) struct RefreshLeavesNothingTests {
    @Test func aStalledRefreshLeavesNoWorkFolder() async throws {
        let store = try EarthquakeStore.inMemory()
        let release = Gate()
        let body = SampleFeed.geoJSON(count: 200)
        let server = try await TestHTTPServer.start { _ in
            .partial(body: body, sentBeforeGate: body.count / 2, sent: nil, release: release)
        }
        let get = GetEarthquakes(source: .url(server.url("/feed")), store: store, timeout: .milliseconds(400))
        let error = try await #require(throws: NetworkError.self) { try await get.run() }
        release.open()
        await server.shutdown()
        #expect(error.code == .timedOut)
        #expect(error.description.contains("no data from"))
        #expect(!FileManager.default.fileExists(atPath: get.workFolder.path))
        #expect(try store.count() == 0)
    }

    @Test func aCutOffRefreshLeavesNoWorkFolder() async throws {
        let store = try EarthquakeStore.inMemory()
        let body = SampleFeed.geoJSON(count: 200)
        let server = try await TestHTTPServer.start { _ in .cutOff(body: body, sentBeforeClose: body.count / 3) }
        let get = GetEarthquakes(source: .url(server.url("/feed")), store: store)
        await #expect(throws: NetworkError.self) { try await get.run() }
        await server.shutdown()
        #expect(!FileManager.default.fileExists(atPath: get.workFolder.path))
        #expect(try store.count() == 0)
    }

    @Test func aCancelledRefreshLeavesNoWorkFolder() async throws {
        let store = try EarthquakeStore.inMemory()
        let halfSent = Gate()
        let release = Gate()
        let body = SampleFeed.geoJSON(count: 200)
        let server = try await TestHTTPServer.start { _ in
            .partial(body: body, sentBeforeGate: body.count / 2, sent: halfSent, release: release)
        }
        let get = GetEarthquakes(source: .url(server.url("/feed")), store: store)
        let run = Task { try await get.run() }
        await halfSent.waitAsync()
        get.cancel()
        let result = await run.result
        release.open()
        await server.shutdown()
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(!FileManager.default.fileExists(atPath: get.workFolder.path))
        #expect(try store.count() == 0)
    }
}
