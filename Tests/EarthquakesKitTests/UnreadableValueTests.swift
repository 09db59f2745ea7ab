import Baton
import BatonTesting
import EarthquakesKit
import Foundation
import GRDB
import Testing

/// A value of the `earthquake` table that is not of its column's type — only another program can
/// write one — stopped every command that decoded the row with GRDB's `try!` ("Fatal error … could not
/// decode Double", signal 4), and the plain listing showed it as 0. Every read now fails with a
/// message naming the event, the column and the value, and says what to do.
@Suite("EarthquakeStore: values another program wrote", .offThePool)
struct UnreadableValueTests {
    /// Deletes the folder of a database made by ``tampered(_:)``.
    static func remove(_ path: String) {
        try? FileManager.default.removeItem(at: URL(fileURLWithPath: path).deletingLastPathComponent())
    }

    /// A database holding `Quakes.all`, with `update` run on it by another connection.
    /// In a folder of its own, which ``remove(_:)`` deletes.
    static func tampered(_ update: String) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("unreadable-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let path = folder.appendingPathComponent("q.sqlite").path
        let store = try EarthquakeStore(path: path)
        try store.importFeed(Quakes.all)
        try store.close()
        let other = try DatabaseQueue(path: path)
        try other.inDatabase { try $0.execute(sql: update) }
        try other.close()
        return path
    }

    @Test(
        "every read names the event, the column and the value",
        arguments: [
            ("UPDATE earthquake SET depth = 'deep' WHERE id = 'sf'", "depth", "\"deep\""),
            ("UPDATE earthquake SET magnitude = x'00' WHERE id = 'sf'", "magnitude", "a byte of binary data"),
            ("UPDATE earthquake SET time = 1.5e30 WHERE id = 'sf'", "time", "1.5e+30"),
            ("UPDATE earthquake SET felt = 'many' WHERE id = 'sf'", "felt", "\"many\""),
        ])
    func everyReadSaysWhatIsWrong(_ update: String, _ column: String, _ value: String) throws {
        let path = try Self.tampered(update)
        defer { Self.remove(path) }
        let store = try EarthquakeStore(path: path, mode: .readOnly)
        defer { try? store.close() }
        let reads: [(String, () throws -> Void)] = [
            ("recent", { _ = try store.recent() }),
            ("list", { _ = try store.list() }),
            ("near", { _ = try store.near(latitude: 37.8, longitude: -122.4) }),
            ("earthquake(id:)", { _ = try store.earthquake(id: "sf") }),
            (
                "earthquakes(matching:)",
                { _ = try store.earthquakes(matching: EarthquakeFilter(), order: .time, limit: nil) }
            ),
            ("forEachRow", { try store.forEachRow(matching: EarthquakeFilter(), order: .time, limit: nil) { _ in } }),
        ]
        for (name, read) in reads {
            do {
                try read()
                Issue.record("\(name) read the tampered row without a word")
            } catch let error as StoreError {
                #expect(error.code == .read, "\(name)")
                let text = error.description
                #expect(text.contains("the event 'sf' has \(value) in its \(column) column"), "\(name): \(text)")
                #expect(text.contains("DELETE FROM earthquake WHERE id = 'sf'"), "\(name): \(text)")
            }
        }
        // Counting reads no value: it still answers.
        #expect(try store.count() == Quakes.all.count)
    }

    /// Without a readable id, the advice gives no command: one that does not name the row by its id
    /// could delete others (it offered `DELETE … WHERE typeof(id) <> 'real' …`, which deletes every event).
    @Test("an unreadable id gets advice without a command")
    func anUnreadableIdGetsNoCommand() throws {
        let path = try Self.tampered("UPDATE earthquake SET id = x'ff' WHERE id = 'sf'")
        defer { Self.remove(path) }
        let store = try EarthquakeStore(path: path, mode: .readOnly)
        defer { try? store.close() }
        let error = #expect(throws: StoreError.self) { _ = try store.recent() }
        let text = error?.description ?? ""
        #expect(text.contains("an event has a byte of binary data in its id column, which holds text"), "\(text)")
        #expect(!text.contains("DELETE"), "\(text)")
    }

    @Test("a refresh of the event repairs the row")
    func aRefreshRepairsTheRow() throws {
        let path = try Self.tampered("UPDATE earthquake SET depth = 'deep' WHERE id = 'sf'")
        defer { Self.remove(path) }
        let store = try EarthquakeStore(path: path)
        defer { try? store.close() }
        try store.importFeed(Quakes.all)
        #expect(try store.earthquake(id: "sf")?.depth == Quakes.sanFrancisco.depth)
    }
}

/// A read kept waiting by another program's lock (it waits up to a minute) printed nothing: the
/// command looked hung. The store now tells `onLongWait` once a wait has lasted a second.
@Suite("EarthquakeStore: a long wait for a lock is told")
struct LongLockWaitTests {
    @Test func aReadKeptWaitingIsToldOnceAndThenReads() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("wait-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("q.sqlite").path
        do {
            let store = try EarthquakeStore(path: path)
            try store.importFeed(Quakes.all)
            try store.close()
        }
        // A rollback journal (not WAL), whose exclusive lock stops readers too.
        var configuration = Configuration()
        configuration.allowsUnsafeTransactions = true  // the lock is held across two accesses
        let holder = try DatabaseQueue(path: path, configuration: configuration)
        try holder.inDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = DELETE")
            try db.execute(sql: "BEGIN EXCLUSIVE")
            try db.execute(sql: "UPDATE earthquake SET place = 'held' WHERE id = 'sf'")
        }
        let told = Protected(0)
        let release = Gate()
        let reader = Task {
            try await offThePool {
                let store = try EarthquakeStore(
                    path: path, mode: .readOnly,
                    onLongWait: {
                        told.withLock { $0 += 1 }
                        release.open()
                    })
                defer { try? store.close() }
                return try store.earthquake(id: "sf")?.place
            }
        }
        try await withDeadline(.seconds(30), "the reader to say it waits") { await release.waitAsync() }
        try holder.inDatabase { db in try db.execute(sql: "COMMIT") }
        let place = Protected<String?>(nil)
        try await withDeadline(.seconds(30), "the read after the lock") {
            let read = try await reader.value
            place.withLock { $0 = read }
        }
        #expect(place.current == "held")
        #expect(told.current == 1)
        try holder.close()
    }
}
