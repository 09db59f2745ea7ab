import Baton
import BatonNetworking
import BatonTesting
import EarthquakesKit
import EarthquakesTestData
import Foundation
import TestHTTPServer
import Testing

/// The download → parse → import composite against a real HTTP server on 127.0.0.1.
@Suite(.timeLimit(.minutes(1))) struct GetEarthquakesTests {
    @Test func importsAFeedServedOverHTTP() async throws {
        let server = try await TestHTTPServer.start { _ in .ok(SampleFeed.data) }
        let store = try EarthquakeStore.inMemory()
        let progress = Recorder<GetEarthquakes.Progress>()
        let activity = NetworkActivityObserver()
        let get = GetEarthquakes(
            source: .url(server.url("/summary/sample.geojson")), store: store, activity: activity,
            progress: { progress.record($0) })
        #expect(get.jobs.first?.conditions.map(\.name) == ["reachability of 127.0.0.1 port \(server.port)"])
        let summary = try await get.run()
        await server.shutdown()

        #expect(summary.inserted == 40 && summary.total == 40)
        #expect(try store.count() == 40)
        #expect(try store.earthquake(id: "sample0001") == (try FeedParser().parse(SampleFeed.data)).earthquakes[0])
        #expect(activity.activeCount == 0)
        let events = progress.values
        #expect(events.first == .checkingHost("127.0.0.1 port \(server.port)"))
        #expect(events.contains(.parsing))
        #expect(events.contains(.importing(count: 40)))
        #expect(events.last == .imported(summary))
    }

    @Test(.enabled(if: USGSData.isAvailable, USGSData.skipMessage))
    func importsARecordedUSGSFeedServedOverHTTP() async throws {
        let data = try USGSData.data("2.5_month-2025-10.geojson")
        let server = try await TestHTTPServer.start { _ in .ok(data) }
        let store = try EarthquakeStore.inMemory()
        let summary = try await GetEarthquakes(source: .url(server.url("/2.5_month.geojson")), store: store).run()
        await server.shutdown()

        let feed = try FeedParser().parse(data)
        #expect(summary.inserted == 1349)
        #expect(try store.count() == 1349)
        for quake in [feed.earthquakes.first!, feed.earthquakes.last!, feed.earthquakes[674]] {
            #expect(try store.earthquake(id: quake.id) == quake)
        }
    }

    @Test(arguments: [404, 500, 503])
    func anHTTPErrorIsReportedAndTheStoreIsUnchanged(status: Int) async throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(FeedParser().parse(SampleFeed.geoJSON(count: 5)))
        let before = try store.snapshot()
        let server = try await TestHTTPServer.start { _ in .status(status) }
        let url = server.url("/feed.geojson")
        let error = try await #require(throws: NetworkError.self) {
            try await GetEarthquakes(source: .url(url), store: store).run()
        }
        await server.shutdown()

        #expect(error.code == .httpStatus)
        #expect(error.description.hasPrefix("HTTP \(status) "))
        #expect(error.description.hasSuffix("from \(url.absoluteString)"))
        #expect(try store.snapshot() == before)
    }

    @Test func aStalledServerTimesOutAndTheStoreIsUnchanged() async throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(FeedParser().parse(SampleFeed.geoJSON(count: 5)))
        let before = try store.snapshot()
        let server = try await TestHTTPServer.start { _ in .stall }  // accepts, never answers
        let error = try await #require(throws: NetworkError.self) {
            try await GetEarthquakes(source: .url(server.url("/feed")), store: store, timeout: .seconds(1)).run()
        }
        await server.shutdown()

        #expect(error.code == .timedOut)
        #expect(error.description.contains("within 1 second"))
        #expect(try store.snapshot() == before)
    }

    @Test func cancellingMidDownloadLeavesNoFileAndNoImport() async throws {
        let work = try Scratch()
        defer { work.remove() }
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(FeedParser().parse(SampleFeed.geoJSON(count: 5)))
        let before = try store.snapshot()
        let halfSent = Gate()
        let release = Gate()
        let body = SampleFeed.geoJSON(count: 400)
        let server = try await TestHTTPServer.start { _ in
            .partial(body: body, sentBeforeGate: body.count / 2, sent: halfSent, release: release)
        }
        let get = GetEarthquakes(source: .url(server.url("/feed")), store: store, workFolder: work.url)
        let run = Task { try await get.run() }
        await halfSent.waitAsync()  // half the feed is on the wire; the rest waits for `release`
        get.cancel()
        let result = await run.result
        release.open()
        await server.shutdown()

        #expect(throws: CancellationError.self) { try result.get() }
        #expect(work.contents.isEmpty, "no partial or temporary file is left behind")
        #expect(try store.snapshot() == before)
        #expect(get.jobs.allSatisfy { $0.outcomeIfDecided?.isCancelled == true })
    }

    @Test func cancellingTheCallingTaskCancelsTheRefresh() async throws {
        let store = try EarthquakeStore.inMemory()
        let arrived = Gate()
        let server = try await TestHTTPServer.start { _ in
            arrived.open()
            return .stall
        }
        let get = GetEarthquakes(source: .url(server.url("/feed")), store: store)
        let run = Task { try await get.run() }
        await arrived.waitAsync()
        run.cancel()
        let result = await run.result
        await server.shutdown()
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(try store.count() == 0)
    }

    @Test func anUnreachableServerFailsFastWithoutDownloading() async throws {
        let port = closedLoopbackPort()  // nothing listens there
        let store = try EarthquakeStore.inMemory()
        let url = URL(string: "http://127.0.0.1:\(port)/feed")!
        let get = GetEarthquakes(source: .url(url), store: store, timeout: .seconds(10))
        let error = try await #require(throws: NetworkError.self) { try await get.run() }

        #expect(error.code == .unreachable)
        #expect(error.description.contains("cannot reach 127.0.0.1 port \(port)"))
        #expect(get.jobs.dropFirst().allSatisfy { $0.outcomeIfDecided?.isCancelled == true })  // nothing else ran
    }

    @Test func aSecondRefreshWaitsForTheFirstImportAndNeitherLosesData() async throws {
        let store = try EarthquakeStore.inMemory()
        let scope = ExclusivityScope(name: "imports under test")
        let events = Recorder<String>()
        let firstImporting = Gate()
        let releaseFirst = Gate()
        let firstFeed = SampleFeed.geoJSON(count: 30, seed: 1)
        // The same ids sample0001…0010, other values, revised later (an older copy would not replace them).
        let secondFeed = SampleFeed.geoJSON(
            count: 10, seed: 2, referenceDate: SampleFeed.referenceDate.addingTimeInterval(8 * 86_400))
        let server = try await TestHTTPServer.start { request in
            .ok(request.path == "/first" ? firstFeed : secondFeed)
        }

        let first = GetEarthquakes(
            source: .url(server.url("/first")), store: store, exclusivityScope: scope,
            progress: { progress in
                switch progress {
                case .importing:
                    events.record("first importing")
                    firstImporting.open()
                    releaseFirst.wait()  // hold the import slot
                case .imported: events.record("first imported")
                default: break
                }
            })
        let second = GetEarthquakes(
            source: .url(server.url("/second")), store: store, exclusivityScope: scope,
            progress: { progress in
                switch progress {
                case .importing: events.record("second importing")
                case .imported: events.record("second imported")
                default: break
                }
            })

        let firstRun = Task { try await first.run() }
        await firstImporting.waitAsync()
        let secondRun = Task { try await second.run() }
        // The second refresh downloads and parses while the first import holds the slot...
        let secondParse = second.jobs[second.jobs.count - 2]
        let secondImport = second.jobs[second.jobs.count - 1]
        #expect(await secondParse.outcome.didSucceed)
        // ...but its import waits.
        #expect(secondImport.state < .executing)
        #expect(!events.values.contains("second importing"))
        events.record("first released")
        releaseFirst.open()

        let firstSummary = try await firstRun.value
        let secondSummary = try await secondRun.value
        await server.shutdown()

        #expect(
            events.values == [
                "first importing", "first released", "first imported", "second importing", "second imported",
            ])
        #expect(firstSummary.inserted == 30 && firstSummary.total == 30)
        #expect(secondSummary.updated == 10 && secondSummary.total == 10)
        // Nothing lost: 30 rows, the first ten as the second feed has them, the rest as the first.
        let firstQuakes = try FeedParser().parse(firstFeed).earthquakes
        let secondQuakes = try FeedParser().parse(secondFeed).earthquakes
        #expect(try store.count() == 30)
        #expect(try store.earthquake(id: "sample0001") == secondQuakes[0])
        #expect(try store.earthquake(id: "sample0030") == firstQuakes[29])
    }
}
