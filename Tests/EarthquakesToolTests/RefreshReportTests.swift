import EarthquakesCLI
import EarthquakesKit
import Foundation
import Testing

/// Issue 10, defects 11 and 12, as `refresh` reports them: repeated ids and skipped features are said,
/// not hidden in "1 updated"; `--strict` refuses such a feed.
@Suite(.timeLimit(.binarySuite)) struct RefreshReportTests {
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
    /// The review: a refresh of several feeds said only "; 1 unreadable feature skipped" — no warning
    /// named the feature or the repeated id (though `--strict`'s help says each is named), and its JSON had
    /// no duplicates or deleted counts. Now each feed is reported as a one-feed refresh reports it.
    @Test func severalFeedsNameEachWarningAndRepeatedID() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (data, repeatedID, brokenID) = try Self.awkwardFeed()
        let (awkward, plain) = (scratch.path("awkward.geojson"), scratch.path("plain.geojson"))
        try data.write(to: URL(fileURLWithPath: awkward))
        // Ids of its own: the sample's ids repeat across sample feeds, and the counts below would then
        // depend on which feed the refresh happened to import first.
        var sample = try #require(
            try JSONSerialization.jsonObject(with: SampleFeed.geoJSON(count: 3, seed: 99)) as? [String: Any])
        var sampleFeatures = try #require(sample["features"] as? [[String: Any]])
        for index in sampleFeatures.indices { sampleFeatures[index]["id"] = "plain\(index)" }
        sample["features"] = sampleFeatures
        try JSONSerialization.data(withJSONObject: sample).write(to: URL(fileURLWithPath: plain))
        let database = scratch.path("q.sqlite")

        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(
            feeds: [awkward, plain], resume: false, database: database, json: false)
        #expect(
            captured.stdout.contains(
                "(4 new, 0 updated, 0 unchanged); 1 repeated id not counted; 1 unreadable feature skipped"),
            "\(captured.stdout)")
        #expect(
            captured.stderr.contains("warning: \(awkward): skipped feature 4 (id \"\(brokenID)\")"),
            "\(captured.stderr)")
        #expect(
            captured.stderr.contains(
                "warning: \(awkward): 1 feature of the feed repeated an id given earlier in it (\(repeatedID)); only the newest copy"
            ),
            "\(captured.stderr)")
        #expect(!captured.stderr.contains("warning: \(plain)"), "\(captured.stderr)")

        let json = CapturedConsole()
        let other = scratch.path("other.sqlite")
        try await EarthquakesCLI.forTests(json).refresh(
            feeds: [awkward, plain], resume: false, database: other, json: true)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let feeds = try #require(object["feeds"] as? [[String: Any]])
        #expect(feeds.first?["duplicates"] as? Int == 1)
        #expect(feeds.first?["duplicateIDs"] as? [String] == [repeatedID])
        #expect(feeds.first?["deleted"] as? Int == 0)
        #expect(feeds.first?["removedDeleted"] as? Int == 0)
        #expect(feeds.first?["skipped"] as? Int == 1)
        #expect((feeds.first?["warnings"] as? [String])?.count == 1)
        #expect(feeds.last?["duplicates"] as? Int == 0)
    }
}
