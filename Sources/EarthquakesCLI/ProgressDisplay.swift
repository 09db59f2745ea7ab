import Baton
import EarthquakesKit

/// Shows the progress of a refresh on one terminal line of standard error, rewritten in place.
///
/// ## Thread safety
/// Events may arrive from any thread; the last line shown is guarded by a lock, and the console is
/// written outside it.
final class ProgressDisplay: @unchecked Sendable {
    // @unchecked Sendable: `console` is immutable; `lastLine` is guarded by `lock`.
    private let console: Console
    private let lock = Lock()
    private var lastLine = ""

    init(console: Console) {
        self.console = console
    }

    func report(_ progress: GetEarthquakes.Progress) {
        let line: String
        switch progress {
        case .checkingHost(let host): line = "Checking that \(host) can be reached…"
        case .downloading(let received, let expected):
            line = "Downloading… \(Self.size(received))" + (expected.map { " of \(Self.size($0))" } ?? "")
        case .parsing: line = "Parsing the feed…"
        case .importing(let count): line = "Importing \(EarthquakesCLI.counted(count, "earthquake"))…"
        case .waitingForDatabase: line = "Waiting for another refresh of this database to finish…"
        case .imported(let summary): line = "Imported \(EarthquakesCLI.counted(summary.total, "earthquake"))."
        }
        let changed = lock.withLock {
            defer { lastLine = line }
            return lastLine != line
        }
        if changed { console.error("\r\u{1B}[K" + line) }
    }

    /// Clears the progress line.
    func finish() {
        let shown = lock.withLock {
            defer { lastLine = "" }
            return !lastLine.isEmpty
        }
        if shown { console.error("\r\u{1B}[K") }
    }

    static func size(_ bytes: Int64) -> String {
        if bytes < 1024 { return EarthquakesCLI.counted(Int(bytes), "byte") }
        if bytes < 1024 * 1024 { return "\(bytes / 1024) KB" }
        return QuakeTable.fixed(Double(bytes) / 1_048_576, 1) + " MB"
    }
}

/// Shows the downloads of a refresh of several feeds on one terminal line of standard error, rewritten
/// in place: "Downloading day 120 KB of 400 KB, week 1.1 MB…". The lines a refresh prints meanwhile
/// (each feed's import) clear it first (``clear()``); the next progress shows it again.
///
/// ## Thread safety
/// `Sendable`: the state is guarded by one lock; the console is written outside it.
final class FeedsProgressDisplay: Sendable {
    private struct State {
        /// Bytes received and expected, by feed, in the order the downloads started.
        var downloads: [(feed: String, received: Int64, expected: Int64?)] = []
        var shown = ""
    }

    private let console: Console
    private let state = Protected(State())

    init(console: Console) {
        self.console = console
    }

    /// A download's progress.
    func downloading(_ feed: String, received: Int64, expected: Int64?) {
        let line = state.withLock { state -> String? in
            if let index = state.downloads.firstIndex(where: { $0.feed == feed }) {
                state.downloads[index] = (feed, received, expected)
            } else {
                state.downloads.append((feed, received, expected))
            }
            let parts = state.downloads.map { download in
                EarthquakesCLI.feedName(download.feed) + " " + ProgressDisplay.size(download.received)
                    + (download.expected.map { " of \(ProgressDisplay.size($0))" } ?? "")
            }
            let line = "Downloading " + parts.joined(separator: ", ") + "…"
            guard line != state.shown else { return nil }
            state.shown = line
            return line
        }
        if let line { console.error("\r\u{1B}[K" + TerminalText.safe(line)) }
    }

    /// A download ended: it leaves the line.
    func downloaded(_ feed: String) {
        state.withLock { $0.downloads.removeAll { $0.feed == feed } }
    }

    /// Clears the line (before other output; the next progress shows it again).
    func clear() {
        let shown = state.withLock { state -> Bool in
            defer { state.shown = "" }
            return !state.shown.isEmpty
        }
        if shown { console.error("\r\u{1B}[K") }
    }
}
