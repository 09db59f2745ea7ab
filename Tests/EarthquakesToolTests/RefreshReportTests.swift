import EarthquakesCLI
import EarthquakesKit
import Foundation
import Testing

/// Issue 10, defects 11 and 12, as `refresh` reports them: repeated ids and skipped features are said,
/// not hidden in "1 updated"; `--strict` refuses such a feed.
@Suite(.timeLimit(.minutes(1))) struct RefreshReportTests {
    typealias Binary = EarthquakesBinaryTests

    /// Six sample features: the third repeats the first one's id, the fifth has a null depth.
    static func awkwardFeed() throws -> (data: Data, repeatedID: String, brokenID: String) {
        var object = try #require(
            try JSONSerialization.jsonObject(with: SampleFeed.geoJSON(count: 6, seed: 11)) as? [String: Any])
        var features = try #require(object["features"] as? [[String: Any]])
        let repeatedID = try #require(features[0]["id"] as? String)
        features[2]["id"] = repeatedID
        let brokenID = try #require(features[4]["id"] as? String)
        var geometry = try #require(features[4]["geometry"] as? [String: Any])
        var coordinates = try #require(geometry["coordinates"] as? [Any])
        coordinates[2] = NSNull()
        geometry["coordinates"] = coordinates
        features[4]["geometry"] = geometry
        object["features"] = features
        return (try JSONSerialization.data(withJSONObject: object), repeatedID, brokenID)
    }

    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func repeatedIDsAndSkippedFeaturesAreReported() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (data, repeatedID, brokenID) = try Self.awkwardFeed()
        let feed = scratch.path("feed.geojson")
        try data.write(to: URL(fileURLWithPath: feed))
        let database = scratch.path("q.sqlite")

        let run = try await Binary.run(["refresh", "--feed", feed, "--database", database])
        #expect(run.status == 0, "\(run.stderr)")
        // 6 features: one repeats an id, one cannot be read: 4 distinct events imported.
        #expect(try EarthquakeStore(path: database).count() == 4)
        #expect(run.stdout.contains("(4 new, 0 updated, 0 unchanged)"))
        #expect(run.stdout.contains("1 repeated id not counted"))
        #expect(run.stdout.contains("1 unreadable feature skipped"))
        #expect(
            run.stderr.contains(
                "warning: 1 feature of the feed repeated an id given earlier in it (\(repeatedID)); only the newest copy of each id (by its updated time, copies without one last; the last on a tie) was imported"
            ))
        #expect(run.stderr.contains("warning: skipped feature 4 (id \"\(brokenID)\")"))

        let json = try await Binary.run(["refresh", "--feed", feed, "--database", database, "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["duplicates"] as? Int == 1)
        #expect(object["duplicateIDs"] as? [String] == [repeatedID])
        #expect(object["skipped"] as? Int == 1)
        #expect(object["unchanged"] as? Int == 4)
    }

    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func strictRefusesAFeedWithAnUnreadableFeature() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feed = scratch.path("feed.geojson")
        try Self.awkwardFeed().data.write(to: URL(fileURLWithPath: feed))
        let database = scratch.path("q.sqlite")
        try EarthquakeStore.withSample(at: database)
        let before = try EarthquakeStore(path: database).snapshot()

        let run = try await Binary.run(["refresh", "--strict", "--feed", feed, "--database", database])
        #expect(run.status == 1)
        #expect(run.stderr.hasPrefix("earthquakes: the feed from \(feed) is not usable"))
        #expect(run.stderr.hasSuffix("The database was not changed.\n"))
        #expect(try EarthquakeStore(path: database).snapshot() == before)
    }
}
