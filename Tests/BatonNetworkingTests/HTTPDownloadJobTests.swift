import Baton
import BatonNetworking
import BatonTesting
import Foundation
import TestHTTPServer
import Testing

@Suite(.timeLimit(.minutes(1))) struct HTTPDownloadJobTests {
    @Test func theFileAppearsWholeAndNoTemporaryFileRemains() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let body = sampleBody(count: 200_000)
        let server = try await TestHTTPServer.start { _ in .ok(body) }
        let destination = folder.file("feed.geojson")
        let job = HTTPDownloadJob(url: server.url("/feed"), to: destination, session: .forTests())
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
        await server.shutdown()

        #expect(try Data(contentsOf: destination) == body)
        #expect(job.downloadedFile == destination)
        #expect(folder.contents == ["feed.geojson"])
    }

    @Test func aSuccessfulDownloadReplacesAnExistingFile() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let destination = folder.file("feed.geojson")
        try Data("old".utf8).write(to: destination)
        let server = try await TestHTTPServer.start { _ in .ok(Data("new".utf8)) }
        let job = HTTPDownloadJob(url: server.url("/feed"), to: destination, session: .forTests())
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
        await server.shutdown()
        #expect(try String(contentsOf: destination, encoding: .utf8) == "new")
        #expect(folder.contents == ["feed.geojson"])
    }

    /// The review: the replacement was made with mode 0644, so a private (0600) destination became
    /// readable by everyone. It keeps the permissions of the file it replaces; a new file is 0644.
    @Test func aReplacedFileKeepsItsPermissions() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let destination = folder.file("feed.geojson")
        try Data("old".utf8).write(to: destination)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: destination.path)
        let server = try await TestHTTPServer.start { _ in .ok(Data("new".utf8)) }
        let job = HTTPDownloadJob(url: server.url("/feed"), to: destination, session: .forTests())
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
        let fresh = folder.file("new.geojson")
        let second = HTTPDownloadJob(url: server.url("/feed"), to: fresh, session: .forTests())
        JobQueue().add(second)
        #expect(await second.outcome.didSucceed)
        await server.shutdown()
        #expect(try String(contentsOf: destination, encoding: .utf8) == "new")
        let mode = try FileManager.default.attributesOfItem(atPath: destination.path)[.posixPermissions] as? Int
        #expect(mode == 0o600, "mode \(String(mode ?? 0, radix: 8))")
        let freshMode = try FileManager.default.attributesOfItem(atPath: fresh.path)[.posixPermissions] as? Int
        #expect(freshMode.map { $0 & 0o600 } == 0o600, "mode \(String(freshMode ?? 0, radix: 8))")
    }

    @Test func anHTTPErrorLeavesTheExistingFileAsItWas() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let destination = folder.file("feed.geojson")
        try Data("previous download".utf8).write(to: destination)
        let server = try await TestHTTPServer.start { _ in .status(500) }
        let job = HTTPDownloadJob(url: server.url("/feed"), to: destination, session: .forTests())
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        await server.shutdown()

        #expect(error.code == .httpStatus)
        #expect(try String(contentsOf: destination, encoding: .utf8) == "previous download")
        #expect(folder.contents == ["feed.geojson"])
    }

    @Test func cancellingMidDownloadLeavesNoFile() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let halfSent = Gate()
        let release = Gate()
        let body = sampleBody(count: 100_000)
        let server = try await TestHTTPServer.start { _ in
            .partial(body: body, sentBeforeGate: 50_000, sent: halfSent, release: release)
        }
        let destination = folder.file("feed.geojson")
        let job = HTTPDownloadJob(url: server.url("/feed"), to: destination, session: .forTests())
        JobQueue().add(job)
        await halfSent.waitAsync()  // half the body is on its way; the rest waits for `release`
        job.cancel()
        let outcome = await job.outcome
        release.open()
        await server.shutdown()

        #expect(outcome.isCancelled)
        #expect(folder.contents.isEmpty)
        #expect(job.downloadedFile == nil)
    }

    @Test func aStalledServerTimesOutAndLeavesNoFile() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let release = Gate()
        let server = try await TestHTTPServer.start { _ in
            .partial(body: sampleBody(count: 10_000), sentBeforeGate: 1_000, sent: nil, release: release)
        }
        let job = HTTPDownloadJob(
            url: server.url("/feed"), to: folder.file("feed.geojson"), session: .forTests(), timeout: .seconds(1))
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        release.open()
        await server.shutdown()

        #expect(error.code == .timedOut)
        #expect(folder.contents.isEmpty)
    }

    @Test func aMissingFolderIsAFileError() async throws {
        let folder = try ScratchFolder()
        defer { folder.remove() }
        let server = try await TestHTTPServer.start { _ in .ok(Data("x".utf8)) }
        let destination = folder.url.appendingPathComponent("no/such/folder/feed.geojson")
        let job = HTTPDownloadJob(url: server.url("/feed"), to: destination, session: .forTests())
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? NetworkError)
        await server.shutdown()

        #expect(error.code == .file)
        #expect(error.description.contains(destination.path))
        #expect(folder.contents.isEmpty)
    }
}
