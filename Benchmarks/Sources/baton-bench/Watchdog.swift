import Foundation

/// Turns a hang into a report instead of a stuck program. Each run happens on a fresh thread while the
/// main thread waits with a time limit; a run that overstays it is reported (with every thread's stack
/// from gdb, when gdb exists and may attach) and abandoned, and the program goes on with the next
/// workload. The program then exits with status 3 at the end.
final class Watchdog {
    let timeout: Duration
    private(set) var hangs: [String] = []

    /// Stack size of the threads that run the workloads: the release of a long dependency chain by a
    /// peer that releases recursively should fail the same way everywhere, not depend on a thread's size.
    static let stackSize = 8 << 20

    init(timeout: Duration) {
        self.timeout = timeout
    }

    /// Runs `body` on a new thread; returns its result, or `nil` if it did not return within
    /// `limit` (default: ``timeout``).
    func run<T>(_ label: String, limit: Duration? = nil, _ body: @escaping () -> T) -> T? {
        let limit = min(limit ?? timeout, timeout)
        let box = Box<T>(body)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            box.result = box.body()
            done.signal()
        }
        thread.stackSize = Watchdog.stackSize
        thread.name = label
        thread.start()
        if done.wait(timeout: .now() + limit.seconds) == .success {
            return box.result
        }
        hangs.append(label)
        progress("HANG: '\(label)' did not finish within \(limit). Stacks of all threads follow (if gdb can attach).")
        Watchdog.dumpStacks()
        progress("HANG: '\(label)': abandoned; going on without it.")
        return nil
    }

    /// Prints all thread stacks of this process to standard error with `gdb -batch`, if gdb exists.
    static func dumpStacks() {
        let gdb = "/usr/bin/gdb"
        guard FileManager.default.isExecutableFile(atPath: gdb) else { return }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: gdb)
        process.arguments = [
            "-q", "-p", "\(getpid())", "-batch", "-iex", "set complaints 0", "-ex", "set print thread-events off",
            "-ex", "thread apply all bt",
        ]
        // gdb stops every thread of this process while it works, including any thread that would read
        // a pipe from it: it writes to a file, read once it has detached.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("baton-bench-stacks-\(getpid()).txt")
        _ = FileManager.default.createFile(atPath: path.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: path) }
        guard let file = try? FileHandle(forWritingTo: path) else { return }
        process.standardOutput = file
        process.standardError = file
        do {
            try process.run()
        } catch {
            progress("could not run gdb: \(error)")
            return
        }
        process.waitUntilExit()
        try? file.close()
        let text = (try? String(contentsOf: path, encoding: .utf8)) ?? ""
        let noise = ["During symbol reading", "warning: Section .debug", "[New LWP", "[Thread debugging"]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false)
        where !noise.contains(where: { line.hasPrefix($0) }) {
            progress(String(line))
        }
    }

    /// Carries the body and its result across threads: written by the run's thread before it signals,
    /// read by the waiting thread after the signal (or never, if the run hung).
    private final class Box<T>: @unchecked Sendable {
        let body: () -> T
        var result: T?

        init(_ body: @escaping () -> T) { self.body = body }
    }
}
