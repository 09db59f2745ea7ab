import Baton
import BatonNetworking
import BatonTesting
import Foundation
import TestHTTPServer
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a probe with hostile local servers found, each pinned by its scenario.
@Suite(.timeLimit(.minutes(1))) struct HostileServerTests {
    /// Linux's Foundation does not tell the delegate of a 302 without a `Location`: the job succeeded
    /// with no response, and replaced the existing file with an empty one.
    @Test func aRedirectWithoutALocationFailsAndLeavesTheFileAlone() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let destination = folder.file("feed.geojson")
        try Data("precious".utf8).write(to: destination)
        let server = try await TestHTTPServer.start { _ in
            .respond(status: 302, headers: [("Content-Type", "text/plain")], body: Data("no location".utf8))
        }
        let job = HTTPDownloadJob(url: server.url("/moved"), to: destination, session: .forTests())
        JobQueue().add(job)
        let outcome = await job.outcome
        await server.shutdown()
        let error = try #require(outcome.error as? NetworkError, "\(outcome)")
        #expect(error.code == .httpStatus || error.code == .transport, "\(error)")
        #expect(try String(contentsOf: destination, encoding: .utf8) == "precious")
        #expect(folder.contents == ["feed.geojson"])
    }

    /// Job names and messages go to logs and dashboards: a password in the address is masked.
    @Test func aPasswordInTheAddressIsNeverShown() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let server = try await TestHTTPServer.start { _ in .status(404) }
        let url = try #require(URL(string: "http://alice:s3cret@127.0.0.1:\(server.port)/missing"))
        let job = HTTPDownloadJob(url: url, to: folder.file("out"), session: .forTests())
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        await server.shutdown()
        #expect(error.code == .httpStatus)
        #expect(!error.description.contains("s3cret") && error.description.contains("alice:***@"), "\(error)")
        #expect(!job.name.contains("s3cret"), "\(job.name)")
    }

    /// The size a response announces is checked against the limit before any byte: the job used to wait
    /// for the body (here, for ever).
    @Test func aSizeAnnouncedOverTheLimitStopsTheTransferAtOnce() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let release = Gate()
        defer { release.open() }
        let server = try await TestHTTPServer.start { _ in
            .partial(body: sampleBody(count: 1_000), sentBeforeGate: 0, sent: nil, release: release)
        }
        let job = HTTPDownloadJob(
            url: server.url("/big"), to: folder.file("out"), session: .forTests(), timeout: .seconds(20),
            maximumBytes: 10)
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        release.open()
        await server.shutdown()
        #expect(error.code == .tooLarge, "\(error)")
        #expect(error.description.contains("announces 1000 bytes"), "\(error)")
        #expect(folder.contents.isEmpty)
    }

    /// An error status says more than what became of the error page: it was reported as a file error
    /// (the folder is missing) or as too large, and the page was written where the download was to go.
    @Test func anErrorStatusIsReportedBeforeWhatBecameOfItsBody() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let server = try await TestHTTPServer.start { request in
            request.path == "/big" ? .respond(status: 500, headers: [], body: sampleBody(count: 2_000)) : .status(404)
        }
        let missing = HTTPDownloadJob(
            url: server.url("/gone"), to: folder.file("no such folder/out"), session: .forTests())
        let large = HTTPDownloadJob(
            url: server.url("/big"), to: folder.file("out"), session: .forTests(), maximumBytes: 1_000)
        JobQueue().add([missing, large])
        let missingError = try #require(await missing.outcome.error as? NetworkError)
        let largeError = try #require(await large.outcome.error as? NetworkError)
        await server.shutdown()
        #expect(missingError.statusCode == 404, "\(missingError)")
        #expect(largeError.statusCode == 500, "\(largeError)")
        #expect(folder.contents.isEmpty)
    }

    /// The job's session kept its configuration's request timeout, so an idle timeout longer than it
    /// was cut short (to 60 seconds by default) and reported as a transport failure.
    @Test func anIdleTimeoutLongerThanTheSessionsRequestTimeoutIsKept() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let server = try await TestHTTPServer.start { _ in
            .drip(body: Data("ab".utf8), chunkSize: 1, interval: .milliseconds(1_500))
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 1
        let job = HTTPDownloadJob(
            url: server.url("/slow"), to: folder.file("out"), session: URLSession(configuration: configuration),
            idleTimeout: .seconds(5))
        JobQueue().add(job)
        let outcome = await job.outcome
        await server.shutdown()
        #expect(outcome.didSucceed, "\(outcome)")
    }

    @Test func theSessionsOwnRequestTimeoutIsATimeout() async throws {
        let server = try await TestHTTPServer.start { _ in .stall }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 1
        // A total limit of its own does not lift the session's idle limit (the request timeout).
        let job = URLSessionTaskJob(
            request: URLRequest(url: server.url("/stall")), session: URLSession(configuration: configuration),
            timeout: .seconds(30))
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        await server.shutdown()
        #expect(error.code == .timedOut, "\(error)")
        #expect(error.description.contains("request timeout of 1 second"), "\(error)")
    }

    /// `UInt64(seconds * 1e9)` stopped the program for a timeout of centuries.
    @Test func aReachabilityCheckWithAHugeTimeoutDoesNotStop() async throws {
        let condition = ReachabilityCondition(
            host: "127.0.0.1", port: closedLoopbackPort(), timeout: .seconds(20_000_000_000))
        await #expect(throws: NetworkError.self) { try await condition.check() }
        #expect(ReachabilityCondition(url: URL(string: "http://127.0.0.1:70000/")!) == nil)
    }
}
