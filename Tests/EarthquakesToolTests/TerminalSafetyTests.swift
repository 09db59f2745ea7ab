import EarthquakesKit
import Foundation
import Testing

@testable import EarthquakesCLI

/// Text from a feed never acts on the user's terminal: escape sequences, line breaks and
/// bidirectional overrides in a place name or an id are replaced in the table and in `show`, and
/// kept as they are (escaped) in `--json`; `--csv` keeps line breaks (quoted) and replaces the other
/// control characters.
@Suite(.timeLimit(.minutes(1))) struct TerminalSafetyTests {
    static let place = "10 km N of \u{1B}]0;pwned\u{07}Nowhere\u{1B}[2J\nsecond line\u{202E}desrever\u{85}end"
    static let quake = Earthquake(
        id: "us\u{1B}[31mx", latitude: 10, longitude: 20, depth: 5, magnitude: 4.2, magnitudeType: "mb",
        place: place, time: Date(timeIntervalSince1970: 1_700_000_000), type: "quarry\u{0}blast",
        title: "M 4.2 - \u{1B}[1mbold")

    private func database() throws -> (Scratch, String) {
        let scratch = try Scratch()
        let path = scratch.path("q.sqlite")
        _ = try EarthquakeStore(path: path).importFeed([Self.quake])
        return (scratch, path)
    }

    /// Whether `text` holds a character a terminal would act on, other than the line breaks between lines.
    private func hasControl(_ text: String) -> Bool {
        text.unicodeScalars.contains {
            ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value)
                || (0x202A...0x202E).contains($0.value)
        }
    }

    @Test func theTableReplacesControlCharactersAndKeepsOneLinePerEvent() throws {
        let (scratch, path) = try database()
        defer { scratch.remove() }
        let captured = CapturedConsole()
        try EarthquakesCLI.forTests(captured).list(ListOptions(limit: 10), database: path, json: false)
        let lines = captured.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "a header and one row: \(lines)")
        #expect(!hasControl(captured.stdout), "\(captured.stdout.debugDescription)")
        #expect(lines.last?.contains("\u{FFFD}") == true)
        #expect(lines.last?.contains("10 km N of") == true)
    }

    @Test func showAndItsShareLineReplaceThemToo() throws {
        let (scratch, path) = try database()
        defer { scratch.remove() }
        for share in [false, true] {
            let captured = CapturedConsole()
            var cli = EarthquakesCLI.forTests(captured)
            cli.environment = ["HOME": scratch.url.path, "TZ": "UTC"]
            try cli.show(id: Self.quake.id, database: path, json: false, share: share)
            #expect(!hasControl(captured.stdout), "share: \(share): \(captured.stdout.debugDescription)")
            #expect(captured.stdout.contains("Nowhere"))
        }
    }

    @Test func jsonKeepsTheTextAsItIsAndCSVItsLineBreaks() throws {
        let (scratch, path) = try database()
        defer { scratch.remove() }
        let json = CapturedConsole()
        try EarthquakesCLI.forTests(json).list(ListOptions(limit: 10), database: path, json: true)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(rows.first?["place"] as? String == Self.place)
        let csv = CapturedConsole()
        try EarthquakesCLI.forTests(csv).list(ListOptions(limit: 10, csv: true), database: path, json: false)
        let place = TerminalText.csvSafe(Self.place)
        #expect(place.contains("\n") && !place.contains("\u{1B}"))
        #expect(csv.stdout.contains("\"" + place + "\""), "the place, quoted: \(csv.stdout.debugDescription)")
    }
}
