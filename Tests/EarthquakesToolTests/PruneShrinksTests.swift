import EarthquakesKit
import Foundation
import Testing

/// Issue 31, defect 12: `prune` deleted rows but never shrank the file (134k of 210k rows deleted, still
/// 83.6 MB): SQLite keeps the pages of deleted rows. It now compacts the file after a prune that freed
/// enough of it, and says by how much.
@Suite(.timeLimit(.binarySuite), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct PruneShrinksTests {
    static func size(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? NSNumber)?.int64Value ?? 0
    }

    @Test func pruningMostEventsShrinksTheFile() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        let store = try EarthquakeStore(path: database)
        try store.importFeed(try FeedParser().parse(SampleFeed.geoJSON(count: 6000, seed: 9)))
        let times = try store.snapshot().compactMap(\.time).sorted()
        try store.close()
        let before = Self.size(database)
        // The newest fifth stays.
        let cutOff = times[times.count * 4 / 5]
        let iso = ISO8601DateFormatter().string(from: cutOff)
        let used = try #require(ISO8601DateFormatter().date(from: iso))  // (whole seconds)
        let prune = try await EarthquakesBinaryTests.run(["prune", "--before", iso, "--database", database])
        #expect(prune.status == 0, "\(prune.stderr)")
        #expect(prune.stdout.contains("The file shrank from "), "\(prune.stdout)")
        let after = Self.size(database)
        #expect(after * 2 < before, "\(before) bytes before, \(after) after")
        #expect(SQLiteSideFiles.left(beside: database).isEmpty)
        #expect(try EarthquakeStore(path: database, mode: .readOnly).count() == times.filter { $0 >= used }.count)

        // Nothing deleted: nothing compacted, nothing said.
        let again = try await EarthquakesBinaryTests.run(["prune", "--before", "2000-01-01", "--database", database])
        #expect(again.status == 0)
        #expect(!again.stdout.contains("shrank"))
    }
}
