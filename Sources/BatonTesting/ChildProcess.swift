import Baton
public import Foundation
public import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a child process did: its exit status and what it wrote to each stream.
public struct ChildRun: Sendable, CustomStringConvertible {
    public var status: Int32
    public var stdout: String
    public var stderr: String

    public init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }

    public var description: String {
        "exit status \(status); stdout: \(stdout.debugDescription); stderr: \(stderr.debugDescription)"
    }
}

/// Two files that receive a child process's standard output and error.
///
/// Files, not pipes: a file never blocks the child however much it writes, Foundation's pipe reading
/// is unreliable with many processes at once, and a pipe's end of file never comes while a process the
/// child started (a browser's helpers) still holds a copy.
public struct OutputFiles: Sendable {
    public let folder: URL
    public let out: FileHandle
    public let err: FileHandle

    public init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("child-output-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: folder.appendingPathComponent("out").path, contents: nil)
        _ = FileManager.default.createFile(atPath: folder.appendingPathComponent("err").path, contents: nil)
        out = try FileHandle(forWritingTo: folder.appendingPathComponent("out"))
        err = try FileHandle(forWritingTo: folder.appendingPathComponent("err"))
    }

    /// What has been written to standard output so far.
    public var stdout: String { read("out") }
    /// What has been written to standard error so far.
    public var stderr: String { read("err") }

    private func read(_ name: String) -> String {
        String(decoding: (try? Data(contentsOf: folder.appendingPathComponent(name))) ?? Data(), as: UTF8.self)
    }

    /// Closes the files and deletes their folder.
    public func remove() {
        try? out.close()
        try? err.close()
        try? FileManager.default.removeItem(at: folder)
    }
}

/// Runs a program to its exit for a test, the one way every test suite does it.
public enum ChildProcess {
    /// Runs `executable` with `arguments` and returns its status and output.
    ///
    /// - The output goes to files (``OutputFiles``), and the wait holds no thread (``ProcessExit``).
    /// - A process still running after `limit` is killed with SIGKILL, and an issue naming the command
    ///   is recorded at the caller: the deadline is the process's own, so a test that queues its
    ///   processes behind other tests' (``AsyncLimit``) is not charged for their time.
    ///
    /// - Parameters:
    ///   - executable: The program to run.
    ///   - arguments: Its arguments.
    ///   - environment: The whole environment of the child (nothing is inherited).
    ///   - limit: How long the process may run.
    ///   - sourceLocation: Where the issue of a killed process is recorded: the caller's line.
    public static func run(
        _ executable: URL, _ arguments: [String], environment: [String: String] = ["PATH": "/usr/bin:/bin"],
        limit: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ChildRun {
        let files = try OutputFiles()
        defer { files.remove() }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        process.standardOutput = files.out
        process.standardError = files.err
        let exit = ProcessExit(process)
        try process.run()

        // The watchdog kills the process only while it has not been seen to exit.
        let state = Protected((exited: false, killed: false))
        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem {
            let overdue = state.withLock { state -> Bool in
                // (`exit` knows of the exit as soon as the process was reaped, before the awaiting task
                // runs again: a process that ended just at the limit is not reported killed.)
                guard !state.exited, !exit.hasExited else { return false }
                state.killed = true
                return true
            }
            if overdue { kill(pid, SIGKILL) }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + limit.seconds, execute: watchdog)
        let status = await exit.status()
        watchdog.cancel()
        let killed = state.withLock { state -> Bool in
            state.exited = true
            return state.killed
        }
        if killed {
            let command = ([executable.lastPathComponent] + arguments).joined(separator: " ")
            Issue.record("\(command) did not exit within \(limit); it was killed", sourceLocation: sourceLocation)
        }
        return ChildRun(status: status, stdout: files.stdout, stderr: files.stderr)
    }
}
