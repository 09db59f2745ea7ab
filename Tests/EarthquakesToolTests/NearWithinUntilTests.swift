import EarthquakesKit
import Foundation
import Testing

/// Issue 31, what daily users miss: `list --near LAT,LON|home|PLACE --within 300km`, sorted by time or
/// distance, and `--until` beside `--since`. Run with the built executable.
@Suite(.timeLimit(.binarySuite), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct NearWithinUntilTests {
    typealias Binary = EarthquakesBinaryTests

    static func quake(_ id: String, _ latitude: Double, _ longitude: Double, day: Int, hour: Int = 12) -> Earthquake {
        // 2019-07-01T00:00:00Z plus days and hours.
        let time = Date(timeIntervalSince1970: 1_561_939_200 + Double((day - 1) * 86_400 + hour * 3600))
        return Earthquake(
            id: id, latitude: latitude, longitude: longitude, depth: 10, magnitude: 4, place: id, time: time,
            type: "earthquake")
    }

    /// Tokyo; Sendai (about 306 km from Tokyo), Osaka (about 397 km), Sydney (about 7,800 km).
    static let quakes = [
        quake("tokyo", 35.68, 139.69, day: 3), quake("sendai", 38.27, 140.87, day: 5),
        quake("osaka", 34.69, 135.50, day: 6), quake("sydney", -33.87, 151.21, day: 7),
        quake("tokyo2", 35.70, 139.70, day: 4, hour: 0), quake("tokyo3", 35.66, 139.68, day: 6, hour: 23),
    ]

    struct Setup {
        let scratch: Scratch
        let database: String
        let environment: [String: String]

        init() throws {
            scratch = try Scratch()
            database = scratch.path("q.sqlite")
            environment = ["XDG_CONFIG_HOME": scratch.path("config")]
            try EarthquakeStore(path: database).importFeed(NearWithinUntilTests.quakes)
        }

        func ids(_ arguments: [String]) async throws -> [String] {
            let run = try await Binary.run(
                ["list", "--csv", "--database", database] + arguments, environment: environment)
            #expect(run.status == 0, "\(arguments): \(run.stderr)")
            return run.stdout.split(separator: "\n").dropFirst().map { String($0.prefix { $0 != "," }) }
        }
    }

    @Test func withinARadiusOfAPointHomeOrASavedPlace() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        let nearest = ["tokyo", "tokyo2", "tokyo3", "sendai"]
        #expect(try await setup.ids(["--near", "35.68,139.69", "--within", "350km"]) == nearest)
        #expect(try await setup.ids(["--near", "35.68,139.69", "--within", "217mi"]) == nearest)
        #expect(
            try await setup.ids(["--near", "35.68,139.69", "--within", "350 km", "--sort", "time"])
                == ["tokyo3", "sendai", "tokyo2", "tokyo"])
        #expect(
            try await setup.ids(["--near", "35.68,139.69", "--within", "500km", "--limit", "2", "--sort", "time"])
                == ["tokyo3", "osaka"])

        let saved = try await Binary.run(["place", "tokyo", "35.68,139.69"], environment: setup.environment)
        #expect(saved.status == 0, "\(saved.stderr)")
        #expect(try await setup.ids(["--near", "Tokyo", "--within", "350km"]) == nearest)
        let home = try await Binary.run(["home", "38.27,140.87"], environment: setup.environment)
        #expect(home.status == 0, "\(home.stderr)")
        #expect(try await setup.ids(["--near", "home", "--within", "10km"]) == ["sendai"])
        let places = try await Binary.run(["place"], environment: setup.environment)
        #expect(places.stdout == "home  38.2700,140.8700\ntokyo  35.6800,139.6900\n")

        // The distance is in every form.
        let json = try await Binary.run(
            ["list", "--json", "--near", "tokyo", "--within", "1km", "--database", setup.database],
            environment: setup.environment)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(rows.map { $0["id"] as? String } == ["tokyo"])
        #expect(rows.first?["distanceKm"] as? Double == 0)
    }

    @Test func mistakesAreUsageErrors() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        _ = try await Binary.run(["place", "tokyo", "35.68,139.69"], environment: setup.environment)
        for (arguments, message) in [
            (
                ["--near", "tokio", "--within", "300km"],
                "--near \"tokio\" is not LAT,LON, home or a saved place (saved places: tokyo)"
            ),
            (["--within", "300km"], "--within needs --near"),
            (["--near", "tokyo", "--within", "far"], "--within \"far\" is not a distance"),
            (["--near", "home"], "--near home: no home location is set"),
            (["--sort", "distance"], "--sort distance needs --near"),
            (["--since", "2019-07-06", "--until", "2019-07-04"], "--since is not before --until"),
        ] {
            let run = try await Binary.run(
                ["list", "--database", setup.database] + arguments, environment: setup.environment)
            #expect(run.status == 64, "\(arguments): \(run.stderr)")
            #expect(run.stderr.hasPrefix("Error: " + message), "\(arguments): \(run.stderr)")
        }
    }

    /// A damaged places file is not the command line's fault: `list --near tokyo` said "Error: …" with
    /// the usage under it and exit status 64, as for a mistyped option. It is a failure (status 1) naming
    /// the file and what to do, for `list`, `watch` and `show` alike.
    @Test func aDamagedPlacesFileIsAFailureNotAUsageError() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        _ = try await Binary.run(["place", "tokyo", "35.68,139.69"], environment: setup.environment)
        let places = setup.scratch.path("config/baton-earthquakes/places")
        #expect(FileManager.default.fileExists(atPath: places))
        try Data("tokyo\t35.68,139.69\nnot a place\n".utf8).write(to: URL(fileURLWithPath: places))
        for arguments in [
            ["list", "--near", "tokyo", "--within", "300km"], ["show", "tokyo", "--from", "tokyo"],
            ["watch", "--once", "--near", "tokyo", "--within", "300km"],
        ] {
            let run = try await Binary.run(arguments + ["--database", setup.database], environment: setup.environment)
            #expect(run.status == 1, "\(arguments): \(run.stderr)")
            #expect(
                run.stderr.hasPrefix(
                    "earthquakes: the saved places in \(places) hold a line that is not NAME<tab>LAT,LON"),
                "\(arguments): \(run.stderr)")
            #expect(!run.stderr.contains("Usage:"), "\(arguments): \(run.stderr)")
        }
    }

    /// `--until` with a date alone keeps that whole day: 4 to 6 July is three days.
    @Test func aClosedTimeWindow() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        #expect(
            try await setup.ids(["--since", "2019-07-04", "--until", "2019-07-06"])
                == ["tokyo3", "osaka", "sendai", "tokyo2"])
        #expect(
            try await setup.ids(["--since", "2019-07-04", "--until", "2019-07-06T12:00"]) == [
                "osaka", "sendai", "tokyo2",
            ])
        #expect(try await setup.ids(["--until", "2019-07-03T12:00"]) == ["tokyo"])
    }
}

/// A hostile-feed probe (7 December 2026): `list --near P --within 300km` stopped at 20 rows although
/// its help says "every earthquake within this distance", and a plain `list` cut at its limit did not
/// say so.
@Suite(.timeLimit(.binarySuite), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct ListLimitNoteTests {
    @Test func withinListsEveryMatchAndACutListSaysWhatItLeftOut() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        // 30 events near Tokyo.
        try EarthquakeStore(path: database).importFeed(
            (0..<30).map { NearWithinUntilTests.quake("t\($0)", 35.68 + Double($0) / 1000, 139.69, day: 1 + $0 % 20) })
        let within = try await EarthquakesBinaryTests.run(
            ["list", "--csv", "--database", database, "--near", "35.68,139.69", "--within", "300km"])
        #expect(within.status == 0, "\(within.stderr)")
        #expect(within.stdout.split(separator: "\n").count == 31, "a header and 30 rows: \(within.stdout)")
        #expect(!within.stderr.contains("not shown"), "\(within.stderr)")
        let limited = try await EarthquakesBinaryTests.run(
            ["list", "--csv", "--database", database, "--near", "35.68,139.69", "--within", "300km", "--limit", "5"])
        #expect(limited.stdout.split(separator: "\n").count == 6)
        #expect(limited.stderr.contains("25 more matching events are not shown (--limit 5)"), "\(limited.stderr)")
        let plain = try await EarthquakesBinaryTests.run(["list", "--database", database])
        #expect(plain.status == 0)
        #expect(plain.stderr.contains("10 more matching events are not shown (--limit 20); --all lists every match"))
        let all = try await EarthquakesBinaryTests.run(["list", "--all", "--database", database])
        #expect(!all.stderr.contains("not shown"), "\(all.stderr)")
        // An empty type name filtered nothing and listed every event.
        for option in ["--type", "--exclude-type"] {
            let empty = try await EarthquakesBinaryTests.run(["list", "--database", database, option, ""])
            #expect(empty.status == 64, "\(empty.stdout)")
            #expect(empty.stderr.contains("\(option) needs a type name"), "\(empty.stderr)")
        }
        // A negative distance is named as one, not called missing.
        let negative = try await EarthquakesBinaryTests.run(
            ["list", "--database", database, "--near", "35.68,139.69", "--within", "-5km"])
        #expect(negative.status == 64)
        #expect(negative.stderr.contains("\"-5km\" is not a distance"), "\(negative.stderr)")
        // `--near` alone asks for the nearest few: no note.
        let nearest = try await EarthquakesBinaryTests.run(["list", "--database", database, "--near", "35.68,139.69"])
        #expect(!nearest.stderr.contains("not shown"), "\(nearest.stderr)")
    }
}
