import BatonTesting
import EarthquakesKit
import Foundation
import GRDB
import Testing

/// A database file with nothing in it — the zero-byte file that `touch`, a copy gone wrong or an
/// interrupted first run leaves — holds no events. The read commands said it had "no earthquake table"
/// and failed, the bare command too; they now read it as they read a missing database, without writing
/// to it, and a refresh fills it.
@Suite(.timeLimit(.binarySuite), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct EmptyDatabaseTests {
    @Test func aZeroByteDatabaseReadsAsEmptyAndARefreshFillsIt() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("empty.sqlite")
        #expect(FileManager.default.createFile(atPath: database, contents: Data()))

        let bare = try await EarthquakesBinaryTests.run(["--database", database])
        #expect(bare.status == 0, "\(bare)")
        #expect(bare.stdout.contains("SAMPLE DATA"), "\(bare)")
        #expect(bare.stdout.contains("your database \(database) holds no events yet"), "\(bare)")

        let list = try await EarthquakesBinaryTests.run(["list", "--database", database])
        #expect(list.status == 0, "\(list)")
        let json = try await EarthquakesBinaryTests.run(["list", "--json", "--database", database])
        #expect(json.status == 0, "\(json)")
        let listed = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [Any]
        #expect(listed?.isEmpty == true, "\(json)")

        let status = try await EarthquakesBinaryTests.run(["status", "--database", database])
        #expect(status.status == 0, "\(status)")
        #expect(status.stdout.contains("Database   \(database): 0 events"), "\(status)")

        // Nothing was written: still zero bytes, nothing beside it.
        let size = try FileManager.default.attributesOfItem(atPath: database)[.size] as? Int
        #expect(size == 0)
        #expect(SQLiteSideFiles.left(beside: database).isEmpty)

        let feed = scratch.path("feed.geojson")
        try SampleFeed.geoJSON(count: 4, seed: 11).write(to: URL(fileURLWithPath: feed))
        let refresh = try await EarthquakesBinaryTests.run(["refresh", "--feed", feed, "--database", database])
        #expect(refresh.status == 0, "\(refresh)")
        let after = try await EarthquakesBinaryTests.run(["status", "--database", database])
        #expect(after.stdout.contains("Database   \(database): 4 events"), "\(after)")
    }

    /// A database with tables of another program is still refused by name, not read as empty.
    @Test func aDatabaseOfAnotherProgramIsStillRefused() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("other.sqlite")
        let other = try DatabaseQueue(path: database)
        try await other.write { try $0.execute(sql: "CREATE TABLE notes (body TEXT)") }
        try other.close()
        let list = try await EarthquakesBinaryTests.run(["list", "--database", database])
        #expect(list.status == 1, "\(list)")
        #expect(list.stderr.contains("it holds another program's tables (notes)"), "\(list)")
    }
}
