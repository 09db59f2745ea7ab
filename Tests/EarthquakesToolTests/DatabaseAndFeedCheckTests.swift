import BatonTesting
import EarthquakesCLI
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 10, defects 4, 7, 13 and 14, through the built executable: the sample's own database, read
/// commands that never create anything, messages that name the real cause, and Ctrl-C.
@Suite(.timeLimit(.binarySuite)) struct DatabaseAndFeedCheckTests {
    typealias Binary = EarthquakesBinaryTests

    /// Defect 4: the sample never lands in the user's database (issue 31, defect 9: bare `earthquakes`
    /// shows the user's events once there are some, and never makes a sample database again after
    /// `--remove-sample` deleted one of an earlier version).
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func theSampleNeverMixesWithTheUsersEvents() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        let feed = scratch.path("real.geojson")
        try SampleFeed.geoJSON(count: 5, seed: 7).write(to: URL(fileURLWithPath: feed))
        #expect(try await Binary.run(["refresh", "--feed", feed, "--database", database]).status == 0)
        let realIDs = try EarthquakeStore(path: database).snapshot().map(\.id)

        let overview = try await Binary.run(["--database", database])
        #expect(overview.status == 0)
        #expect(
            overview.stdout.hasPrefix("The newest 5 of 5 events in \(database). Last refreshed "), "\(overview.stdout)")
        #expect(!overview.stdout.contains("SAMPLE DATA"))
        #expect(try EarthquakeStore(path: database).snapshot().map(\.id) == realIDs)  // untouched

        let listed = try await Binary.run(["list", "--sample", "--limit", "100", "--json", "--database", database])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(rows.count == 40)

        // A sample database an earlier version made: removed, and not made again.
        let legacy = scratch.path(DatabaseLocation.sampleFileName)
        try EarthquakeStore.withSample(at: legacy).close()
        let help = try await Binary.run(["--help"])
        #expect(help.stdout.contains("--remove-sample"))
        let removed = try await Binary.run(["--remove-sample", "--database", database])
        #expect(removed.status == 0)
        #expect(removed.stdout == "Removed the sample database \(legacy).\n")
        #expect(!FileManager.default.fileExists(atPath: legacy))
        let empty = scratch.path("empty.sqlite")
        let sample = try await Binary.run(["--database", empty])
        #expect(sample.status == 0)
        #expect(sample.stdout.hasPrefix("SAMPLE DATA"))
        #expect(!FileManager.default.fileExists(atPath: legacy))
        #expect(!FileManager.default.fileExists(atPath: empty))
        #expect(FileManager.default.fileExists(atPath: database))
    }

    /// Defect 14: `list`/`show` on a path that does not exist say so and create nothing.
    @Test(
        .enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"),
        arguments: [["list"], ["show", "us1"]])
    func readCommandsNeverCreateDatabases(command: [String]) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("typo/x.sqlite")
        let run = try await Binary.run(command + ["--database", database])
        #expect(run.status == 1)
        #expect(run.stderr.contains("there is no "))
        #expect(run.stderr.split(separator: "\n").count == 1)
        #expect(scratch.contents.isEmpty, "nothing was created: \(scratch.contents)")
    }

    /// Defect 13: `--database` naming a folder.
    @Test(
        .enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"),
        arguments: [["list"], ["refresh", "--feed", "FEED"]])
    func aDatabaseThatIsAFolderIsNamed(command: [String]) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feed = scratch.path("feed.geojson")
        try SampleFeed.data.write(to: URL(fileURLWithPath: feed))
        let run = try await Binary.run(command.map { $0 == "FEED" ? feed : $0 } + ["--database", scratch.url.path])
        #expect(run.status == 1)
        #expect(
            run.stderr
                == "earthquakes: the database \(scratch.url.path) is a folder; give a file path such as \(scratch.path("earthquakes.sqlite"))\n"
        )
    }

    /// Defect 13: `--feed` naming a folder (was "NSCocoaErrorDomain error 256").
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func aFeedThatIsAFolderIsNamed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let run = try await Binary.run(["refresh", "--feed", scratch.url.path, "--database", scratch.path("q.sqlite")])
        #expect(run.status == 1)
        #expect(run.stderr.contains("--feed \(scratch.url.path) is a folder; give a feed file inside it"))
        #expect(!run.stderr.contains("NSCocoaErrorDomain"))
        #expect(!FileManager.default.fileExists(atPath: scratch.path("q.sqlite")))  // checked before the database
    }

    /// Defect 13: an HTML page served with status 200.
    @Test func anHTMLPageIsCalledOne() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let page = Data("\n  <!DOCTYPE html><html><body>Sign in to the hotel Wi-Fi</body></html>".utf8)
        let server = try await TestHTTPServer.start { _ in .ok(page, contentType: "text/html") }
        let url = server.url("/feed").absoluteString
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: url, database: scratch.path("q.sqlite"), json: false)
        }
        await server.shutdown()
        #expect(error?.message.hasPrefix("\(url) sent an HTML page, not a GeoJSON feed: check the address") == true)
        #expect(error?.message.contains("was not edited") == false)
    }

    /// Defect 13: a home folder where nothing can be created: the message points at --database, and the
    /// sample still shows (from memory).
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func anUnwritableHomeSuggestsDatabase() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let home = scratch.path("home-is-a-file")  // nothing can be created under a file, even by root
        try Data("x".utf8).write(to: URL(fileURLWithPath: home))
        let feed = scratch.path("feed.geojson")
        try SampleFeed.data.write(to: URL(fileURLWithPath: feed))

        let refresh = try await Binary.run(["refresh", "--feed", feed], environment: ["HOME": home])
        #expect(refresh.status == 1)
        #expect(
            refresh.stderr.hasPrefix("earthquakes: cannot create the folder \(home)/.local/share/baton-earthquakes"))
        #expect(refresh.stderr.contains("--database PATH or $BATON_EARTHQUAKES_DATABASE"))

        let sample = try await Binary.run([], environment: ["HOME": home])
        #expect(sample.status == 0)
        #expect(sample.stdout.hasPrefix("SAMPLE DATA"))
        #expect(sample.stdout.contains("made in memory"))
    }

    /// Defect 13: a read-only database is named before anything is downloaded (was "row 0 … SQLite error 8").
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func aReadOnlyDatabaseIsNamedBeforeDownloading() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore.withSample(at: database)
        let readOnly = try ReadOnlyFile(database)
        defer { readOnly.undo() }
        try #require(access(database, W_OK) != 0, "could not make a read-only file here; skipping")

        let server = try await TestHTTPServer.start { _ in .ok(SampleFeed.geoJSON(count: 3, seed: 9)) }
        let run = try await Binary.run([
            "refresh", "--feed", server.url("/feed").absoluteString, "--database", database,
        ])
        let requests = server.requests
        await server.shutdown()
        #expect(run.status == 1)
        #expect(run.stderr.hasPrefix("earthquakes: the database \(database) is read-only"))
        #expect(run.stderr.contains("--database"))
        #expect(!run.stderr.contains("SQLite error"))
        #expect(requests.isEmpty, "nothing was downloaded")

        // Reading it still works.
        let list = try await Binary.run(["list", "--database", database, "--json", "--limit", "1"])
        #expect(list.status == 0, "\(list.stderr)")
    }

    /// Defect 7: Ctrl-C mid-download cancels the jobs, removes the temporary files, prints one line and
    /// exits with 130.
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func controlCCancelsCleansUpAndExits130() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let temporary = scratch.path("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let database = scratch.path("q.sqlite")
        try EarthquakeStore.withSample(at: database)
        let before = try EarthquakeStore(path: database).snapshot()
        let halfSent = Gate()
        let release = Gate()
        let body = SampleFeed.geoJSON(count: 400)
        let server = try await TestHTTPServer.start { _ in
            .partial(body: body, sentBeforeGate: body.count / 2, sent: halfSent, release: release)
        }

        let process = Process()
        process.executableURL = Binary.executable
        process.arguments = ["refresh", "--feed", server.url("/feed").absoluteString, "--database", database]
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent-home", "TMPDIR": temporary]
        let capture = try Binary.OutputFiles()
        defer { capture.remove() }
        process.standardOutput = capture.out
        process.standardError = capture.err
        try process.run()
        await halfSent.waitAsync()  // the download is under way
        process.interrupt()
        await Binary.waitOffThePool(process)
        let stdout = capture.stdout
        let stderr = capture.stderr
        release.open()
        await server.shutdown()

        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 130)
        #expect(stderr == "Cancelled; the database was not changed.\n")
        #expect(stdout.isEmpty)
        let left = (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []
        #expect(!left.contains { $0.hasPrefix("baton-earthquakes-") }, "the refresh's own folder is removed")
        #expect(left.isEmpty, "temporary files left: \(left)")
        #expect(try EarthquakeStore(path: database).snapshot() == before)
    }
}

/// Makes a file read-only for this process, even for root (chmod, and the immutable flag when root).
struct ReadOnlyFile {
    let path: String
    let immutable: Bool

    init(_ path: String) throws {
        self.path = path
        try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: path)
        immutable = geteuid() == 0 && Self.chattr("+i", path)
    }

    func undo() {
        if immutable { _ = Self.chattr("-i", path) }
        try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
    }

    private static func chattr(_ flag: String, _ path: String) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        process.arguments = [flag, path]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
