import BatonTesting
import EarthquakesKit
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The built `earthquakes` executable, stopped at a ``TestPause`` point: the test waits until the
/// process reached it (``waitUntilPaused()``), acts (``interrupt()`` sends SIGINT, and waits until the
/// tool handled it), then lets it go on (``resume()``) and collects the result (``finish()``).
///
/// Standard input and error are pipes (the pause line arrives on standard error, and a byte on
/// standard input ends the pause); standard output goes to a file. Every wait has a deadline that
/// names what hung, and kills the process when it fires.
///
/// ## Thread safety
/// For one test task at a time; the blocking reads run off Swift concurrency's pool.
final class PausedRun: @unchecked Sendable {
    // @unchecked Sendable: used by one test task at a time; `stderrText` is guarded by `lock`.
    let point: String
    private let process = Process()
    private let input = Pipe()
    private let errors = Pipe()
    private let output: EarthquakesBinaryTests.OutputFiles
    private let exit: ProcessExit
    private let lock = NSLock()
    private var stderrText = ""

    /// Starts the executable with `arguments`; it pauses at `point`.
    init(_ arguments: [String], pauseAt point: String, environment: [String: String] = [:]) throws {
        self.point = point
        output = try EarthquakesBinaryTests.OutputFiles()
        process.executableURL = EarthquakesBinaryTests.executable
        process.arguments = arguments
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent-home", TestPause.variable: point]
            .merging(environment) { $1 }
        process.standardInput = input
        process.standardOutput = output.out
        process.standardError = errors
        exit = ProcessExit(process)
        try process.run()
        // The child has its copies: without closing ours, reading standard error would never end.
        try? errors.fileHandleForWriting.close()
        try? input.fileHandleForReading.close()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        output.remove()
    }

    /// Waits until the process reached its pause point.
    func waitUntilPaused() async throws {
        try await waitFor("\(TestPause.variable) reached \(point)", "the process to reach the pause \(point)")
    }

    /// Waits until the tool said `text` (``TestPause/say(_:)``) `count` times in all.
    func waitUntilSaid(_ text: String, count: Int = 1) async throws {
        try await waitFor("\(TestPause.variable) \(text)\n", "the tool to say \"\(text)\" (\(count))", count: count)
    }

    /// Reads what the process has written on standard error so far, without waiting for more.
    func readAvailable() {
        var descriptor = pollfd(fd: errors.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
        while poll(&descriptor, 1, 0) > 0, descriptor.revents & Int16(POLLIN) != 0, readSome() {}
    }

    /// What the process wrote on standard output so far.
    var outputSoFar: String { output.stdout }

    /// Sends SIGINT (Ctrl-C) and waits until the tool handled it.
    func interrupt(_ signal: Int32 = SIGINT) async throws {
        let handled = occurrences("\(TestPause.variable) interrupted")
        kill(process.processIdentifier, signal)
        try await waitFor(
            "\(TestPause.variable) interrupted", "the tool to handle Ctrl-C number \(handled + 1)", count: handled + 1)
    }

    /// Sends `signal` without waiting for anything.
    func send(_ signal: Int32) {
        _ = kill(process.processIdentifier, signal)
    }

    /// Ends the pause.
    func resume() {
        input.fileHandleForWriting.write(Data([1]))
    }

    /// Waits for the process to end; its status and output, without the pause lines.
    func finish(_ what: String = "the process to end") async throws -> EarthquakesBinaryTests.Run {
        let exit = exit
        try await deadline(what) { _ = await exit.status() }
        try? input.fileHandleForWriting.close()
        readToEnd()
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).filter {
            !$0.hasPrefix(TestPause.variable)
        }
        return EarthquakesBinaryTests.Run(
            status: process.terminationStatus, stdout: output.stdout, stderr: lines.joined(separator: "\n"))
    }

    /// What the process wrote on standard error so far.
    var text: String { lock.withLock { stderrText } }

    private func occurrences(_ marker: String) -> Int {
        text.components(separatedBy: marker).count - 1
    }

    /// Reads standard error until `marker` appeared `count` times.
    private func waitFor(_ marker: String, _ what: String, count: Int = 1) async throws {
        try await deadline(what) { [self] in
            await offThePool { [self] in
                while occurrences(marker) < count, readSome() {}
            }
        }
        guard occurrences(marker) >= count else {
            throw ProcessEnded(
                description: "waiting for \(what): the process ended first. Its standard error:\n\(text)")
        }
    }

    private func deadline(_ what: String, _ body: @escaping @Sendable () async throws -> Void) async throws {
        do {
            try await withDeadline(.seconds(60), what, report: { [self] in "standard error so far:\n\(text)" }, body)
        } catch {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            throw error
        }
    }

    /// Reads what is available (blocking); `false` at the end of the stream.
    private func readSome() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let fd = errors.fileHandleForReading.fileDescriptor
        var count: Int
        repeat { count = read(fd, &buffer, buffer.count) } while count < 0 && errno == EINTR
        guard count > 0 else { return false }
        let piece = String(decoding: buffer[0..<count], as: UTF8.self)
        lock.withLock { stderrText += piece }
        return true
    }

    private func readToEnd() {
        while readSome() {}
    }
}

/// A ``PausedRun`` ended before it reached what the test waited for.
struct ProcessEnded: Error, CustomStringConvertible {
    var description: String
}
