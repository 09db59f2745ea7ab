import BatonTesting
import EarthquakesKit
import Foundation
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

/// Issue 11, requirement 10: a refresh of several feeds is a durable graph that a crash does not lose.
@Suite(.timeLimit(.binarySuite)) struct RefreshFeedsTests {
    typealias Binary = EarthquakesBinaryTests

    /// Three small feeds, /a, /b and /c, of different events (ids of their own, so the order of the
    /// imports does not change the database).
    static let feeds: [String: Data] = [
        "/a": feed(count: 5, seed: 101, prefix: "a"),
        "/b": feed(count: 6, seed: 202, prefix: "b"),
        "/c": feed(count: 7, seed: 303, prefix: "c"),
    ]

    static func feed(count: Int, seed: UInt64, prefix: String) -> Data {
        let text = String(decoding: SampleFeed.geoJSON(count: count, seed: seed), as: UTF8.self)
        return Data(text.replacingOccurrences(of: "\"id\":\"sample", with: "\"id\":\"\(prefix)-sample").utf8)
    }

    /// How many distinct events the feeds at `paths` hold together.
    static func distinctEvents(_ paths: [String]) throws -> Int {
        var ids = Set<String>()
        for path in paths {
            for quake in try FeedParser().parse(try #require(feeds[path])).earthquakes { ids.insert(quake.id) }
        }
        return ids.count
    }

    static func requests(_ server: TestHTTPServer, _ path: String) -> Int {
        server.requests.filter { $0.path == path }.count
    }

    @Test func severalFeedsAreAllImported() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { request in
            Self.feeds[request.path].map { .ok($0) } ?? .status(404)
        }
        defer { Task { await server.shutdown() } }
        let database = scratch.path("q.sqlite")
        let captured = CapturedConsole()
        let feeds = ["/a", "/b", "/c"].map { server.url($0).absoluteString }

        try await EarthquakesCLI.forTests(captured).refresh(
            feeds: feeds, resume: false, database: database, json: false)

        #expect(try EarthquakeStore(path: database).count() == Self.distinctEvents(["/a", "/b", "/c"]))
        for path in ["/a", "/b", "/c"] {
            #expect(Self.requests(server, path) == 1, "\(path) downloaded \(Self.requests(server, path)) times")
            #expect(captured.stdout.contains("from \(server.url(path).absoluteString) into \(database)"))
        }
        #expect(captured.stdout.hasSuffix("Refreshed 3 feeds into \(database).\n"), "\(captured.stdout)")
        // The graph lives in the database itself, with no file beside it; the downloads are gone.
        #expect(try JobTables.exist(in: database))
        #expect(!FileManager.default.fileExists(atPath: LegacyJobStore.path(forDatabase: database)))
        // Every connection was closed: the file holds its rows alone, with no SQLite log beside it.
        #expect(
            SQLiteSideFiles.left(beside: database).isEmpty,
            "left beside \(database): \(SQLiteSideFiles.left(beside: database))")
        let downloads = (try? FileManager.default.contentsOfDirectory(atPath: database + ".downloads")) ?? []
        #expect(downloads.isEmpty, "left behind: \(downloads)")
        // Nor is the empty folder they were in.
        #expect(!FileManager.default.fileExists(atPath: database + ".downloads"))

        // The same feeds again: a new refresh (the finished one was pruned), everything downloaded again.
        try await EarthquakesCLI.forTests(captured).refresh(
            feeds: feeds, resume: false, database: database, json: false)
        #expect(Self.requests(server, "/a") == 2)
    }

    @Test func aBadFeedIsNamedAndTheOthersAreImported() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { request in
            if request.path == "/bad" { return .ok(Data("{\"type\": \"Feature\", \"oops\": [1, 2".utf8)) }
            return Self.feeds[request.path].map { .ok($0) } ?? .status(404)
        }
        defer { Task { await server.shutdown() } }
        let database = scratch.path("q.sqlite")
        let bad = server.url("/bad").absoluteString
        let feeds = [server.url("/a").absoluteString, bad, server.url("/c").absoluteString]

        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feeds: feeds, resume: false, database: database, json: false)
        }
        let failure = try #require(error)
        let message = EarthquakesCLI.message(for: failure)
        #expect(message.hasPrefix("1 of 3 feeds could not be refreshed (below)."), "\(message)")
        #expect(failure.details.count == 1 && failure.details[0].contains(bad), "\(failure.details)")
        #expect(message.contains("The other 2 feeds were imported into \(database)."), "\(message)")
        #expect(try EarthquakeStore(path: database).count() == Self.distinctEvents(["/a", "/c"]))
    }

    /// A probe saw three requests to a feed that answered 404 (and to one that answered 429 with
    /// `Retry-After: 120`) within 1.5 s, and three tries of a stalled feed took three times
    /// `--total-timeout`. A status that says the request is wrong, and a time limit that passed, are
    /// not tried again; a server error (503) still is.
    @Test func aMissingFeedOrATimeLimitIsNotTriedAgainAServerErrorIs() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { request in
            switch request.path {
            case "/missing": .status(404)
            case "/limited": .status(429)
            case "/busy": .status(503)
            case "/stalled": .stall
            default: Self.feeds[request.path].map { .ok($0) } ?? .status(404)
            }
        }
        defer { Task { await server.shutdown() } }
        let feeds = ["/a", "/missing", "/limited", "/busy", "/stalled"].map { server.url($0).absoluteString }
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feeds: feeds, resume: false, database: scratch.path("q.sqlite"), json: false, totalTimeout: .seconds(1))
        }
        #expect(error?.details.count == 4, "\(String(describing: error?.details))")
        #expect(Self.requests(server, "/a") == 1)
        #expect(Self.requests(server, "/missing") == 1, "a 404 is not tried again")
        #expect(Self.requests(server, "/limited") == 1, "nor a 429 (asked to ask less often)")
        #expect(Self.requests(server, "/stalled") == 1, "a time limit that passed is not tried again")
        #expect(Self.requests(server, "/busy") == 3, "a 503 is tried three times")
    }

    /// The first refresh imports /a, then waits on /b and /c (the server never answers) and is killed with
    /// SIGKILL; `refresh --resume` downloads only /b and /c, and the database ends as after one
    /// uninterrupted refresh.
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func aKilledRefreshResumesWithOnlyTheRemainingFeeds() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let answering = Recorder<Bool>()  // empty: /b and /c stall; one value: they are answered
        let server = try await TestHTTPServer.start { request in
            if request.path != "/a", answering.values.isEmpty { return .stall }
            return Self.feeds[request.path].map { .ok($0) } ?? .status(404)
        }
        defer { Task { await server.shutdown() } }
        let database = scratch.path("q.sqlite")
        let feeds = ["/a", "/b", "/c"].map { server.url($0).absoluteString }

        let first = try KilledProcess(
            arguments: ["refresh", "--feeds", feeds.joined(separator: ","), "--database", database])
        let output = await first.output(until: "Imported 5 events from \(feeds[0])", deadline: .seconds(20))
        first.kill()
        await first.waitForExit()
        defer { first.remove() }
        #expect(output != nil, "the first refresh never said it imported /a; its errors: \(first.stderr)")
        #expect(Self.requests(server, "/a") == 1)

        answering.record(true)
        let resumed = try await Binary.run(["refresh", "--resume", "--database", database])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("1 of 3 feeds were imported before it stopped"), "\(resumed.stderr)")
        #expect(resumed.stdout.contains("Refreshed 3 feeds into \(database)."), "\(resumed.stdout)")
        // /a was not downloaded again; /b and /c once each by the resumed refresh (plus the stalled tries).
        #expect(Self.requests(server, "/a") == 1)
        #expect(Self.requests(server, "/b") == 2)
        #expect(Self.requests(server, "/c") == 2)

        let uninterrupted = scratch.path("u.sqlite")
        try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
            feeds: feeds, resume: false, database: uninterrupted, json: false)
        let expected = try EarthquakeStore(path: uninterrupted).snapshot()
        let events = try Self.distinctEvents(["/a", "/b", "/c"])
        #expect(expected.count == events)
        #expect(events == 18)
        #expect(try EarthquakeStore(path: database).snapshot() == expected)
        // Nothing is left to resume.
        let again = try await Binary.run(["refresh", "--resume", "--database", database])
        #expect(again.status == 1)
        #expect(again.stderr.contains("there is no interrupted refresh to resume"), "\(again.stderr)")
    }
}

/// A run of the executable whose standard output is read as it comes (a POSIX pipe read on a Dispatch
/// thread), so the test can kill it at a chosen point.
struct KilledProcess {
    let process: Process
    let pipe: Pipe
    let capture: EarthquakesBinaryTests.OutputFiles

    init(arguments: [String]) throws {
        process = Process()
        pipe = Pipe()
        capture = try EarthquakesBinaryTests.OutputFiles()
        process.executableURL = EarthquakesBinaryTests.executable
        process.arguments = arguments
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent-home"]
        process.standardOutput = pipe
        process.standardError = capture.err
        try process.run()
        try? pipe.fileHandleForWriting.close()
    }

    var stderr: String { capture.stderr }

    /// Standard output up to the first appearance of `marker`, or nil when the output ended first. A
    /// deadline kills the process (which ends the output) so that a hung refresh fails the test.
    func output(until marker: String, deadline: Duration) async -> String? {
        let pid = process.processIdentifier
        let watchdog = Task {
            try await Task.sleep(for: deadline)
            sendSignal(SIGKILL, to: pid)
        }
        defer { watchdog.cancel() }
        let descriptor = pipe.fileHandleForReading.fileDescriptor
        return await withCheckedContinuation { continuation in
            DispatchQueue(label: "reading the output").async {  // blocks: a thread of its own
                var output = Data()
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { return continuation.resume(returning: nil) }
                    output.append(contentsOf: buffer[0..<count])
                    let text = String(decoding: output, as: UTF8.self)
                    if text.contains(marker) { return continuation.resume(returning: text) }
                }
            }
        }
    }

    func kill() { sendSignal(SIGKILL, to: process.processIdentifier) }

    /// Waits for the process to end, then frees its output files.
    func waitForExit() async {
        await EarthquakesBinaryTests.waitOffThePool(process)
        try? pipe.fileHandleForReading.close()
    }

    func remove() { capture.remove() }
}

private func sendSignal(_ signal: Int32, to pid: Int32) { _ = kill(pid, signal) }
