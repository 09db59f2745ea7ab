import EarthquakesCLI
import EarthquakesKit
import Foundation
import Testing

/// `show` writes every date in the one calendar the table uses (proleptic Gregorian, UTC): an event of
/// 1500 (historical catalogues go back that far) has the same date on its time line, its updated line and
/// its share line.
@Suite struct HistoricDateTests {
    /// Stores one earthquake `id` that happened (and was last updated) at `date`.
    static func store(_ id: String, at date: Date, in path: String) throws {
        _ = try EarthquakeStore(path: path).importFeed([
            Earthquake(
                id: id, latitude: 1, longitude: 1, depth: 5, magnitude: 7, time: date, updated: date,
                type: "earthquake")
        ])
    }

    @Test func showsAnOldEventInOneCalendar() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        // 1500-03-01 12:00 UTC, proleptic Gregorian.
        let date = Date(timeIntervalSince1970: -14_826_628_800)
        try Self.store("old1", at: date, in: path)
        let captured = CapturedConsole()
        try EarthquakesCLI.forTests(captured).show(id: "old1", database: path, json: false)
        #expect(captured.stdout.contains("time         1500-03-01 12:00:00 UTC"), "\(captured.stdout)")
        #expect(captured.stdout.contains("updated      1500-03-01 12:00 UTC"), "\(captured.stdout)")
        let shared = CapturedConsole()
        try EarthquakesCLI.forTests(shared).show(id: "old1", database: path, json: false, share: true)
        #expect(shared.stdout.contains(", 1500-03-01 12:00 UTC — "), "\(shared.stdout)")
    }

    @Test func jsonWritesAnOldEventInTheCalendarOfCSV() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let date = Date(timeIntervalSince1970: -14_826_628_800.25)
        try Self.store("old1", at: date, in: path)
        let json = CapturedConsole()
        try EarthquakesCLI.forTests(json).show(id: "old1", database: path, json: true)
        #expect(json.stdout.contains(#""time" : "1500-03-01T11:59:59.750Z""#), "\(json.stdout)")
        let list = CapturedConsole()
        try EarthquakesCLI.forTests(list).list(ListOptions(), database: path, json: true)
        #expect(list.stdout.contains(#""updated" : "1500-03-01T11:59:59.750Z""#), "\(list.stdout)")
        let csv = CapturedConsole()
        try EarthquakesCLI.forTests(csv).list(ListOptions(csv: true), database: path, json: false)
        #expect(csv.stdout.contains("old1,1500-03-01T11:59:59.750Z,"), "\(csv.stdout)")
    }

    /// A negative year (ISO 8601's count, where 0 is 1 BC) is written sign first with four digits after
    /// it, the same in every output: year -44 was `0-44` in `show` and `--json`, and `-44` in the table
    /// and CSV.
    @Test func aNegativeYearIsWrittenSignFirstEverywhere() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let date = Date(timeIntervalSince1970: -63_549_316_800)  // -0044-03-15 12:00 UTC, proleptic Gregorian
        try Self.store("ides", at: date, in: path)
        let shown = CapturedConsole()
        try EarthquakesCLI.forTests(shown).show(id: "ides", database: path, json: false)
        #expect(shown.stdout.contains("time         -0044-03-15 12:00:00 UTC"), "\(shown.stdout)")
        #expect(shown.stdout.contains("updated      -0044-03-15 12:00 UTC"), "\(shown.stdout)")
        let json = CapturedConsole()
        try EarthquakesCLI.forTests(json).show(id: "ides", database: path, json: true)
        #expect(json.stdout.contains(#""time" : "-0044-03-15T12:00:00.000Z""#), "\(json.stdout)")
        let csv = CapturedConsole()
        try EarthquakesCLI.forTests(csv).list(ListOptions(csv: true), database: path, json: false)
        #expect(csv.stdout.contains("ides,-0044-03-15T12:00:00.000Z,"), "\(csv.stdout)")
        let table = CapturedConsole()
        try EarthquakesCLI.forTests(table).list(ListOptions(), database: path, json: false)
        #expect(table.stdout.contains("-0044-03-15 12:00"), "\(table.stdout)")
    }
}
