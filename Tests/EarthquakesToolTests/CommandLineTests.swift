import EarthquakesCLI
import EarthquakesKit
import Foundation
import Testing

/// The command line as typed, through the built executable: negative numbers, exit codes, usage.
@Suite(.timeLimit(.binarySuite)) struct CommandLineTests {
    typealias Binary = EarthquakesBinaryTests

    /// A scratch folder with a database holding the 40 sample events, imported with `refresh --feed FILE`.
    static func filledDatabase() async throws -> (Scratch, String) {
        let scratch = try Scratch()
        let feed = scratch.path("feed.geojson")
        try SampleFeed.data.write(to: URL(fileURLWithPath: feed))
        let database = scratch.path("q.sqlite")
        let refresh = try await Binary.run(["refresh", "--feed", feed, "--database", database])
        #expect(refresh.status == 0, "refresh failed: \(refresh.stderr)")
        return (scratch, database)
    }

    /// Issue 10, defect 2: `--near -33.9,151.2` and `--min-magnitude -0.5` failed with "Missing value".
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func negativeNumbersWorkAsTyped() async throws {
        let (scratch, database) = try await Self.filledDatabase()
        defer { scratch.remove() }

        let near = try await Binary.run([
            "list", "--near", "-33.9,151.2", "--limit", "3", "--json", "--database", database,
        ])
        #expect(near.status == 0, "\(near.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(near.stdout.utf8)) as? [[String: Any]])
        let expected = try EarthquakeStore(path: database).near(latitude: -33.9, longitude: 151.2, limit: 3)
        #expect(rows.compactMap { $0["id"] as? String } == expected.map(\.earthquake.id))

        let magnitude = try await Binary.run([
            "list", "--min-magnitude", "-0.5", "--limit", "100", "--database", database,
        ])
        #expect(magnitude.status == 0, "\(magnitude.stderr)")
        #expect(magnitude.stdout.split(separator: "\n").count > 1)

        let equals = try await Binary.run([
            "list", "--near=-33.9,151.2", "--limit", "3", "--json", "--database", database,
        ])
        #expect(equals.stdout == near.stdout)
    }

    /// Issue 10, defect 15: usage errors exit 64 (EX_USAGE) and show the subcommand's usage.
    @Test(
        .enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"),
        arguments: [
            (["list", "--since", "soon"], "--since \"soon\" is not a date", "earthquakes list"),
            (["list", "--since", "2018-06-14garbage"], "for example 2018-06-14", "earthquakes list"),
            (["list", "--near", "95,10"], "latitude must be in -90...90", "earthquakes list"),
            (
                ["list", "--near", "Sydney"], "--near \"Sydney\" is not LAT,LON, home or a saved place",
                "earthquakes list"
            ),
            (["list", "--near", "-33.9"], "--near expects LAT,LON", "earthquakes list"),
            (["list", "--limit", "-1"], "--limit must be at least 1", "earthquakes list"),
            // The probe: --limit 0 said "No earthquakes match (3364 stored)".
            (["list", "--limit", "0"], "--limit must be at least 1 (--all lists every match)", "earthquakes list"),
            // The probe: "," fell back to the default network feed; 0.0001 s rounded to 0 ms.
            (["refresh", "--feeds", ","], "--feeds \",\" names no feed", "earthquakes refresh"),
            (["refresh", "--timeout", "0.0001"], "at least 0.001 (1 ms)", "earthquakes refresh"),
            (["refresh", "--total-timeout", "0.0001"], "at least 0.001 (1 ms)", "earthquakes refresh"),
            (["list", "--min-magnitude", "big"], "big", "earthquakes list"),
            (["list", "--near"], "Missing value", "earthquakes list"),
            (
                ["refresh", "--feed", "ftp://example.com/x"], "use an http(s) address or a file path",
                "earthquakes refresh"
            ),
            (["refresh", "--timeout", "0"], "--timeout must be a positive number", "earthquakes refresh"),
            // A timeout too large for a duration trapped (exit 132) before it was refused.
            (["refresh", "--timeout", "1e300"], "at most 604800 (a week)", "earthquakes refresh"),
            (["refresh", "--total-timeout", "1e300"], "--total-timeout must be", "earthquakes refresh"),
            (["refresh", "--timeout", "-1"], "--timeout must be a positive number", "earthquakes refresh"),
            (["refresh", "--timeout", "nan"], "--timeout must be a positive number", "earthquakes refresh"),
            (["refresh", "--feed", ""], "--feed is empty", "earthquakes refresh"),
            (["list", "--min-magnitude", "nan"], "--min-magnitude must be a number", "earthquakes list"),
            // A probe (7 December 2026): hexadecimal was read (0x10 as 16); an empty --exec accepted.
            (["list", "--min-magnitude", "0x10"], "is not a magnitude", "earthquakes list"),
            (["watch", "--min-magnitude", "-0x1p3"], "is not a magnitude", "earthquakes watch"),
            (["watch", "--once", "--exec", " "], "--exec is empty", "earthquakes watch"),
            (["list", "--since", "99999999999999999999d"], "reaches too far back", "earthquakes list"),
            (
                ["prune", "--before", "9999999999w"], "--before \"9999999999w\" reaches too far back",
                "earthquakes prune"
            ),
            (["show"], "Missing expected argument", "earthquakes show"),
            (["frobnicate"], "Unexpected argument", "earthquakes"),
        ])
    func usageErrorsExit64WithTheSubcommandsUsage(arguments: [String], message: String, usage: String) async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let run = try await Binary.run(arguments + ["--database", scratch.path("q.sqlite")])
        #expect(run.status == 64)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.hasPrefix("Error: "))
        #expect(run.stderr.contains(message))
        #expect(run.stderr.contains("Usage: \(usage)"))
        #expect(!FileManager.default.fileExists(atPath: scratch.path("q.sqlite")))  // nothing was created
    }

    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func versionIsPrinted() async throws {
        let run = try await Binary.run(["--version"])
        #expect(run.status == 0)
        #expect(run.stdout == "\(EarthquakesCLI.version)\n")
    }

    /// Issue 10, defect 3, as typed: a time of day narrows the list.
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func sinceWithATimeOfDayNarrowsTheList() async throws {
        let (scratch, database) = try await Self.filledDatabase()
        defer { scratch.remove() }
        let store = try EarthquakeStore(path: database)
        let times = try store.list(sort: .time).compactMap(\.time)
        let middle = times[times.count / 2]
        let text = CivilTimeText.minuteUTC(middle)  // yyyy-MM-dd HH:mm
        let run = try await Binary.run(["list", "--since", text, "--limit", "100", "--json", "--database", database])
        #expect(run.status == 0, "\(run.stderr)")
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: Any]])
        let cut = floor(middle.timeIntervalSince1970 / 60) * 60
        #expect(rows.count == times.filter { $0.timeIntervalSince1970 >= cut }.count)
        #expect(rows.count < times.count)
    }
}

/// A UTC minute written the way people type it, for the tests.
enum CivilTimeText {
    static func minuteUTC(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        return String(format: "%04d-%02d-%02d %02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!)
    }
}
