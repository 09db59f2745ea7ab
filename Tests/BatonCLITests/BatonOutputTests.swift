import BatonCLI
import BatonDurable
import BatonTesting
import Foundation
import Testing

@testable import BatonObservability

/// Where `baton` writes when writing fails, and files its user names (`timeline -o`): found by an
/// adversarial probe of the tools (6 Dec 2026).
@Suite("baton: output that cannot be written, and output files")
struct BatonOutputTests {
    static let executable = BatonCommandTests.executable

    /// A store with runs in a fresh folder; removed by the caller.
    static func store() async throws -> (folder: URL, path: String, fixture: Fixture) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("baton-out-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("jobs.sqlite").path
        let store = try SQLiteJobStore(path: path)
        let fixture = try await Fixture.fill(store)
        try store.close()
        return (folder, path, fixture)
    }

    @Test(
        "output that cannot be written (a full disk) ends baton with status 1 and a message, never a crash",
        .enabled(if: executable != nil, "the baton executable is not built; skipping"),
        .enabled(if: FileManager.default.fileExists(atPath: "/dev/full"), "this system has no /dev/full"))
    func standardOutputOnAFullDevice() async throws {
        let (folder, path, _) = try await Self.store()
        defer { try? FileManager.default.removeItem(at: folder) }
        let executable = try #require(Self.executable)
        let run = try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", "exec \"$0\" \"$@\" > /dev/full", executable.path, "runs", "--store", "sqlite:" + path])
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr.contains("could not write to standard output"), "\(run.stderr)")
        #expect(!run.stderr.contains("Fatal error"), "\(run.stderr)")
    }

    @Test(
        "timeline -o writes through a symbolic link, leaving the link, and into a device without replacing it",
        .enabled(if: executable != nil, "the baton executable is not built; skipping"))
    func timelineOutputThroughALinkAndIntoADevice() async throws {
        let (folder, path, fixture) = try await Self.store()
        defer { try? FileManager.default.removeItem(at: folder) }
        let target = folder.appendingPathComponent("page.html").path
        let link = folder.appendingPathComponent("link.html").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "page.html")  // not made yet
        let run = try await BatonCommandTests.run([
            "timeline", "\(fixture.failed.rawValue)", "-o", link, "--store", "sqlite:" + path,
        ])
        #expect(run.status == 0, "\(run)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "page.html", "the link stays")
        #expect(try String(contentsOfFile: target, encoding: .utf8).contains("<html"), "the page is where it points")

        // A device is written into, not replaced by a file. Reached through a link of the test's own: a
        // regression (a rename over the path) replaces the link, never the machine's /dev/null.
        let device = folder.appendingPathComponent("null").path
        try FileManager.default.createSymbolicLink(atPath: device, withDestinationPath: "/dev/null")
        let intoDevice = try await BatonCommandTests.run([
            "timeline", "\(fixture.failed.rawValue)", "-o", device, "--store", "sqlite:" + path,
        ])
        #expect(intoDevice.status == 0, "\(intoDevice)")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: device) == "/dev/null", "the link stays")
        var status = stat()
        #expect(stat("/dev/null", &status) == 0 && status.st_mode & S_IFMT == S_IFCHR, "/dev/null is still a device")
    }

    @Test(
        "timeline -o with no name, in a missing folder or onto a folder is a usage error saying what to give",
        .enabled(if: executable != nil, "the baton executable is not built; skipping"))
    func timelineOutputThatCannotBeWritten() async throws {
        let (folder, path, fixture) = try await Self.store()
        defer { try? FileManager.default.removeItem(at: folder) }
        let missing = folder.appendingPathComponent("missing/run.html").path
        // `-o ""` said "cannot write : … The file doesn't exist." after reading the whole run, and a
        // missing folder the same.
        for (output, message) in [
            ("", "Error: -o : no file name is given; give the file to write, for example run.html"),
            (
                missing,
                "Error: -o \(missing): the folder \(folder.path)/missing does not exist; create it or give another path"
            ),
            (
                folder.path,
                "Error: -o \(folder.path) is a folder; give a file path inside it, for example \(folder.path)/run.html"
            ),
        ] {
            let run = try await BatonCommandTests.run([
                "timeline", "\(fixture.failed.rawValue)", "-o", output, "--store", "sqlite:" + path,
            ])
            #expect(run.status == 64, "\(run)")
            #expect(run.stderr.hasPrefix(message), "\(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("missing").path))
    }

    @Test("a store opened to read only answers reads, refuses a repair saying why, and writes nothing")
    func aStoreReadOnly() async throws {
        let (folder, path, fixture) = try await Self.store()
        defer { try? FileManager.default.removeItem(at: folder) }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        // As `baton` opens a file this process may not write (as root every file is writable, so the
        // store is opened to read only here directly).
        try await StoreAddress.withReadOnlySQLiteStore(path) { store throws in
            let runs = try await store.runs(RunFilter()).runs
            #expect(runs.count == 3)
            let refusal = await #expect(throws: DurableError.self) {
                try await store.cancel(run: fixture.failed, reason: "test")
            }
            #expect(refusal?.code == .storeFailure, "\(String(describing: refusal))")
            #expect(refusal?.message.contains("read") == true, "\(String(describing: refusal))")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the file is unchanged")
        for side in ["-wal", "-shm", "-journal"] {
            #expect(!FileManager.default.fileExists(atPath: path + side), "nothing left beside it: \(side)")
        }
    }

    @Test("OutputFile follows chains of links, relative and absolute, and stops at a loop")
    func followingLinks() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("links-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = folder.appendingPathComponent("a").path
        let b = folder.appendingPathComponent("b").path
        try FileManager.default.createSymbolicLink(atPath: a, withDestinationPath: "b")
        try FileManager.default.createSymbolicLink(
            atPath: b, withDestinationPath: folder.appendingPathComponent("c").path)
        #expect(OutputFile.followingLinks(a) == folder.appendingPathComponent("c").path)
        try OutputFile.write("text", to: a)
        #expect(try String(contentsOfFile: folder.appendingPathComponent("c").path, encoding: .utf8) == "text")
        let loop = folder.appendingPathComponent("loop").path
        try FileManager.default.createSymbolicLink(atPath: loop, withDestinationPath: "loop")
        #expect(OutputFile.followingLinks(loop) == loop, "a loop ends")
        #expect(throws: (any Error).self) { try OutputFile.write("text", to: loop) }
    }
}
