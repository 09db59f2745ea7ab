import Baton
import BatonDurable
import BatonTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `baton dashboard` as a user starts it: its usage errors, and a real server that answers, then stops
/// on Ctrl-C.
@Suite("baton dashboard: the command")
struct DashboardCommandTests {
    static let executable = BuiltExecutable.url(named: "baton")

    /// Starts `baton` with `arguments`; its standard error arrives in `errors` as it is written.
    static func start(_ arguments: [String]) throws -> (Process, AsyncStream<String>) {
        let process = Process()
        guard let executable = Self.executable else { throw CocoaError(.fileNoSuchFile) }
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ["PATH": "/usr/bin:/bin"]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        let stream = AsyncStream<String> { continuation in
            errors.fileHandleForReading.readabilityHandler = { handle in
                let data = handle.availableData
                if data.isEmpty {
                    handle.readabilityHandler = nil
                    continuation.finish()
                } else {
                    continuation.yield(String(decoding: data, as: UTF8.self))
                }
            }
        }
        try process.run()
        return (process, stream)
    }

    /// Waits for the process to exit, on a thread of its own.
    static func exit(_ process: Process) async -> Int32 {
        await offThePool {
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    /// Runs `baton` to its exit (``ChildProcess``: killed after 60 s) and returns its status and standard
    /// error.
    static func finish(
        _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (
        Int32, String
    ) {
        guard let executable = Self.executable else { throw CocoaError(.fileNoSuchFile) }
        let run = try await ChildProcess.run(executable, arguments, sourceLocation: sourceLocation)
        return (run.status, run.stderr)
    }

    @Test(.enabled(if: executable != nil, "the baton executable is not built; skipping"))
    func usageErrorsExitWith64AndAMissingStoreIsNotCreated() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let store = scratch.path("jobs.sqlite")
        try SQLiteJobStore(path: store).close()
        let cases: [([String], String)] = [
            (
                ["dashboard", "--store", "sqlite:" + store, "--host", "0.0.0.0", "--allow-actions"],
                "give --token too"
            ),
            (["dashboard", "--store", "sqlite:" + store, "--token", "short"], "at least 8"),
            (["dashboard", "--store", "sqlite:" + store, "--port", "70000"], "give 0 to 65535"),
        ]
        for (arguments, words) in cases {
            let (status, text) = try await Self.finish(arguments)
            #expect(status == 64, "\(arguments)")
            #expect(text.contains(words), "\(arguments): \(text)")
        }
        // A short token from the environment is named as such: --token was not given (a probe, 7 December 2026).
        let fromEnvironment = try await ChildProcess.run(
            try #require(Self.executable), ["dashboard", "--store", "sqlite:" + store],
            environment: ["PATH": "/usr/bin:/bin", "BATON_DASHBOARD_TOKEN": "short"])
        #expect(fromEnvironment.status == 64)
        #expect(fromEnvironment.stderr.contains("$BATON_DASHBOARD_TOKEN: give at least 8"), "\(fromEnvironment.stderr)")
        let missing = scratch.path("missing.sqlite")
        let (status, text) = try await Self.finish(
            ["dashboard", "--store", "sqlite:" + missing, "--port", "0"])
        #expect(status == 1)
        #expect(text.hasPrefix("baton: "), "\(text)")
        #expect(!FileManager.default.fileExists(atPath: missing), "a read never creates a store")
    }

    @Test(.enabled(if: executable != nil, "the baton executable is not built; skipping"))
    func theDashboardServesTheStoreUntilCtrlC() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("jobs.sqlite")
        let store = try SQLiteJobStore(path: path)
        _ = try await store.submit(
            GraphSpec(name: "served run", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]), uniqueKey: nil)
        try store.close()

        let (process, errors) = try Self.start([
            "dashboard", "--store", "sqlite:" + path, "--port", "0", "--token", "a-long-secret",
        ])
        defer { if process.isRunning { process.terminate() } }
        let banner = Protected("")
        try await withDeadline(.seconds(60), "the dashboard says where it listens", report: { banner.current }) {
            for await chunk in errors {
                banner.withLock { $0 += chunk }
                if banner.current.contains("Ctrl-C stops it.") { break }
            }
        }
        let text = banner.current
        #expect(text.contains("Read-only (--allow-actions to repair runs)."), "\(text)")
        let address = try #require(
            text.split(separator: "\n").first { $0.hasPrefix("Dashboard of sqlite:") }?.split(separator: " ").last,
            "\(text)")
        #expect(address.hasPrefix("http://127.0.0.1:") && address.hasSuffix("/?token=a-long-secret"), "\(address)")
        let url = try #require(URL(string: String(address)))
        // The address as printed opens the dashboard (its token sets the cookie, then the runs page).
        let (data, response) = try await URLSession.shared.data(from: url)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("served run"))
        var bare = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        bare.query = nil
        let (_, refused) = try await URLSession(configuration: .ephemeral).data(from: bare.url!)
        #expect((refused as? HTTPURLResponse)?.statusCode == 401, "without the token")

        kill(process.processIdentifier, SIGINT)
        let status = Protected<Int32>(-1)
        try await withDeadline(.seconds(60), "the dashboard stops on Ctrl-C") {
            let code = await Self.exit(process)
            status.withLock { $0 = code }
        }
        #expect(status.current == 0)
    }
}
