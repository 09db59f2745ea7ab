import Baton
import BatonNetworking
import BatonTesting
import Foundation
import TestHTTPServer
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Progress while bytes arrive, the idle timeout against the total limit, and no file left behind.
@Suite(.timeLimit(.minutes(1))) struct TransferTests {
    @Test func progressAdvancesWhileTheBodyArrives() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let body = sampleBody(count: 300_000)
        let release = Gate()
        let server = try await TestHTTPServer.start { _ in
            .partial(body: body, sentBeforeGate: 100_000, sent: nil, release: release)
        }
        let midway = Gate()
        let reports = Recorder<Int64>()
        let job = HTTPDownloadJob(
            url: server.url("/feed"), to: folder.file("feed.geojson"), session: .forTests(),
            progress: { received, expected in
                reports.record(received)
                if received >= 100_000 && expected == 300_000 { midway.open() }
            })
        JobQueue().add(job)
        await midway.waitAsync()  // a third of the body arrived, and was reported, before the rest was sent
        #expect(job.outcomeIfDecided == nil)
        #expect(reports.values.last == 100_000)
        release.open()
        #expect(await job.outcome.didSucceed)
        await server.shutdown()
        #expect(reports.values.last == 300_000)
        #expect(reports.values == reports.values.sorted())
    }

    @Test func aSlowButSteadyDownloadOutlastsItsIdleTimeout() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let body = sampleBody(count: 12_000)
        // 12 pieces; the test sends each one and moves the job's clock 2 s on after it arrived: 22 s in
        // all, far past the 3 s idle timeout, but never 3 s without a byte.
        let send = (0..<12).map { _ in Gate() }
        let arrived = (0..<12).map { _ in Gate() }
        let server = try await TestHTTPServer.start { _ in
            .paced(body: body, chunkSize: 1_000, next: { await send[$0].waitAsync() })
        }
        let clock = ManualClock()
        let job = HTTPDownloadJob(
            url: server.url("/feed"), to: folder.file("feed.geojson"), session: .forTests(),
            idleTimeout: .seconds(3), clock: clock,
            progress: { received, _ in
                for piece in 0..<12 where received >= Int64(piece + 1) * 1_000 { arrived[piece].open() }
            })
        JobQueue().add(job)
        // A job that fails early (a wrong idle limit) must not leave the loop below waiting for a piece.
        Task {
            _ = await job.outcome
            arrived.forEach { $0.open() }
        }
        try await withDeadline(.seconds(30), "the paced download", report: { "clock at \(clock.now)" }) {
            for piece in 0..<12 {
                send[piece].open()
                await arrived[piece].waitAsync()
                if job.outcomeIfDecided != nil { break }
                if piece < 11 { clock.advance(by: .seconds(2)) }
            }
        }
        send.forEach { $0.open() }  // lets the server's pacing task end if the loop stopped early
        let outcome = await job.outcome
        await server.shutdown()
        #expect(outcome.didSucceed, "\(String(describing: outcome.error))")
        #expect(clock.now.offset == .seconds(22))
        #expect(try Data(contentsOf: folder.file("feed.geojson")) == body)
    }

    @Test func aStalledDownloadFailsAtItsIdleTimeoutSayingHowMuchArrived() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let release = Gate()
        let server = try await TestHTTPServer.start { _ in
            .partial(body: sampleBody(count: 40_000), sentBeforeGate: 20_480, sent: nil, release: release)
        }
        let url = server.url("/feed")
        let clock = ManualClock()
        let firstHalf = Gate()
        let job = HTTPDownloadJob(
            url: url, to: folder.file("feed.geojson"), session: .forTests(), idleTimeout: .seconds(30), clock: clock,
            progress: { received, _ in if received >= 20_480 { firstHalf.open() } })
        JobQueue().add(job)
        try await withDeadline(.seconds(30), "the first 20 KB") { await firstHalf.waitAsync() }
        clock.advance(by: .seconds(29))
        #expect(job.outcomeIfDecided == nil)  // not yet: 29 s without a byte
        clock.advance(by: .seconds(1))
        // Measured on the test's clock: the job fails now, not 30 real seconds later.
        try await withDeadline(.seconds(10), "the idle timeout on the test's clock") { _ = await job.outcome }
        let error = try #require(await job.outcome.error as? NetworkError)
        release.open()
        await server.shutdown()

        #expect(error.code == .timedOut)
        #expect(
            error.description.hasPrefix(
                "no data from \(url.absoluteString) within 30 seconds (20 KB of 39 KB received)"))
        #expect(error.description.contains("stalled"))
        #expect(folder.contents.isEmpty)  // no partial, no temporary file
    }

    @Test func theTotalLimitIsSeparateFromTheIdleTimeout() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let server = try await TestHTTPServer.start { _ in
            // 30 s of steady data (never idle) against a 0.7 s total limit: slack for a loaded machine.
            .drip(body: sampleBody(count: 30_000), chunkSize: 100, interval: .milliseconds(100))
        }
        let url = server.url("/feed")
        let job = HTTPDownloadJob(
            url: url, to: folder.file("feed.geojson"), session: .forTests(), timeout: .milliseconds(700),
            idleTimeout: .seconds(30))
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        await server.shutdown()
        #expect(error.code == .timedOut)
        #expect(error.description.hasPrefix("no complete response from \(url.absoluteString) within 0.7 seconds"))
        #expect(folder.contents.isEmpty)
    }

    @Test func aCutOffDownloadLeavesNoFile() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let before = Self.sessionTemporaryFiles()
        let server = try await TestHTTPServer.start { _ in
            .cutOff(body: sampleBody(count: 50_000), sentBeforeClose: 20_000)
        }
        let job = HTTPDownloadJob(url: server.url("/feed"), to: folder.file("feed.geojson"), session: .forTests())
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        await server.shutdown()
        #expect(error.code == .transport)
        #expect(folder.contents.isEmpty)
        #expect(Self.sessionTemporaryFiles().subtracting(before).isEmpty)
    }

    @Test func aCancelledDownloadLeavesNoTemporaryFileAnywhere() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let before = Self.sessionTemporaryFiles()
        let halfSent = Gate()
        let release = Gate()
        let server = try await TestHTTPServer.start { _ in
            .partial(body: sampleBody(count: 100_000), sentBeforeGate: 50_000, sent: halfSent, release: release)
        }
        let job = HTTPDownloadJob(url: server.url("/feed"), to: folder.file("feed.geojson"), session: .forTests())
        JobQueue().add(job)
        await halfSent.waitAsync()
        job.cancel()
        #expect(await job.outcome.isCancelled)
        release.open()
        await server.shutdown()
        #expect(folder.contents.isEmpty)
        #expect(Self.sessionTemporaryFiles().subtracting(before).isEmpty)
    }

    /// The files `URLSession` download tasks write in the temporary folder (`CFNetworkDownload_*.tmp`);
    /// the jobs use data tasks and must not create any.
    static func sessionTemporaryFiles() -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory())) ?? []
        return Set(names.filter { $0.hasPrefix("CFNetworkDownload") })
    }
}
