import BatonDurable
import BatonTesting
import EarthquakesKit
import Foundation
import GRDB
import TestHTTPServer
import Testing

@testable import EarthquakesCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The job store's tables in an earthquakes database.
enum JobTables {
    /// Whether the database at `path` holds a job store. (Read on a connection that may write, which
    /// removes SQLite's log when it closes, as the tool's own connections do; a read-only one would
    /// leave it.)
    static func exist(in path: String) throws -> Bool {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in try db.tableExists("baton_durable_meta") }
    }

    /// How many refresh-log lines the database holds for `source`.
    static func refreshLogLines(in path: String, source: String) throws -> Int {
        let queue = try DatabaseQueue(path: path)
        defer { try? queue.close() }
        return try queue.read { db in
            guard try db.tableExists("refresh_log") else { return 0 }
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM refresh_log WHERE source = ?", arguments: [source])
                ?? 0
        }
    }
}

/// Issue 28: a refresh of several feeds imports each feed in the transaction that records its job's
/// completion, so a refresh killed at any moment has imported a feed and recorded it, or neither, and a
/// resumed refresh imports no feed twice.
@Suite(.serialized) struct RefreshOneTransactionTests {
    typealias Binary = EarthquakesBinaryTests

    /// Two feed files in `scratch`: 3 events, and 4 (the sample's ids are numbered, so 4 events in all).
    static func feeds(_ scratch: Scratch) throws -> [String] {
        let a = scratch.path("a.geojson")
        let b = scratch.path("b.geojson")
        try SampleFeed.geoJSON(count: 3, seed: 1).write(to: URL(fileURLWithPath: a))
        try SampleFeed.geoJSON(count: 4, seed: 2).write(to: URL(fileURLWithPath: b))
        return [a, b]
    }

    /// Killed just after the first import's transaction committed: the feed and its completion are both
    /// in, so the resumed refresh does not import it again (the refresh log has one line for it, not two).
    /// The second feed's server does not answer until the resume, so nothing else finishes meanwhile.
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func aRefreshKilledAfterAnImportCommittedDoesNotImportItAgain() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let answering = Recorder<Bool>()  // empty: /b stalls; one value: it is answered
        let server = try await TestHTTPServer.start { request in
            if request.path == "/b", answering.values.isEmpty { return .stall }
            return .ok(SampleFeed.geoJSON(count: request.path == "/a" ? 3 : 4, seed: 1))
        }
        defer { Task { await server.shutdown() } }
        let feeds = ["/a", "/b"].map { server.url($0).absoluteString }
        let database = scratch.path("q.sqlite")
        let first = try PausedRun(
            ["refresh", "--feeds", feeds.joined(separator: ","), "--database", database], pauseAt: "committed")
        try await first.waitUntilPaused()
        first.send(SIGKILL)
        _ = try await first.finish("the killed refresh to end")

        #expect(try EarthquakeStore(path: database, mode: .readOnly).count() == 3)
        #expect(try JobTables.refreshLogLines(in: database, source: feeds[0]) == 1)

        answering.record(true)
        let resumed = try await Binary.run(["refresh", "--resume", "--database", database])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("1 of 2 feeds were imported before it stopped"), "\(resumed.stderr)")
        #expect(try EarthquakeStore(path: database, mode: .readOnly).count() == 4)
        // One import of each feed: the first was not imported again by the resumed refresh.
        #expect(try JobTables.refreshLogLines(in: database, source: feeds[0]) == 1)
        #expect(try JobTables.refreshLogLines(in: database, source: feeds[1]) == 1)
    }

    /// Killed inside the first import's transaction, before its commit: neither the rows nor the job's
    /// completion are in; the resumed refresh imports both feeds, once each.
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func aRefreshKilledBeforeAnImportCommittedLeavesNeitherRowsNorCompletion() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feeds = try Self.feeds(scratch)
        let database = scratch.path("q.sqlite")
        let first = try PausedRun(
            ["refresh", "--feeds", feeds.joined(separator: ","), "--database", database], pauseAt: "before-commit")
        try await first.waitUntilPaused()
        first.send(SIGKILL)
        _ = try await first.finish("the killed refresh to end")

        #expect(try EarthquakeStore(path: database, mode: .readOnly).count() == 0)
        #expect(try JobTables.refreshLogLines(in: database, source: feeds[0]) == 0)
        let jobs = try SQLiteJobStore(path: database)
        let run = try #require(try await jobs.unfinishedRuns(named: FeedRefresh.runName).first)
        let snapshot = try await jobs.snapshot(of: run.id)
        try jobs.close()
        #expect(!snapshot.jobs.contains { $0.kind == ImportFeed.kind && $0.state == .succeeded })

        let resumed = try await Binary.run(["refresh", "--resume", "--database", database])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("0 of 2 feeds were imported before it stopped"), "\(resumed.stderr)")
        #expect(try EarthquakeStore(path: database, mode: .readOnly).count() == 4)
        #expect(try JobTables.refreshLogLines(in: database, source: feeds[0]) == 1)
        #expect(try JobTables.refreshLogLines(in: database, source: feeds[1]) == 1)
    }

    /// Killed while a parse was running: its attempt was lost to the crash, not to the feed, so the
    /// resumed refresh parses that feed again rather than failing it.
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func aParseKilledMidwayIsRunAgainOnResume() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feeds = try Self.feeds(scratch)
        let database = scratch.path("q.sqlite")
        let first = try PausedRun(
            ["refresh", "--feeds", feeds.joined(separator: ","), "--database", database], pauseAt: "parsed")
        try await first.waitUntilPaused()
        first.send(SIGKILL)
        _ = try await first.finish("the killed refresh to end")

        let resumed = try await Binary.run(["refresh", "--resume", "--database", database])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("Refreshed 2 feeds into \(database)."), "\(resumed.stdout)")
        #expect(try EarthquakeStore(path: database, mode: .readOnly).count() == 4)
    }

    /// An older version's job store, `<database>.jobs`, holding an interrupted refresh: the next
    /// `refresh --resume` moves its runs into the database, finishes the refresh and deletes the file.
    @Test func anOlderVersionsJobStoreIsMovedInAndItsRefreshResumed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feeds = try Self.feeds(scratch)
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).close()
        // What an older version left: the graph of a refresh, submitted and never run, in `<database>.jobs`.
        let legacy = try SQLiteJobStore(path: LegacyJobStore.path(forDatabase: database))
        _ = try await legacy.submit(
            FeedRefresh.graph(feeds: feeds, strict: false, database: database).graph,
            uniqueKey: FeedRefresh.uniqueKey(feeds: feeds, strict: false))
        try legacy.close()
        let captured = CapturedConsole()
        // `status` reports it before it is moved.
        let before = await EarthquakesCLI.forTests(captured).unfinishedRefreshes(database: database)
        #expect(before.count == 1, "\(before)")

        try await EarthquakesCLI.forTests(captured).refresh(feeds: [], resume: true, database: database, json: false)

        #expect(try EarthquakeStore(path: database, mode: .readOnly).count() == 4)
        #expect(!FileManager.default.fileExists(atPath: LegacyJobStore.path(forDatabase: database)))
        #expect(captured.stdout.contains("Refreshed 2 feeds into \(database)."), "\(captured.stdout)")
        let after = await EarthquakesCLI.forTests(captured).unfinishedRefreshes(database: database)
        #expect(after.isEmpty, "\(after)")
    }

    /// A read never adds the job store's tables to a database: `status` of a database that never had a
    /// refresh of several feeds leaves it without them.
    @Test func statusDoesNotAddTheJobStoreToADatabase() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        let store = try EarthquakeStore(path: database)
        try store.importFeed(try FeedParser().parse(SampleFeed.geoJSON(count: 2)))
        try store.close()
        let lines = await EarthquakesCLI.forTests(CapturedConsole()).unfinishedRefreshes(database: database)
        #expect(lines.isEmpty)
        #expect(try !JobTables.exist(in: database))
    }
}
