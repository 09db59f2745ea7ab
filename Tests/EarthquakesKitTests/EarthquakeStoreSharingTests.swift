import BatonTesting
import EarthquakesKit
import Foundation
import Testing

/// Two processes on one database file: the other process is a Python script (standard library
/// `sqlite3`) that opens a write transaction, inserts a row and waits for a line on its standard
/// input before it commits or rolls back.
@Suite(
    "EarthquakeStore: two processes, one database", .timeLimit(.minutes(1)),
    .enabled(if: OtherProcess.isAvailable, "python3 is not installed; these tests need a second process")
)
struct EarthquakeStoreSharingTests {
    /// A store in a new folder holding one event, and another process that holds its write lock.
    static func heldByAnotherProcess(
        busyTimeout: Duration = .seconds(60)
    ) throws -> (TemporaryDirectory, EarthquakeStore, OtherProcess) {
        let directory = try TemporaryDirectory()
        do {
            let path = directory.path("quakes.sqlite")
            let store = try EarthquakeStore(path: path, busyTimeout: busyTimeout)
            try store.importFeed([Quakes.tokyo])
            return (directory, store, try OtherProcess(holdingWriteLockOn: path))
        } catch {
            directory.remove()
            throw error
        }
    }

    @Test("the file is in WAL mode, and a reader does not wait for another process's import")
    func readersDoNotWait() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("quakes.sqlite")
        try EarthquakeStore(path: path).importFeed([Quakes.tokyo])

        let other = try OtherProcess(holdingWriteLockOn: path)
        #expect(other.journalMode == "wal")
        // A busy timeout of zero: if opening or reading needed the lock, this would fail at once.
        let reader = try EarthquakeStore(path: path, mode: .readOnly, busyTimeout: .zero)
        #expect(try reader.count() == 1)  // the other import is not committed yet
        #expect(try reader.list().map(\.id) == ["tokyo"])
        let writerOpening = try EarthquakeStore(path: path, busyTimeout: .zero)
        #expect(try writerOpening.count() == 1)
        try other.finish(commit: true)
        #expect(try reader.count() == 2)
    }

    @Test("a second import waits for the other process, says it is waiting, then succeeds")
    func writerWaits() async throws {
        let (directory, store, other) = try Self.heldByAnotherProcess()
        defer { directory.remove() }
        let waiting = Gate()
        let result = Recorder<Result<ImportSummary, StoreError>>()
        let done = Gate()
        DispatchQueue(label: "importer").async {  // blocks: a thread of its own
            do throws(StoreError) {
                result.record(.success(try store.importFeed([Quakes.sanFrancisco], whileWaiting: { waiting.open() })))
            } catch {
                result.record(.failure(error))
            }
            done.open()
        }
        await waiting.waitAsync()
        #expect(result.values.isEmpty)  // still waiting for the other process
        try other.finish(commit: true)
        await done.waitAsync()
        #expect(try result.values.first?.get() == ImportSummary(inserted: 1))
        #expect(try store.count() == 3)  // tokyo, the other process's row, sf
    }

    /// A probe (7 December 2026): Ctrl-C during a refresh that waited for another process's lock was
    /// answered only when that process let go (36 s later), as the wait lasts up to the busy timeout.
    @Test("a cancel ends an import's wait for another process's lock at once")
    func cancelEndsTheWait() async throws {
        let (directory, store, other) = try Self.heldByAnotherProcess(busyTimeout: .seconds(3_600))
        defer { directory.remove() }
        let waiting = Gate()
        let gate = ImportCommitGate()
        let result = Recorder<Result<ImportSummary, StoreError>>()
        let done = Gate()
        DispatchQueue(label: "importer").async {  // blocks: a thread of its own
            do throws(StoreError) {
                result.record(
                    .success(
                        try store.importFeed([Quakes.sanFrancisco], whileWaiting: { waiting.open() }, commitGate: gate)
                    ))
            } catch {
                result.record(.failure(error))
            }
            done.open()
        }
        await waiting.waitAsync()
        #expect(gate.cancel() == .willRollBack)
        // The other process still holds its lock: only the cancel can end the wait (within the time limit).
        await done.waitAsync()
        try other.finish(commit: false)
        let error = #expect(throws: StoreError.self) { try result.values.first?.get() }
        #expect(error?.code == .cancelled)
        #expect(try store.list().map(\.id) == ["tokyo"])
    }

    /// A probe (7 December 2026): `prune` while another program held the lock said "SQLite error 5:
    /// database is locked", with no advice.
    @Test("a prune that cannot get the database in time says another program is using it")
    func pruneGivesUp() throws {
        let (directory, store, other) = try Self.heldByAnotherProcess(busyTimeout: .milliseconds(200))
        defer { directory.remove() }
        let error = try #require(throws: StoreError.self) {
            try store.deleteEarthquakes(before: Date.distantFuture)
        }
        try other.finish(commit: false)
        #expect(error.code == .busy)
        #expect(error.description.contains("Try again"), "\(error.description)")
        #expect(!error.description.contains("SQLite error 5"), "\(error.description)")
        #expect(try store.list().map(\.id) == ["tokyo"])
    }

    @Test("an import that cannot get the database in time says another refresh is using it")
    func writerGivesUp() throws {
        let (directory, store, other) = try Self.heldByAnotherProcess(busyTimeout: .milliseconds(200))
        defer { directory.remove() }
        let waited = Recorder<Bool>()
        let error = try #require(throws: StoreError.self) {
            try store.importFeed([Quakes.sanFrancisco], whileWaiting: { waited.record(true) })
        }
        try other.finish(commit: false)
        #expect(error.code == .busy)
        #expect(error.description.contains("another refresh of this database"))
        #expect(error.description.contains("Try again"))
        #expect(!error.description.contains("folder"))
        #expect(waited.count == 1)
        #expect(try store.list().map(\.id) == ["tokyo"])
    }
}

/// A Python process holding a write transaction on a SQLite file.
final class OtherProcess {
    static let python =
        ["/usr/bin/python3", "/usr/local/bin/python3"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        ?? ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":").map { "\($0)/python3" }.first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    static var isAvailable: Bool { python != nil }

    private static let script = """
        import sqlite3, sys
        c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0)
        mode = c.execute("PRAGMA journal_mode").fetchone()[0]
        c.execute("BEGIN IMMEDIATE")
        c.execute("INSERT INTO earthquake (id, latitude, longitude, depth) VALUES ('other', 1, 1, 1)")
        print(mode, flush=True)
        c.execute("COMMIT" if sys.stdin.readline().strip() == "commit" else "ROLLBACK")
        print("done", flush=True)
        """

    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    /// The journal mode the other process found.
    private(set) var journalMode = ""

    /// Starts the process and returns once it holds the lock.
    init(holdingWriteLockOn path: String) throws {
        process.executableURL = URL(fileURLWithPath: Self.python!)
        process.arguments = ["-c", Self.script, path]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        journalMode = readLine()
    }

    /// Commits or rolls back, and waits for the process to exit.
    func finish(commit: Bool) throws {
        input.fileHandleForWriting.write(Data((commit ? "commit\n" : "rollback\n").utf8))
        _ = readLine()
        process.waitUntilExit()
    }

    private func readLine() -> String {
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte.first == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }

    deinit {
        if process.isRunning { process.terminate() }
    }
}
