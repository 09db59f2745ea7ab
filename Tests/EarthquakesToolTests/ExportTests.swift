import EarthquakesKit
import Foundation
import Testing

/// Issue 31, defect 8: exports. An event with no type had an empty CSV `type` and `null` in JSON,
/// although filters and `status` count it as an earthquake; CSV passed a U+202E (right-to-left
/// override) through raw, which the table defuses. Run with the built executable.
@Suite(.timeLimit(.binarySuite), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct ExportTests {
    static let quakes = [
        Earthquake(
            id: "u1", latitude: 1, longitude: 2, depth: 3, magnitude: 2.5, place: "untyped",
            time: Date(timeIntervalSince1970: 1_700_000_000), type: nil),
        Earthquake(
            id: "b1", latitude: 1, longitude: 2, depth: 3, magnitude: 2.6,
            place: "5 km N of \u{202E}nwoT\u{202C}, \u{2066}isolated\u{2069} \u{200F}mark",
            time: Date(timeIntervalSince1970: 1_700_000_100), type: "Earthquake"),
    ]

    @Test func untypedEventsAreEarthquakesAndCSVDefusesBidirectionalControls() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).importFeed(Self.quakes)

        let csv = try await EarthquakesBinaryTests.run(["list", "--csv", "--database", database])
        #expect(csv.status == 0, "\(csv.stderr)")
        let lines = csv.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        let untyped = try #require(lines.first { $0.hasPrefix("u1,") })
        #expect(untyped.split(separator: ",", omittingEmptySubsequences: false)[6] == "earthquake", "\(untyped)")
        let bidi = try #require(lines.first { $0.hasPrefix("b1,") })
        #expect(
            !bidi.unicodeScalars.contains { [0x202E, 0x202C, 0x2066, 0x2069, 0x200F].contains($0.value) },
            "\(bidi.debugDescription)")
        #expect(bidi.contains("5 km N of \u{FFFD}nwoT\u{FFFD}, \u{FFFD}isolated\u{FFFD} \u{FFFD}mark"))
        #expect(bidi.contains(",earthquake,"))

        let json = try await EarthquakesBinaryTests.run(["list", "--json", "--database", database])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(rows.map { $0["type"] as? String } == ["earthquake", "earthquake"])
        let shown = try await EarthquakesBinaryTests.run(["show", "u1", "--json", "--database", database])
        let one = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        #expect(one["type"] as? String == "earthquake")
    }
}
