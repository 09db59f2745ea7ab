import EarthquakesCLI
import EarthquakesKit
import Foundation
import Testing

@Suite struct QueryOptionsTests {
    private let now = Date(timeIntervalSince1970: 1_735_689_600)  // 2025-01-01T00:00:00Z

    @Test(arguments: [("30m", 1800.0), ("24h", 86_400), ("7d", 604_800), ("2w", 1_209_600), ("1.5h", 5400)])
    func relativeAges(text: String, seconds: Double) throws {
        #expect(try SinceParser.parse(text, now: now) == now.addingTimeInterval(-seconds))
    }

    @Test func isoDatesAndTimes() throws {
        #expect(try SinceParser.parse("2024-12-31", now: now) == now.addingTimeInterval(-86_400))
        #expect(try SinceParser.parse("2024-12-31T12:00:00Z", now: now) == now.addingTimeInterval(-43_200))
        #expect(try SinceParser.parse("2024-12-31T12:00:00.500Z", now: now) == now.addingTimeInterval(-43_199.5))
    }

    /// Issue 10, defect 3: the time of day was dropped ("2018-06-14T09:00" read as midnight).
    @Test(arguments: [
        ("2018-06-14T09:00", 1_528_966_800.0),
        ("2018-06-14 09:00", 1_528_966_800),
        ("2018-06-14t09:00", 1_528_966_800),
        ("2018-06-14T09:00:30", 1_528_966_830),
        ("2018-06-14 09:00:30Z", 1_528_966_830),
        ("2018-06-14T09:00:30.25", 1_528_966_830.25),
        ("2018-06-14T11:00+02:00", 1_528_966_800),
        ("2018-06-14T11:00+0200", 1_528_966_800),
        ("2018-06-14T02:00-07", 1_528_966_800),
        ("2018-06-14", 1_528_934_400),
        ("2016-02-29", 1_456_704_000),
        ("1969-12-31T23:59:59Z", -1),
    ])
    func datesWithTimesAndZonesKeepTheTime(text: String, seconds: Double) throws {
        #expect(try SinceParser.parse(text, now: now) == Date(timeIntervalSince1970: seconds))
    }

    @Test(arguments: [
        "7x", "", "yesterday", "-3d", "2024-13-45", "2018-06-14garbage", "2018-06-14T9:00", "2018-06-14T09",
        "2018-06-14T25:00", "2018-06-14T09:00+2", "2018-02-30", "2017-02-29", "2018-06-14T09:00:61", "18-06-14",
        "2018/06/14", "d", "1e3h", " 2018-06-14T09:00 junk",
    ])
    func badSinceValuesShowExamples(text: String) {
        let error = #expect(throws: CLIError.self) { try SinceParser.parse(text, now: now) }
        #expect(error?.message.hasPrefix("--since \"\(text)\" is not") == true)
        #expect(error?.message.contains("for example 2018-06-14, 2018-06-14T09:00") == true)
        #expect(error?.isUsage == true)
    }

    @Test func coordinates() throws {
        #expect(try Coordinate(parsing: "35.68,139.69") == Coordinate(latitude: 35.68, longitude: 139.69))
        #expect(try Coordinate(parsing: " -33.4 , -70.6 ") == Coordinate(latitude: -33.4, longitude: -70.6))
        #expect(try Coordinate(parsing: "-33.9,151.2") == Coordinate(latitude: -33.9, longitude: 151.2))
        let from = #expect(throws: CLIError.self) { try Coordinate(parsing: "x,1", option: "--from") }
        #expect(from?.message.hasPrefix("--from expects LAT,LON") == true)
        #expect(from?.isUsage == true)
        #expect(throws: CLIError.self) { try Coordinate(parsing: "1,2,3") }
        #expect(throws: CLIError.self) { try Coordinate(parsing: "nan,2") }
        // Decimal degrees only (`0x10` was read as 16).
        for text in ["0x10,0", "1e1,0", "0,--5", "0,1.5.2", "+,1"] {
            #expect(throws: CLIError.self, "\(text)") { try Coordinate(parsing: text) }
        }
        #expect(try Coordinate(parsing: "+35,-139.5") == Coordinate(latitude: 35, longitude: -139.5))
        let format = #expect(throws: CLIError.self) { try Coordinate(parsing: "35.68") }
        #expect(format?.message.contains("LAT,LON") == true)
        let range = #expect(throws: CLIError.self) { try Coordinate(parsing: "95,10") }
        #expect(range?.message.contains("-90...90") == true)
    }

    @Test func databaseLocationOrder() {
        let env = [
            "HOME": "/home/ada", "XDG_DATA_HOME": "/data", DatabaseLocation.environmentVariable: "/env/q.sqlite",
        ]
        #expect(DatabaseLocation.path(option: "/opt/q.sqlite", environment: env) == "/opt/q.sqlite")
        #expect(DatabaseLocation.path(option: "~/q.sqlite", environment: env) == "/home/ada/q.sqlite")
        #expect(DatabaseLocation.path(option: nil, environment: env) == "/env/q.sqlite")
        #expect(
            DatabaseLocation.path(option: nil, environment: ["HOME": "/home/ada", "XDG_DATA_HOME": "/data"])
                == "/data/baton-earthquakes/earthquakes.sqlite")
        #expect(
            DatabaseLocation.path(option: nil, environment: ["HOME": "/home/ada"])
                == "/home/ada/.local/share/baton-earthquakes/earthquakes.sqlite")
        // A relative XDG_DATA_HOME is invalid by the specification and ignored.
        #expect(
            DatabaseLocation.path(option: nil, environment: ["HOME": "/home/ada", "XDG_DATA_HOME": "rel"])
                == "/home/ada/.local/share/baton-earthquakes/earthquakes.sqlite")
    }
}

/// The review: `prune --before 6m` meant 6 minutes and deleted nearly everything without a word.
@Suite struct AgeUnitTests {
    private let now = Date(timeIntervalSince1970: 1_735_689_600)  // 2025-01-01T00:00:00Z

    static let ages: [(String, Double)] = [
        ("30min", 1800), ("30m", 1800), ("6mo", 15_552_000), ("1y", 31_536_000), ("1.5y", 47_304_000),
    ]

    @Test(arguments: ages)
    func minutesMonthsAndYearsHaveUnitsOfTheirOwn(text: String, seconds: Double) throws {
        #expect(try SinceParser.parse(text, now: now) == now.addingTimeInterval(-seconds))
    }

    @Test func aBareMForPruneIsRefusedAsAmbiguous() throws {
        let error = #expect(throws: CLIError.self) {
            try SinceParser.parse("6m", now: now, option: "--before", bareMinutes: false)
        }
        #expect(error?.isUsage == true)
        let expected =
            "--before \"6m\" is ambiguous: m could be minutes or months; say 6min for minutes or 6mo for months"
        #expect(error?.message == expected)
        let minutes = try SinceParser.parse("6min", now: now, option: "--before", bareMinutes: false)
        #expect(minutes == now.addingTimeInterval(-360))
        let months = try SinceParser.parse("6mo", now: now, option: "--before", bareMinutes: false)
        #expect(months == now.addingTimeInterval(-15_552_000))
    }

    @Test(.enabled(if: EarthquakesBinaryTests.executable != nil, "the earthquakes executable is not built; skipping"))
    func pruneBeforeSixMDeletesNothingAndSaysWhy() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore.withSample(at: database).close()
        let result = try await EarthquakesBinaryTests.run(["prune", "--before", "6m", "--database", database])
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("say 6min for minutes or 6mo for months"), "\(result.stderr)")
        #expect(try EarthquakeStore(path: database).count() == 40)
    }
}
