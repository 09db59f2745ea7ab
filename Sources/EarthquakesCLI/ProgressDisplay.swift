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
