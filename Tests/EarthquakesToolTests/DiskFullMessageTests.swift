import BatonTesting
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 31, defect 13: the message for a download folder on a full disk read "There isn't enough
/// space.. Check that the folder exists…" (Foundation's reason kept its own full stop, after
/// "The operation could not be completed.").
@Suite(.timeLimit(.binarySuite)) struct DiskFullMessageTests {
    /// A 64 KB tmpfs, where the test may mount one (as root, with the right to mount); else `nil`.
    static func smallFileSystem(at folder: String) -> Bool {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/bin/mount") else { return false }
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "size=64k", "tmpfs", folder]
        mount.standardError = FileHandle(forWritingAtPath: "/dev/null")
        guard (try? mount.run()) != nil else { return false }
        mount.waitUntilExit()
        return mount.terminationStatus == 0
    }

    /// Whether a small file system can be mounted here (tried once, on a folder of its own).
    static let canMount: Bool = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("eq-mount-\(UUID().uuidString)").path
        guard (try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)) != nil
        else { return false }
        defer { try? FileManager.default.removeItem(atPath: folder) }
        guard smallFileSystem(at: folder) else { return false }
        unmount(folder)
        return true
    }()

    static func unmount(_ folder: String) {
        let umount = Process()
        umount.executableURL = URL(fileURLWithPath: "/bin/umount")
        umount.arguments = [folder]
        try? umount.run()
        umount.waitUntilExit()
    }

    @Test(
        .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"),
        .enabled(if: canMount, "a small file system cannot be mounted here (needs root and the right to mount)"),
        // ThreadSanitizer's runtime maps a file of its own in TMPDIR (`tsan.rodata.<pid>`, sized to the
        // binary's read-only data): on a 64 KB file system its pages cannot be backed and the tool dies of
        // SIGBUS before it downloads anything. The message is checked in the plain run.
        .enabled(
            if: ProcessInfo.processInfo.environment["BATON_SANITIZER"] == nil,
            "under ThreadSanitizer, whose runtime needs room in TMPDIR for a file of its own"))
    func aFullDownloadFolderIsOneClearSentence() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let small = scratch.path("small")
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        try #require(
            Self.smallFileSystem(at: small),
            "a small file system could not be mounted here (needs root and the right to mount); the message is checked where it can be"
        )
        defer { Self.unmount(small) }
        let body = SampleFeed.geoJSON(count: 600)
        let server = try await TestHTTPServer.start { _ in .ok(body) }
        let run = try await EarthquakesBinaryTests.run(
            ["refresh", "--feed", server.url("/feed.geojson").absoluteString, "--database", scratch.path("q.sqlite")],
            environment: ["TMPDIR": small])
        await server.shutdown()
        #expect(run.status == 1)
        #expect(
            run.stderr.contains(
                "No space left on device. Check that the folder exists, is writable and the disk is not full"),
            "\(run.stderr)")
        #expect(!run.stderr.contains(".."), "\(run.stderr)")
        #expect(!run.stderr.contains("The operation could not be completed"), "\(run.stderr)")
    }
}
