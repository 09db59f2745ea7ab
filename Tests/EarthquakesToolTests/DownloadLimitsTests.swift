import Baton
import BatonNetworking
import BatonTesting
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An HTTP probe (7 December 2026): a download had no size limit (a server that never ended its body
/// filled the disk at about 300 MB/s), and a body sent with `Content-Encoding: gzip` reached the parser
/// compressed ("the feed is gzip-compressed … gunzip FILE", advice that makes no sense for a URL).
/// Downloads on Linux (AsyncHTTPClient) now stop past a limit and inflate compressed bodies.
#if os(Linux)
@Suite(.timeLimit(.minutes(1)), .enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/gzip"), "no gzip"))
struct DownloadLimitsTests {
    /// `bytes` compressed by gzip(1), waited for off Swift's pool.
    static func gzipped(_ bytes: Data) async throws -> Data {
        try await offThePool { try gzippedBlocking(bytes) }
    }

    static func gzippedBlocking(_ bytes: Data) throws -> Data {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("body")
        try bytes.write(to: URL(fileURLWithPath: path))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/gzip")
        process.arguments = ["-n", path]
        try process.run()
        process.waitUntilExit()
        return try Data(contentsOf: URL(fileURLWithPath: path + ".gz"))
    }

    /// Downloads `path` from `server` into a fresh folder with a limit of `limit` bytes; its outcome,
    /// the file if one was kept, and what else was left in the folder.
    static func download(
        _ server: TestHTTPServer, _ path: String, limit: Int64 = FeedDownload.maximumBytes
    ) async throws -> (outcome: JobOutcome, kept: Data?, left: [String]) {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let destination = URL(fileURLWithPath: scratch.path("feed.geojson"))
        let job = FeedDownload.job(
            url: server.url(path), to: destination, session: .shared, timeout: .seconds(30),
            idleTimeout: .seconds(10), proxies: ProxySettings(environment: [:]), maximumBytes: limit)
        let queue = JobQueue(name: "download")
        queue.add(job)
        let outcome = await job.outcome
        let kept = try? Data(contentsOf: destination)
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.url.path)
            .filter { $0 != "feed.geojson" }
        return (outcome, kept, left)
    }

    static func failure(_ outcome: JobOutcome) -> NetworkError? {
        guard case .failed(let error) = outcome else { return nil }
        return error as? NetworkError
    }

    @Test func aBodyOverTheLimitIsRefusedAndNothingIsKept() async throws {
        let big = Data(repeating: UInt8(ascii: "x"), count: 2 << 20)
        let text = Data(String(repeating: #"{"type":"Feature"},"#, count: 200_000).utf8)  // 3.6 MB, compresses well
        let compressed = try await Self.gzipped(text)
        let server = try await TestHTTPServer.start { request in
            switch request.path {
            case "/announced": .respond(status: 200, headers: [], body: big)
            default: .respond(status: 200, headers: [("Content-Encoding", "gzip")], body: compressed)
            }
        }
        defer { Task { await server.shutdown() } }

        let announced = try await Self.download(server, "/announced", limit: 1 << 20)
        let refused = try #require(Self.failure(announced.outcome), "\(announced.outcome)")
        #expect(refused.code == .tooLarge)
        #expect(refused.description.contains("announces 2.0 MB, more than the limit of 1.0 MB"), "\(refused)")
        #expect(announced.kept == nil)
        #expect(announced.left.isEmpty, "left: \(announced.left)")

        // Small on the wire, over the limit once inflated: stopped as it arrives.
        #expect(compressed.count < 1 << 20)
        let inflated = try await Self.download(server, "/inflates", limit: 1 << 20)
        let stopped = try #require(Self.failure(inflated.outcome), "\(inflated.outcome)")
        #expect(stopped.code == .tooLarge, "\(stopped)")
        #expect(inflated.kept == nil)
        #expect(inflated.left.isEmpty, "left: \(inflated.left)")
    }

    @Test func aCompressedBodyIsInflatedAndADamagedOneIsSaidToBe() async throws {
        let feed = Data(#"{"type":"FeatureCollection","features":[]}"#.utf8)
        let compressed = try await Self.gzipped(feed)
        let server = try await TestHTTPServer.start { request in
            switch request.path {
            case "/gzip": .respond(status: 200, headers: [("Content-Encoding", "gzip")], body: compressed)
            default:
                .respond(status: 200, headers: [("Content-Encoding", "gzip")], body: compressed.prefix(10) + feed)
            }
        }
        defer { Task { await server.shutdown() } }

        let good = try await Self.download(server, "/gzip")
        #expect(good.kept == feed, "\(good.outcome)")
        let damaged = try await Self.download(server, "/damaged")
        let error = try #require(Self.failure(damaged.outcome), "\(damaged.outcome)")
        #expect(error.description.contains("could not be decompressed"), "\(error)")
        #expect(damaged.kept == nil)
        #expect(damaged.left.isEmpty, "left: \(damaged.left)")
    }

    /// A probe (7 December 2026, night): a body cut short said "the server's response is not valid
    /// HTTP", and a compressed body cut short "failed: truncatedData".
    @Test func aBodyCutShortIsSaidToBe() async throws {
        let feed = Data(
            (#"{"type":"FeatureCollection","features":["# + String(repeating: " ", count: 4_000) + "]}").utf8)
        let compressed = try await Self.gzipped(feed)
        let server = try await TestHTTPServer.start { request in
            switch request.path {
            case "/cut": .cutOff(body: feed, sentBeforeClose: 1_000)
            default:
                .respond(
                    status: 200, headers: [("Content-Encoding", "gzip")], body: compressed.prefix(compressed.count / 2))
            }
        }
        defer { Task { await server.shutdown() } }
        let cut = try #require(Self.failure(try await Self.download(server, "/cut").outcome))
        #expect(cut.description.contains("the connection was cut before the response was complete"), "\(cut)")
        let truncated = try #require(Self.failure(try await Self.download(server, "/gzip-cut").outcome))
        #expect(truncated.description.contains("is cut short or damaged"), "\(truncated)")
    }
}
#endif
