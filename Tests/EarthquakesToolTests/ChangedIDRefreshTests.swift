import EarthquakesCLI
import EarthquakesKit
import Foundation
import Testing

/// `earthquakes refresh` of a feed that publishes a stored event under a new id (its `ids` list names the
/// old one): one row for the event, and the summary line says a row was replaced.
@Suite struct ChangedIDRefreshTests {
    static func feed(id: String, ids: String, updated: Int64) -> String {
        #"{"type":"FeatureCollection","metadata":{"generated":1761800000000,"count":1},"features":[{"type":"Feature","#
            + #""properties":{"mag":4.2,"place":"10 km N of Somewhere","time":1761700000000,"updated":\#(updated),"#
            + #""ids":"\#(ids)","type":"earthquake"},"geometry":{"type":"Point","coordinates":[-150.25,61.5,30.1]},"#
            + #""id":"\#(id)"}]}"#
    }

    @Test func aNewIDReplacesTheStoredRow() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let first = scratch.path("first.geojson")
        let second = scratch.path("second.geojson")
        try Self.feed(id: "ak0251", ids: ",ak0251,", updated: 1_761_700_100_000).write(
            toFile: first, atomically: true, encoding: .utf8)
        try Self.feed(id: "us7000abcd", ids: ",ak0251,us7000abcd,", updated: 1_761_700_200_000).write(
            toFile: second, atomically: true, encoding: .utf8)
        try await EarthquakesCLI.forTests(CapturedConsole()).refresh(feed: first, database: path, json: false)
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).refresh(feed: second, database: path, json: false)
        #expect(try EarthquakeStore(path: path).snapshot().map(\.id) == ["us7000abcd"])
        #expect(
            captured.stdout.contains(
                "1 stored event now published under another id: the row under the old id was replaced"))
    }
}
