import BatonTesting
import EarthquakesCLI
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

/// The review: options that were accepted and then ignored (or that said something untrue) are
/// refused with a usage error, or report what really happened.
@Suite(.timeLimit(.binarySuite)) struct IgnoredOptionsTests {
    typealias Binary = EarthquakesBinaryTests

    /// `show ID --share --json` printed the share line, not JSON; `list --all --limit 5` listed every
    /// match; `--database ""` used the default database. Each is now a usage error (exit 64) saying why.
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func contradictoryOrEmptyOptionsAreUsageErrors() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore.withSample(at: database).close()
        let id = try #require(try FeedParser().parse(SampleFeed.data).earthquakes.first?.id)
        let environment = ["HOME": scratch.path("home"), "XDG_DATA_HOME": scratch.path("data")]
        let cases: [([String], String)] = [
            (["show", id, "--share", "--json", "--database", database], "--share and --json cannot be used together"),
            (["list", "--all", "--limit", "5", "--database", database], "--all and --limit 5 cannot be used together"),
            (["list", "--database", ""], "--database is empty"),
            (["status", "--database", ""], "--database is empty"),
            (["refresh", "--feed", database, "--database", ""], "--database is empty"),
        ]
        for (arguments, expected) in cases {
            let run = try await Binary.run(arguments, environment: environment)
            #expect(run.status == 64, "\(arguments): \(run.status) \(run.stderr)")
            #expect(run.stderr.contains(expected), "\(arguments): \(run.stderr)")
            #expect(run.stdout.isEmpty, "\(arguments): \(run.stdout)")
        }
        #expect(!FileManager.default.fileExists(atPath: scratch.path("data")), "the default database was used")
        // Each option alone still works.
        let limited = try await Binary.run(["list", "--limit", "5", "--csv", "--database", database])
        #expect(limited.status == 0, "\(limited.stderr)")
        #expect(limited.stdout.split(separator: "\n").count == 6)
        let json = try await Binary.run(["show", id, "--json", "--database", database])
        #expect(json.status == 0, "\(json.stderr)")
        #expect(json.stdout.hasPrefix("{"))
    }

    @Test func showRefusesShareWithJSONInProcessToo() throws {
        let error = #expect(throws: CLIError.self) {
            try EarthquakesCLI.forTests(CapturedConsole()).show(
                id: "x", database: "/nonexistent/q.sqlite", json: true, share: true)
        }
        #expect(error?.isUsage == true)
    }

    /// `home --clear` said "Forgot the home location." when the file could not be deleted (and `show`
    /// went on measuring from it), and also when there was none.
    @Test func homeClearSaysWhenItCouldNotForget() throws {
        let scratch = try Scratch()
        let environment = ["HOME": "/nonexistent-home", "XDG_CONFIG_HOME": scratch.path("config")]
        let captured = CapturedConsole()
        let cli = EarthquakesCLI(console: captured.console, environment: environment)
        try cli.home(set: nil, clear: true)
        #expect(captured.stdout == "There was no home location to forget.\n")
        try cli.home(set: try Coordinate(parsing: "-33.87,151.21"), clear: false)
        let folder = scratch.path("config/baton-earthquakes")
        let file = folder + "/home"
        #expect(FileManager.default.fileExists(atPath: file))
        // Undeletable: a folder without write permission, and (for the superuser, whom permissions do not
        // stop) an immutable file where the file system has them.
        chmod(folder, 0o555)
        var immutable = false
        if getuid() == 0 { immutable = Self.chattr("+i", file) }
        defer {
            if immutable { _ = Self.chattr("-i", file) }
            chmod(folder, 0o755)
            scratch.remove()
        }
        guard getuid() != 0 || immutable else { return }  // (no way to make the file undeletable here)
        let error = #expect(throws: CLIError.self) { try cli.home(set: nil, clear: true) }
        #expect(
            error?.message.hasPrefix("could not forget the home location: cannot delete \(file)") == true,
            "\(error?.message ?? "")")
        #expect(!captured.stdout.contains("Forgot"), "\(captured.stdout)")
        #expect(FileManager.default.fileExists(atPath: file))
    }

    static func chattr(_ flag: String, _ path: String) -> Bool {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chattr") else { return false }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        process.arguments = [flag, path]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
