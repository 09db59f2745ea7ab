import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: the
/// browser reads commands on its descriptor 3 and writes replies and events on 4, each a JSON text
/// ending in a NUL byte), so that a test can do what a user does — load a page, press a button — and
/// read what the browser shows after. Blocking; one test thread drives it. Every read has a deadline,
/// and the browser (with its helper processes, in a process group of their own) is killed at the end.
final class BrowserSession {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let pid: pid_t
    private let commands: Int32
    private let replies: Int32
    private var buffer: [UInt8] = []
    private var nextID = 0
    private var session: String?
    /// Events read while waiting for something else, oldest first.
    private var events: [[String: Any]] = []

    init(browser: String, profile: String) throws {
        var toBrowser: [Int32] = [0, 0]
        var fromBrowser: [Int32] = [0, 0]
        guard pipe(&toBrowser) == 0, pipe(&fromBrowser) == 0 else { throw Failure(description: "pipe: \(errno)") }
        for fd in toBrowser + fromBrowser { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on 3 and 4, which the browser keeps.
        posix_spawn_file_actions_adddup2(&actions, toBrowser[0], 3)
        posix_spawn_file_actions_adddup2(&actions, fromBrowser[1], 4)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        let arguments = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--remote-debugging-pipe", "--user-data-dir=\(profile)", "about:blank",
        ]
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, browser, &actions, &attributes, argv, environ)
        close(toBrowser[0])
        close(fromBrowser[1])
        guard status == 0 else {
            close(toBrowser[1])
            close(fromBrowser[0])
            throw Failure(description: "could not start \(browser): \(status)")
        }
        pid = child
        commands = toBrowser[1]
        replies = fromBrowser[0]
    }

    deinit {
        kill(-pid, SIGKILL)
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        close(commands)
        close(replies)
    }

    /// Sends a command (to the page, once `open(_:)` attached to one) and returns its result.
    @discardableResult
    func send(
        _ method: String, _ params: [String: Any] = [:], toPage: Bool = true, deadline: Date
    ) throws -> [String: Any] {
        nextID += 1
        let id = nextID
        var message: [String: Any] = ["id": id, "method": method, "params": params]
        if toPage, let session { message["sessionId"] = session }
        var bytes = Array(try JSONSerialization.data(withJSONObject: message))
        bytes.append(0)
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { write(commands, $0.baseAddress, $0.count) }
            guard count > 0 else { throw Failure(description: "the browser's pipe closed (\(method))") }
            written += count
        }
        while true {
            let reply = try read(until: deadline, waitingFor: method)
            if reply["id"] as? Int == id {
                if let error = reply["error"] { throw Failure(description: "\(method) failed: \(error)") }
                return reply["result"] as? [String: Any] ?? [:]
            }
            if reply["method"] as? String == "Page.javascriptDialogOpening" {
                // A `confirm` (cancel, delete) blocks the command that opened it until it is answered.
                try send("Page.handleJavaScriptDialog", ["accept": true], deadline: deadline)
                continue
            }
            events.append(reply)
        }
    }

    /// Opens a page at `url` and waits until it has loaded.
    func open(_ url: String, deadline: Date) throws {
        let target = try send("Target.createTarget", ["url": "about:blank"], toPage: false, deadline: deadline)
        guard let id = target["targetId"] as? String else { throw Failure(description: "no target: \(target)") }
        let attached = try send(
            "Target.attachToTarget", ["targetId": id, "flatten": true], toPage: false, deadline: deadline)
        session = attached["sessionId"] as? String
        try send("Page.enable", deadline: deadline)
        events.removeAll()
        try send("Page.navigate", ["url": url], deadline: deadline)
        try waitForLoad(deadline: deadline)
    }

    /// Waits for the page's next load event, accepting any dialog (`confirm`) on the way.
    func waitForLoad(deadline: Date) throws {
        while true {
            let event = events.isEmpty ? try read(until: deadline, waitingFor: "a page load") : events.removeFirst()
            switch event["method"] as? String {
            case "Page.loadEventFired": return
            case "Page.javascriptDialogOpening":
                try send("Page.handleJavaScriptDialog", ["accept": true], deadline: deadline)
            default: continue
            }
        }
    }

    /// Evaluates `action` (a click that submits a form) and waits for the page it leads to. Load events
    /// from before the action are dropped first.
    func submit(_ action: String, deadline: Date) throws {
        events.removeAll { $0["method"] as? String == "Page.loadEventFired" }
        _ = try evaluate(action, deadline: deadline)
        try waitForLoad(deadline: deadline)
    }

    /// Evaluates `expression` in the page; returns its value as text.
    func evaluate(_ expression: String, deadline: Date) throws -> String {
        let result = try send(
            "Runtime.evaluate", ["expression": expression, "returnByValue": true, "awaitPromise": true],
            deadline: deadline)
        if let exception = result["exceptionDetails"] { throw Failure(description: "\(expression): \(exception)") }
        let value = (result["result"] as? [String: Any])?["value"]
        return value.map { "\($0)" } ?? ""
    }

    /// The next message from the browser.
    private func read(until deadline: Date, waitingFor what: String) throws -> [String: Any] {
        while true {
            if let end = buffer.firstIndex(of: 0) {
                let text = Array(buffer[..<end])
                buffer.removeFirst(end + 1)
                guard let message = try JSONSerialization.jsonObject(with: Data(text)) as? [String: Any] else {
                    continue
                }
                return message
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw Failure(description: "the browser did not answer in time (\(what))") }
            var poller = pollfd(fd: replies, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(min(left, 1) * 1000)) >= 0 || errno == EINTR else {
                throw Failure(description: "poll: \(errno)")
            }
            guard poller.revents != 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { readFile(replies, $0.baseAddress, $0.count) }
            guard count > 0 else { throw Failure(description: "the browser closed its pipe (\(what))") }
            buffer += chunk[..<count]
        }
    }
}

/// `read(2)` (a method of the session has that name).
private func readFile(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}
