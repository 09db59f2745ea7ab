import BatonTesting
import Foundation
import Testing

@testable import EarthquakesCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Output that cannot be written, and output files given by the user: found by an adversarial probe of
/// the tools (6 Dec 2026).
@Suite(.timeLimit(.binarySuite)) struct OutputFailureTests {
    /// Runs `executable` with standard output on `/dev/full`, where every write fails (a full disk).
    static func runOnFullDevice(_ executable: URL, _ arguments: [String]) async throws -> ChildRun {
        try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "exec \"$0\" \"$@\" > /dev/full", executable.path] + arguments,
            environment: EarthquakesBinaryTests.environment([:]))
    }

    @Test(
        "output that cannot be written ends earthquakes with status 1 and a message, never a crash or silence",
        .enabled(if: EarthquakesBinaryTests.executable != nil, "the earthquakes executable is not built; skipping"),
        .enabled(if: FileManager.default.fileExists(atPath: "/dev/full"), "this system has no /dev/full"))
    func earthquakesOnAFullDevice() async throws {
        let executable = try #require(EarthquakesBinaryTests.executable)
        // The sample (no database), as a table, as JSON and as CSV: every way `list` writes.
        for arguments in [
            [], ["list", "--sample", "--json"], ["list", "--sample", "--all"], ["list", "--sample", "--csv"],
        ] {
            let run = try await Self.runOnFullDevice(executable, arguments)
            #expect(run.status == 1, "\(arguments): \(run)")
            #expect(run.stderr.contains("could not write to standard output"), "\(arguments): \(run.stderr)")
            #expect(!run.stderr.contains("Fatal error"), "\(arguments): \(run.stderr)")
        }
    }

    @Test("an error message is made safe for the terminal: escape sequences and line breaks do not reach it")
    func errorMessagesAreTerminalSafe() {
        let message = EarthquakesCLI.message(for: CLIError("f/big.json: stop\u{1B}[31m now\nand\u{202E}more"))
        #expect(!message.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x202E }, "\(message)")
        #expect(message.contains("stop"))
        #expect(EarthquakesCLI.detailLine("a\u{1B}]0;title\u{7}b") == "a\u{FFFD}]0;title\u{FFFD}b")
    }
}

/// The checks of `--timeline` and `--trace` before a refresh, for links and devices: found by review.
@Suite struct PicturePathTests {
    @Test("a picture path that leads to a device is accepted; one that leads through a link is checked where it leads")
    func linksAndDevices() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.url
        let device = folder.appendingPathComponent("null").path
        try FileManager.default.createSymbolicLink(atPath: device, withDestinationPath: "/dev/null")
        try RunPicture.check(device, option: "--timeline")
        // A link to a file in a folder that does not exist is refused before the refresh, naming that folder.
        let dangling = folder.appendingPathComponent("dangling.html").path
        try FileManager.default.createSymbolicLink(atPath: dangling, withDestinationPath: "/nonexistent-folder/x.html")
        let refused = #expect(throws: CLIError.self) { try RunPicture.check(dangling, option: "--timeline") }
        #expect(refused?.message.contains("/nonexistent-folder") == true, "\(String(describing: refused))")
        // Two spellings of one file through a link to a file not made yet are the same picture.
        let page = folder.appendingPathComponent("page.html").path
        let link = folder.appendingPathComponent("link.html").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "page.html")
        #expect(RunPicture.canonical(link) == RunPicture.canonical(page))
    }
}

/// Feeds given by relative path to a refresh of several feeds: found by the same probe.
@Suite struct RecordedFeedPathTests {
    @Test("a refresh of several feeds records a relative path as absolute, so --resume works from any folder")
    func relativePathsAreRecordedAbsolute() {
        let here = FileManager.default.currentDirectoryPath
        #expect(FeedRefresh.recorded("f/recent.json") == here + "/f/recent.json")
        #expect(FeedRefresh.recorded("./f/../g.json") == here + "/./f/../g.json", "`..` left to the kernel")
        #expect(FeedRefresh.recorded("/abs/x.json") == "/abs/x.json")
        #expect(FeedRefresh.recorded("https://example.com/a.json") == "https://example.com/a.json")
    }

    @Test("a feed whose name holds a line break is refused with what to do, before anything is written")
    func aLineBreakInAFeedNameIsRefused() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.url
        let odd = folder.appendingPathComponent("a\nb.json").path
        let plain = folder.appendingPathComponent("c.json").path
        for file in [odd, plain] {
            try Data(#"{"type":"FeatureCollection","features":[]}"#.utf8).write(to: URL(fileURLWithPath: file))
        }
        let database = folder.appendingPathComponent("q.sqlite").path
        let captured = CapturedConsole()
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(captured).refresh(
                feeds: [odd, plain], resume: false, database: database, json: false)
        }
        #expect(error?.message.contains("line break") == true, "\(String(describing: error))")
        #expect(error?.message.contains("a b.json") == true, "the name shown on one line")
        #expect(!FileManager.default.fileExists(atPath: database), "refused before the database was made")
    }
}
