import EarthquakesKit
import Foundation
import Testing

/// Issue 31, defect 11: felt reports, CDI and MMI intensity, significance and the PAGER alert were in the
/// database but not in `show`, `list` or `--json` (Ridgecrest M7.1: felt 42,907, MMI 9.3).
@Suite(.timeLimit(.binarySuite), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct StoredFieldsTests {
    static let ridgecrest = Earthquake(
        id: "ci38457511", latitude: 35.7695, longitude: -117.5993, depth: 8, magnitude: 7.1, magnitudeType: "mw",
        place: "2km SW of Searles Valley, CA", time: Date(timeIntervalSince1970: 1_562_383_193.04), felt: 42907,
        cdi: 8.4, mmi: 9.3, alert: "yellow", status: "reviewed", tsunami: false, significance: 2910, network: "ci",
        type: "earthquake")
    static let quiet = Earthquake(
        id: "nc75046351", latitude: 38.8, longitude: -122.8, depth: 2, magnitude: 1.2, place: "The Geysers, CA",
        time: Date(timeIntervalSince1970: 1_562_383_000), significance: 22, type: "earthquake")

    @Test func showListCSVAndJSONShowThem() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).importFeed([Self.ridgecrest, Self.quiet])

        let show = try await EarthquakesBinaryTests.run(["show", "ci38457511", "--database", database])
        #expect(show.status == 0, "\(show.stderr)")
        for line in [
            "alert        yellow (PAGER: estimated impact)", "felt         42907 reports (Did You Feel It?)",
            "intensity    MMI 9.3 (estimated, ShakeMap), CDI 8.4 (reported, Did You Feel It?)",
            "significance 2910",
        ] {
            #expect(show.stdout.contains(line + "\n"), "\(line)\n\(show.stdout)")
        }

        let json = try await EarthquakesBinaryTests.run(["show", "ci38457511", "--json", "--database", database])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["felt"] as? Int == 42907)
        #expect(object["cdi"] as? Double == 8.4)
        #expect(object["mmi"] as? Double == 9.3)
        #expect(object["significance"] as? Int == 2910)
        #expect(object["alert"] as? String == "yellow")

        let listed = try await EarthquakesBinaryTests.run(["list", "--json", "--database", database])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(rows.first?["mmi"] as? Double == 9.3)
        #expect(rows.last.map { $0["felt"] is NSNull } == true, "every object has every key; null when unknown")

        let csv = try await EarthquakesBinaryTests.run(["list", "--csv", "--database", database])
        let lines = csv.stdout.split(separator: "\n")
        #expect(
            lines.first == "id,time,latitude,longitude,depth_km,magnitude,type,place,felt,cdi,mmi,significance,alert")
        #expect(lines.dropFirst().first?.hasSuffix(",42907,8.4,9.3,2910,yellow") == true, "\(csv.stdout)")
        #expect(lines.last?.hasSuffix(",,,,22,") == true, "\(csv.stdout)")

        let table = try await EarthquakesBinaryTests.run(["list", "--database", database])
        #expect(
            table.stdout.contains("  ci38457511    sig 2910, felt 42907, MMI 9.3, CDI 8.4, PAGER yellow\n"),
            "\(table.stdout)")
        #expect(table.stdout.contains("  nc75046351    sig 22\n"), "\(table.stdout)")
    }
}
