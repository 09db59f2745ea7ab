import Foundation
import Testing

/// Runs the built `earthquakes` executable, to check what only a real process shows: exit codes and
/// which stream gets what. Skipped when the executable has not been built next to the tests.
@Suite(.timeLimit(.minutes(1))) struct EarthquakesBinaryTests {
    static let executable: URL? = {
        // The test bundle lives in the build folder, next to the products.
        let folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [folder, folder.deletingLastPathComponent()] {
            let url = candidate.appendingPathComponent("earthquakes")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return nil
    }()

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        let process = Process()
        process.executableURL = Self.executable  // nil only when the test is disabled
        process.arguments = arguments
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent-home"].merging(environment) { $1 }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    @Test(.enabled(if: executable != nil, "the earthquakes executable is not built next to the tests; skipping"))
    func sampleRunListAndErrors() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "EarthquakesBinaryTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = folder.appendingPathComponent("data/q.sqlite").path

        // The environment variable chooses the database; nothing but results on stdout when piped.
        let sample = try Self.run([], environment: ["BATON_EARTHQUAKES_DATABASE": database])
        #expect(sample.status == 0)
        #expect(sample.stdout.hasPrefix("SAMPLE DATA"))
        #expect(sample.stderr.isEmpty)
        #expect(FileManager.default.fileExists(atPath: database))

        let list = try Self.run(["list", "--database", database, "--limit", "2", "--json"])
        #expect(list.status == 0)
        let rows = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]]
        #expect(rows?.count == 2)

        let missing = try Self.run(["show", "nope", "--database", database])
        #expect(missing.status == 1)
        #expect(missing.stdout.isEmpty)
        #expect(
            missing.stderr
                == "earthquakes: no earthquake with id \"nope\" in \(database); `earthquakes list` shows the ids\n")

        let badSince = try Self.run(["list", "--since", "soon", "--database", database])
        #expect(badSince.status == 1)
        #expect(badSince.stderr.split(separator: "\n").count == 1)
    }
}
