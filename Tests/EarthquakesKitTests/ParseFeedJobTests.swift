import Baton
import Foundation
import Testing

@testable import EarthquakesKit

@Suite(.timeLimit(.minutes(1))) struct ParseFeedJobTests {
    @Test func parsesBytesAndFiles() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = URL(fileURLWithPath: directory.path("feed.geojson"))
        try SampleFeed.geoJSON(count: 7).write(to: file)

        let fromData = ParseFeedJob(input: .data(SampleFeed.data))
        let fromFile = ParseFeedJob(input: .file(file))
        JobQueue().add([fromData, fromFile])
        #expect(await fromData.outcome.didSucceed)
        #expect(await fromFile.outcome.didSucceed)
        #expect(fromData.feed?.earthquakes.count == 40)
        #expect(fromFile.feed?.earthquakes.count == 7)
    }

    @Test func failsWithTheParsersErrorOrAFileError() async throws {
        let bad = ParseFeedJob(input: .data(Data("[1,".utf8)))
        let missing = ParseFeedJob(input: .file(URL(fileURLWithPath: "/nonexistent/feed.geojson")))
        JobQueue().add([bad, missing])
        #expect((await bad.outcome.error as? FeedError)?.code == .malformedJSON)
        let fileError = try #require(await missing.outcome.error as? FeedFileError)
        #expect(fileError.description == "could not read the feed file /nonexistent/feed.geojson: no such file")
        #expect(bad.feed == nil)
    }

    /// A feed from a pipe was read to its end by a blocking read: a stalled command ignored Ctrl-C and
    /// `--timeout`, a FIFO that no writer opened waited for ever, and `/dev/zero` filled memory.
    @Test func aPipeIsReadCancellablyWithinItsIdleTimeAndSize() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let fifo = directory.path("feed.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let url = URL(fileURLWithPath: fifo)
        // No writer: a cancel stops the read (here at once), instead of an open that waits for one.
        #expect(throws: CancellationError.self) { try ParseFeedJob.read(url) { true } }
        // No writer and no byte for the idle time: a failure that says so.
        let stalled = #expect(throws: FeedFileError.self) {
            try ParseFeedJob.read(url, idleTimeout: .milliseconds(300))
        }
        #expect(stalled?.reason.contains("no byte came for") == true, "\(stalled.map { "\($0)" } ?? "")")
        // A device that never ends: refused past the limit.
        let endless = #expect(throws: FeedFileError.self) {
            try ParseFeedJob.read(URL(fileURLWithPath: "/dev/zero"), maximumBytes: 1 << 20)
        }
        #expect(endless?.reason.contains("more than 1 MB") == true)
        // A writer that writes and closes: read whole.
        let bytes = SampleFeed.geoJSON(count: 3)
        let writer = Thread {
            if let handle = FileHandle(forWritingAtPath: fifo) {
                handle.write(bytes)
                try? handle.close()
            }
        }
        writer.start()
        #expect(try ParseFeedJob.read(url, idleTimeout: .seconds(30)) == bytes)
    }
}
