import Baton
import BatonNetworking
import BatonTesting
import Foundation
import TestHTTPServer
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite(.timeLimit(.minutes(1))) struct URLSessionTaskJobTests {
    @Test func aDataTaskDeliversTheBodyAndTheResponse() async throws {
        let body = sampleBody(count: 100_000)
        let server = try await TestHTTPServer.start { _ in .ok(body) }
        let sizes = Recorder<Int64>()
        let job = URLSessionTaskJob(
            request: URLRequest(url: server.url("/data")), session: .forTests(),
            progress: { received, _ in sizes.record(received) })
        JobQueue().add(job)
        let outcome = await job.outcome
        await server.shutdown()

        #expect(outcome.didSucceed)
        #expect(job.data == body)
        #expect(job.statusCode == 200)
        #expect(sizes.values.last == Int64(body.count))  // the final report is the whole body
        #expect(server.requests.map(\.path) == ["/data"])
    }

    @Test(arguments: [404, 500, 503])
    func aStatusOutsideTheAcceptedRangeFailsWithAClearMessage(status: Int) async throws {
        let server = try await TestHTTPServer.start { _ in .status(status) }
        let url = server.url("/feed.geojson")
        let job = URLSessionTaskJob(request: URLRequest(url: url), session: .forTests())
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        await server.shutdown()

        #expect(error.code == .httpStatus)
        #expect(error.statusCode == status)
        #expect(error.description.hasPrefix("HTTP \(status) "))
        #expect(error.description.hasSuffix("from \(url.absoluteString)"))
        #expect(job.data == nil)
    }

    @Test func anyStatusIsAcceptedWhenTheRangeIsNil() async throws {
        let server = try await TestHTTPServer.start { _ in .status(404) }
        let job = URLSessionTaskJob(
            request: URLRequest(url: server.url("/x")), session: .forTests(), acceptableStatusCodes: nil)
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
        await server.shutdown()
        #expect(job.statusCode == 404)
    }

    @Test func cancellingTheJobCancelsTheTask() async throws {
        let arrived = Gate()
        let server = try await TestHTTPServer.start { _ in
            arrived.open()
            return .stall
        }
        let job = URLSessionTaskJob(request: URLRequest(url: server.url("/slow")), session: .forTests())
        JobQueue().add(job)
        await arrived.waitAsync()  // the request is at the server, which will never answer
        job.cancel()
        let outcome = await job.outcome
        await server.shutdown()

        #expect(outcome.isCancelled)
        #expect(outcome.error is CancellationError)
        // The task itself was cancelled and completes. Foundation may mark it completed only after the
        // completion callback that finished the job has returned (in a ThreadSanitizer run of CI it was
        // still `.canceling` when the outcome arrived); a task nobody cancelled would stay `.running`,
        // since the server never answers.
        let stopped = await eventually(within: .seconds(30)) { job.task?.state == .completed }
        #expect(stopped, "the task is \(String(describing: job.task?.state)), not completed")
        #expect(job.data == nil)
    }

    @Test func aStalledServerFailsAtTheDeadline() async throws {
        let server = try await TestHTTPServer.start { _ in .stall }
        let url = server.url("/stall")
        let job = URLSessionTaskJob(request: URLRequest(url: url), session: .forTests(), timeout: .seconds(1))
        JobQueue().add(job)
        let outcome = await job.outcome
        await server.shutdown()

        let error = try #require(outcome.error as? NetworkError)
        #expect(outcome.didFail)
        #expect(error.code == .timedOut)
        #expect(error.description.contains("within 1 second"))
        #expect(error.description.contains(url.absoluteString))
    }

    @Test func aRefusedConnectionIsATransportError() async throws {
        let port = try await closedPort()
        let job = URLSessionTaskJob(
            request: URLRequest(url: URL(string: "http://127.0.0.1:\(port)/x")!), session: .forTests())
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        #expect(error.code == .transport)
        #expect(error.description.contains("127.0.0.1:\(port)"))
    }

    @Test func aDownloadTaskHandsOverAFileInTheChosenFolder() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let body = sampleBody(count: 5_000)
        let server = try await TestHTTPServer.start { _ in .ok(body) }
        let job = URLSessionTaskJob(
            request: URLRequest(url: server.url("/file")), kind: .download(directory: folder.url), session: .forTests())
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
        await server.shutdown()

        let file = try #require(job.downloadedFile)
        #expect(file.deletingLastPathComponent().standardizedFileURL == folder.url.standardizedFileURL)
        #expect(try Data(contentsOf: file) == body)
        #expect(job.data == nil)
    }
}

/// A port on 127.0.0.1 where nothing listens (see `closedLoopbackPort()`: a port a server was shut down
/// on could be taken again, or connect to itself, while the whole suite runs).
func closedPort() async throws -> Int {
    closedLoopbackPort()
}
