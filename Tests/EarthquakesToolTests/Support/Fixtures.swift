import BatonTesting
import EarthquakesCLI
import EarthquakesKit
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A fresh folder under the temporary directory. Call ``remove()`` at the end.
struct Scratch {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("EarthquakesToolTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Every name in the folder, hidden files included, sorted.
    var contents: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// A console that records what the tool writes.
struct CapturedConsole {
    let out = Recorder<String>()
    let err = Recorder<String>()
    var console: Console

    init(isErrorTerminal: Bool = false, isOutputTerminal: Bool = false) {
        let (out, err) = (out, err)
        console = Console(
            isErrorTerminal: isErrorTerminal, isOutputTerminal: isOutputTerminal, out: { out.record($0) },
            err: { err.record($0) })
    }

    var stdout: String { out.values.joined() }
    var stderr: String { err.values.joined() }
    var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) }
}

extension EarthquakesCLI {
    /// A CLI for tests: recorded output, an empty environment, a fixed clock and a cache-free session.
    static func forTests(_ captured: CapturedConsole, now: Date = SampleFeed.referenceDate) -> EarthquakesCLI {
        EarthquakesCLI(
            console: captured.console, environment: ["HOME": "/nonexistent-home"], now: { now },
            session: URLSession(configuration: .ephemeral))
    }
}

extension EarthquakeStore {
    /// A database file at `path` holding the 40 events of the sample feed.
    @discardableResult
    static func withSample(at path: String) throws -> EarthquakeStore {
        let store = try EarthquakeStore(path: path)
        _ = try store.importFeed(try FeedParser().parse(SampleFeed.data))
        return store
    }

    /// Every row, in a stable order, to compare a database before and after.
    func snapshot() throws -> [Earthquake] {
        try list(sort: .time).sorted { $0.id < $1.id }
    }
}

/// SQLite's side files beside a database: a write-ahead log (`-wal`) and its index (`-shm`) left by a
/// connection that was not closed, or a rollback journal.
enum SQLiteSideFiles {
    /// The suffixes of the side files that exist beside `path`.
    static func left(beside path: String) -> [String] {
        ["-wal", "-shm", "-journal"].filter { FileManager.default.fileExists(atPath: path + $0) }
    }
}
