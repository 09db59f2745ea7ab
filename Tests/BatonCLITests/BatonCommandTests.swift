import BatonCLI
import BatonDurable
import BatonPostgres
import BatonTesting
import Foundation
import Testing

/// The built `baton` executable: exit statuses and what goes to which stream.
@Suite("baton: the command")
struct BatonCommandTests {
    static let executable = BuiltExecutable.url(named: "baton")

    typealias Run = ChildRun

    /// Runs `baton` with `arguments` to its exit (``ChildProcess``: output in files, killed after 60 s).
    static func run(
        _ arguments: [String], environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Run {
        let executable = try #require(executable)
        return try await ChildProcess.run(
            executable, arguments, environment: ["PATH": "/usr/bin:/bin"].merging(environment) { $1 },
            sourceLocation: sourceLocation)
    }

    @Test(.enabled(if: executable != nil, "the baton executable is not built; skipping"))
    func usageErrorsExitWith64AndStoreErrorsWith1() async throws {
        let noStore = try await Self.run(["runs"])
        #expect(noStore.status == 64, "\(noStore)")
        #expect(noStore.stderr.contains("which job store?"), "\(noStore.stderr)")
        let badState = try await Self.run(["runs", "--store", "sqlite:x.sqlite", "--state", "done"])
        #expect(badState.status == 64)
        #expect(badState.stderr.contains("--state done"), "\(badState.stderr)")
        let both = try await Self.run(["retry", "3", "--job", "4", "--store", "sqlite:x.sqlite"])
        #expect(both.status == 64, "\(both)")

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("baton-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let missing = folder.appendingPathComponent("missing.sqlite").path
        let notThere = try await Self.run(["runs", "--store", "sqlite:" + missing])
        #expect(notThere.status == 1)
        #expect(
            notThere.stderr
                == "baton: there is no job store at \(missing) (no such file); check the path given to --store\n")
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    @Test(.enabled(if: executable != nil, "the baton executable is not built; skipping"))
    func theStoreComesFromTheEnvironmentAndAnswersInJSON() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("baton-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("jobs.sqlite").path
        let store = try SQLiteJobStore(path: path)
        let fixture = try await Fixture.fill(store)
        try store.close()
        let environment = ["BATON_STORE": "sqlite:" + path]

        let runs = try await Self.run(["runs", "--json"], environment: environment)
        #expect(runs.status == 0, "\(runs.stderr)")
        let page = try JSONDecoder.iso.decode(BatonTool.RunsJSON.self, from: Data(runs.stdout.utf8))
        #expect(page.runs.count == 3)

        let explain = try await Self.run(["explain", "\(fixture.failed.rawValue)"], environment: environment)
        #expect(explain.status == 0)
        #expect(explain.stdout.hasPrefix("run \(fixture.failed.rawValue) 'import'"), "\(explain.stdout)")

        let unknown = try await Self.run(["explain", "9999"], environment: environment)
        #expect(unknown.status == 1)
        #expect(unknown.stderr.hasPrefix("baton: "), "\(unknown.stderr)")
        #expect(unknown.stderr.contains("9999"), "\(unknown.stderr)")

        let retry = try await Self.run(["retry", "--job", "\(fixture.failedJob.rawValue)"], environment: environment)
        #expect(retry.status == 0, "\(retry.stderr)")
        #expect(
            retry.stdout
                == "Job \(fixture.failedJob.rawValue) runs again, with 1 job that had been cancelled because of it.\n")
    }
}

/// The same commands against PostgreSQL (skipped without a server, except in CI).
@Suite("baton: a PostgreSQL job store", .serialized)
struct BatonToolPostgresTests {
    static var url: String? {
        ProcessInfo.processInfo.environment["BATON_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }
    static var required: Bool { !(ProcessInfo.processInfo.environment["BATON_CI"] ?? "").isEmpty }

    @Test(.enabled(if: url != nil || required, "set BATON_POSTGRES_URL to run the PostgreSQL tests of baton"))
    func runsAndRepairsOnPostgresAndNeverCreatesAStore() async throws {
        let url = try #require(Self.url, "CI must set BATON_POSTGRES_URL")
        let schema = "cli_\(UInt32.random(in: 0...UInt32.max))"
        let fixture = try await withPostgresJobStore(url: url, schema: schema) { store in try await Fixture.fill(store)
        }
        let captured = Captured()
        let tool = BatonTool(write: captured.write, timeZone: TimeZone(identifier: "UTC")!)
        try await StoreAddress.postgres(url: url, schema: schema).withStore { store in
            try await tool.runs(store, filter: RunFilter(), json: false)
            #expect(captured.output.hasPrefix("1 running, 1 succeeded, 1 failed, 0 cancelled\n"), "\(captured.output)")
            // The server's clock records when each attempt started, for the timeline.
            let attempts = try await store.attempts(of: fixture.failedJob)
            #expect(attempts.first?.started != nil)
            #expect(try await tool.timeline(store, run: fixture.failed).contains("&lt;b&gt;name&lt;/b&gt;"))
            captured.clear()
            try await tool.retry(store, run: fixture.failed, job: nil)
            #expect(captured.output == "Run \(fixture.failed.rawValue): 2 jobs run again.\n", "\(captured.output)")
        }

        // A schema without a store: refused, and still without one after.
        let empty = "cli_none_\(UInt32.random(in: 0...UInt32.max))"
        for _ in 0..<2 {
            let error = await #expect(throws: BatonCLIError.self) {
                try await StoreAddress.postgres(url: url, schema: empty).withStore { _ in }
            }
            #expect(error?.message.contains("there is no Baton job store in PostgreSQL schema '\(empty)'") == true)
        }
    }
}
