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

/// Runs the built `earthquakes` executable, to check what only a real process shows: exit codes and
/// which stream gets what. Skipped when the executable has not been built next to the tests.
///
/// The suites that run the executable have a time limit of `.binarySuite` (below).
@Suite(.timeLimit(.binarySuite)) struct EarthquakesBinaryTests {
    static let executable = BuiltExecutable.url(named: "earthquakes")

    typealias Run = ChildRun
    typealias OutputFiles = BatonTesting.OutputFiles

    /// Runs the executable to its end (``ChildProcess/run(_:_:environment:limit:sourceLocation:)``: output
    /// in files, the wait holding no thread, killed after 60 s); at most as many processes at once as
    /// there are cores (`processes`): one per test at once would make every one of them slow, and twice the
    /// cores left the rest of the suite, running beside them, too little of the machine.
    static func run(
        _ arguments: [String], environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Run {
        let executable = try #require(executable)
        return try await processes.run {
            try await ChildProcess.run(
                executable, arguments, environment: Self.environment(environment), sourceLocation: sourceLocation)
        }
    }

    /// What every run gets, then `extra`.
    static func environment(_ extra: [String: String]) -> [String: String] {
        ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent-home"].merging(extra) { $1 }
    }

    /// The user id ``runUnprivileged(_:environment:sourceLocation:)`` runs as when the tests run as root:
    /// `nobody`.
    static let unprivilegedUser: UInt32 = 65534

    /// Runs the executable as a user that file permissions apply to: as `nobody` (through `setpriv`)
    /// when the tests run as root, for whom no permission check fails; else as the current user.
    static func runUnprivileged(
        _ arguments: [String], environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Run {
        guard getuid() == 0 else {
            return try await run(arguments, environment: environment, sourceLocation: sourceLocation)
        }
        let user = "\(unprivilegedUser)"
        let executable = try unprivilegedExecutable()
        return try await processes.run {
            try await ChildProcess.run(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", executable.path] + arguments,
                environment: Self.environment(environment), sourceLocation: sourceLocation)
        }
    }

    /// The executable as the unprivileged user can run it: itself, or — when a folder above it is closed
    /// to other users (a checkout in a `mktemp -d` folder, mode 0700) — a copy in a folder they can enter.
    static func unprivilegedExecutable() throws -> URL {
        let original = try #require(executable)
        var folder = original.deletingLastPathComponent()
        var open = true
        while folder.path != "/" {
            let mode = (try? FileManager.default.attributesOfItem(atPath: folder.path)[.posixPermissions] as? Int) ?? 0
            if mode & 0o001 == 0 { open = false }
            folder.deleteLastPathComponent()
        }
        if open { return original }
        return try unprivilegedCopy.get()
    }

    /// The copy, made once per test process in one shared folder (see ``unprivilegedExecutable()``): copied
    /// under a name of its own, then renamed over the last one, so runs at once never see half a file.
    private static let unprivilegedCopy = Result { () throws -> URL in
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "earthquakes-unprivileged", isDirectory: true)
        try FileManager.default.createDirectory(
            at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let copy = folder.appendingPathComponent("earthquakes")
        let fresh = folder.appendingPathComponent("earthquakes.\(getpid())")
        try? FileManager.default.removeItem(at: fresh)
        try FileManager.default.copyItem(at: executable!, to: fresh)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: fresh.path)
        guard rename(fresh.path, copy.path) == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: copy.path])
        }
        return copy
    }

    static let processes = AsyncLimit(ProcessInfo.processInfo.activeProcessorCount)

    /// Waits for a process on a thread of its own (see ``run(_:environment:)``).
    static func waitOffThePool(_ process: Process) async {
        await offThePool { process.waitUntilExit() }
    }

    @Test(.enabled(if: executable != nil, "the earthquakes executable is not built next to the tests; skipping"))
    func sampleRunListAndErrors() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "EarthquakesBinaryTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("data/q.sqlite").path

        // The environment variable chooses the database; while it holds nothing, the sample is shown from
        // memory (nothing is created); nothing but results on stdout when piped.
        let sample = try await Self.run([], environment: ["BATON_EARTHQUAKES_DATABASE": database])
        #expect(sample.status == 0)
        #expect(sample.stdout.hasPrefix("SAMPLE DATA"))
        #expect(sample.stdout.contains(database))
        #expect(sample.stderr.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: folder.path))
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("data"), withIntermediateDirectories: true)
        try EarthquakeStore.withSample(at: database)

        let list = try await Self.run(["list", "--database", database, "--limit", "2", "--json"])
        #expect(list.status == 0)
        let rows = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]]
        #expect(rows?.count == 2)

        let missing = try await Self.run(["show", "nope", "--database", database])
        #expect(missing.status == 1)
        #expect(missing.stdout.isEmpty)
        #expect(
            missing.stderr
                == "earthquakes: no earthquake with id \"nope\" in \(database); `earthquakes list` shows the ids\n")

        let badSince = try await Self.run(["list", "--since", "soon", "--database", database])
        #expect(badSince.status == 64)
        #expect(badSince.stderr.hasPrefix("Error: --since \"soon\" is not a date"))
    }
}

extension TimeLimitTrait.Duration {
    /// The time limit of a suite that runs the executable: five minutes, not one, because its processes
    /// queue behind every other suite's (``EarthquakesBinaryTests/processes``), so a test's time counts the
    /// queue's (in CI the whole binary workload took 74 s). What hangs is caught by each process's own
    /// deadline (``ChildProcess``, 60 s), which names the command.
    static let binarySuite = Self.minutes(5)
}
