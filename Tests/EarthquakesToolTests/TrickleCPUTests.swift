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

/// Issue 31, defect 5: a download trickling at 50 KB/s kept about 0.73 of a core busy (URLSession on
/// Linux). The built executable downloads the same feed twice from 127.0.0.1: at once, then trickled at
/// 50 KB/s for `seconds`; the difference of the two runs' CPU time (user + system, from `wait4`'s
/// `getrusage` of the child) over the trickle's length is what waiting for slow bytes costs: at most 5 % of
/// a core.
@Suite(
    .serialized, .timeLimit(.minutes(2)),
    .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct TrickleCPUTests {
    /// The run's status, its CPU time in seconds, and its wall time.
    struct Measured {
        var status: Int32
        var cpu: Double
        var wall: Double
        var stderr: String
    }

    /// Runs the executable as a child of its own (`posix_spawn`), so that `wait4` gives its resource use.
    static func measure(_ arguments: [String]) async throws -> Measured {
        let executable = EarthquakesBinaryTests.executable!.path
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("eq-cpu-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: errors) }
        return try await offThePool { () throws -> Measured in
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, errors, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            let words: [String] = [executable] + arguments
            let argv = words.map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            let variables: [String] = ["PATH=/usr/bin:/bin", "HOME=/nonexistent-home"]
            let environment = variables.map { strdup($0) } + [nil]
            defer { for pointer in environment { free(pointer) } }
            var pid: pid_t = 0
            let started = ContinuousClock.now
            let code = posix_spawn(&pid, executable, &actions, nil, argv, environment)
            guard code == 0 else { throw CLIErrorText("posix_spawn failed: \(String(cString: strerror(code)))") }
            var status: Int32 = 0
            var usage = rusage()
            while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
            let wall = ContinuousClock.now - started
            func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
            let exit = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
            let text = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            return Measured(
                status: exit, cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
                wall: wall / .seconds(1), stderr: text)
        }
    }

    struct CLIErrorText: Error, CustomStringConvertible {
        var description: String
        init(_ text: String) { description = text }
    }

    @Test(
        // ThreadSanitizer's runtime has a thread of its own that wakes periodically, and every instrumented
        // access costs several times more: CPU that grows with the wall time, whatever the download does
        // (5.8 % of a core measured in CI's run). The share is measured on the plain build.
        .enabled(
            if: ProcessInfo.processInfo.environment["BATON_SANITIZER"] == nil,
            "under ThreadSanitizer, whose runtime costs CPU of its own while the process waits"))
    func aTricklingDownloadCostsAtMostFivePercentOfACore() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let body = SampleFeed.geoJSON(count: 400)  // about 250 KB
        let seconds = 5.0
        let chunk = Int(Double(body.count) / (seconds * 20))  // 20 pieces a second
        let server = try await TestHTTPServer.start { request in
            request.path == "/slow.geojson"
                ? .drip(body: body, chunkSize: chunk, interval: .milliseconds(50)) : .ok(body)
        }
        let quick = try await Self.measure([
            "refresh", "--feed", server.url("/quick.geojson").absoluteString, "--database", scratch.path("a.sqlite"),
        ])
        let slow = try await Self.measure([
            "refresh", "--feed", server.url("/slow.geojson").absoluteString, "--database", scratch.path("b.sqlite"),
        ])
        await server.shutdown()
        #expect(quick.status == 0, "\(quick.stderr)")
        #expect(slow.status == 0, "\(slow.stderr)")
        let trickle = slow.wall - quick.wall
        let share = (slow.cpu - quick.cpu) / trickle
        let report =
            "at once: \(quick.cpu) s CPU in \(quick.wall) s; trickled: \(slow.cpu) s CPU in \(slow.wall) s; "
            + "waiting cost \(Int((share * 1000).rounded()) / 10) % of a core"
        print("TrickleCPUTests: \(report)")
        #expect(trickle > seconds * 0.8, "the trickle lasted \(trickle) s; \(report)")
        #expect(share <= 0.05, "\(report)")
    }
}
