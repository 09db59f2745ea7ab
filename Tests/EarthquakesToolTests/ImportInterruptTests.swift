import BatonTesting
import EarthquakesKit
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 31, defect 1: Ctrl-C during the import of `refresh --feed FILE`, sent to the real executable at
/// exact moments (``PausedRun``). Before the commit it rolls the import back and says so (exit 130);
/// after it, nothing is undone and the tool says the data is in (exit 0). Before the fix the import
/// ignored the signal and finished without a word, or the process ended with 130 saying nothing (or
/// after printing "Imported …") while the data was in.
@Suite(.timeLimit(.minutes(2)), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct ImportInterruptTests {
    /// A database holding the 40 sample events, and a feed of 400 events (40 of them updating those).
    struct Setup {
        let scratch: Scratch
        let database: String
        let feed: String
        let before: [Earthquake]

        init() throws {
            scratch = try Scratch()
            database = scratch.path("q.sqlite")
            feed = scratch.path("feed.geojson")
            try SampleFeed.geoJSON(count: 400, seed: 7).write(to: URL(fileURLWithPath: feed))
            let store = try EarthquakeStore.withSample(at: database)
            before = try store.snapshot()
            try store.close()
        }

        var arguments: [String] { ["refresh", "--feed", feed, "--database", database] }

        func rows() throws -> [Earthquake] {
            let store = try EarthquakeStore(path: database, mode: .readOnly)
            defer { try? store.close() }
            return try store.snapshot()
        }

        func lastRefresh() throws -> RefreshRecord? {
            let store = try EarthquakeStore(path: database, mode: .readOnly)
            defer { try? store.close() }
            return try store.lastRefresh()
        }
    }

    /// Ctrl-C at `point` (the first row written, or the last moment before `COMMIT`): rolled back.
    @Test(arguments: ["import-started", "before-commit"])
    func controlCBeforeTheCommitRollsBack(point: String) async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        let run = try PausedRun(setup.arguments, pauseAt: point)
        try await run.waitUntilPaused()
        try await run.interrupt()
        run.resume()
        let result = try await run.finish()
        #expect(result.status == 130, "\(result.stderr)")
        #expect(result.stderr == "Cancelled; the database was not changed.\n")
        #expect(result.stdout.isEmpty)
        #expect(try setup.rows() == setup.before)
        #expect(try setup.lastRefresh() == nil)
    }

    /// A probe: SIGTERM (`kill`, a service manager) and SIGHUP (the terminal closed) ended the process
    /// at once, leaving its partial download behind (1.4 GB from an endless feed). They now stop it as
    /// Ctrl-C does, with the exit status of the signal.
    @Test(arguments: [(SIGTERM, 143), (SIGHUP, 129)] as [(Int32, Int32)])
    func terminationAndHangUpCancelAsControlCDoes(signal: Int32, status: Int32) async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        let run = try PausedRun(setup.arguments, pauseAt: "import-started")
        try await run.waitUntilPaused()
        try await run.interrupt(signal)
        run.resume()
        let result = try await run.finish()
        #expect(result.status == status, "\(result.stderr)")
        #expect(result.stderr == "Cancelled; the database was not changed.\n")
        #expect(try setup.rows() == setup.before)
    }

    /// Ctrl-C right after `COMMIT` returned (inside the store), once the job returned, and after the result
    /// was printed: nothing is undone, the result is printed, and a line says the data is in.
    @Test(arguments: ["committed", "imported", "reported"])
    func controlCAfterTheCommitKeepsTheImportAndSaysSo(point: String) async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        let run = try PausedRun(setup.arguments, pauseAt: point)
        try await run.waitUntilPaused()
        try await run.interrupt()
        run.resume()
        let result = try await run.finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("Imported 400 "))
        #expect(
            result.stderr
                == "Ctrl-C came after the import had committed, so nothing was cancelled: the 400 events of this "
                + "refresh are in \(setup.database).\n")
        #expect(try setup.rows().count == 400)
        #expect(try setup.lastRefresh() != nil)
    }

    /// A second Ctrl-C ends the process at once (130), saying whether the import is in: not when it
    /// came before the commit.
    @Test func secondControlCBeforeTheCommitStopsAtOnceWithNothingImported() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        let run = try PausedRun(setup.arguments, pauseAt: "import-started")
        try await run.waitUntilPaused()
        try await run.interrupt()
        run.send(SIGINT)  // the second: the process ends while its import is still paused
        let result = try await run.finish("the process to end at the second Ctrl-C")
        #expect(result.status == 130, "\(result.stderr)")
        #expect(result.stderr == "Stopped at once (a second Ctrl-C); the database was not changed.\n")
        #expect(try setup.rows() == setup.before)
    }

    /// … and that the data is in when the import had committed.
    @Test func secondControlCAfterTheCommitSaysTheDataIsIn() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        let run = try PausedRun(setup.arguments, pauseAt: "committed")
        try await run.waitUntilPaused()
        try await run.interrupt()
        run.send(SIGINT)
        let result = try await run.finish("the process to end at the second Ctrl-C")
        #expect(result.status == 130, "\(result.stderr)")
        #expect(
            result.stderr
                == "Stopped at once (a second Ctrl-C); the import had committed: its events are in the database.\n")
        #expect(try setup.rows().count == 400)
    }
}
