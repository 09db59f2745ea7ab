import EarthquakesKit
import Foundation
import Testing

/// Issue 31, defect 10: `list --type quary` said "No earthquakes match" (exit 0) instead of naming the
/// types there are; older feeds' `quarry_blast` and `quarry` were not matched by `--type "quarry blast"`.
@Suite(.timeLimit(.binarySuite), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct TypeFilterTests {
    static func quake(_ id: String, _ type: String?, _ seconds: Double) -> Earthquake {
        Earthquake(
            id: id, latitude: 34, longitude: -118, depth: 0, magnitude: 1.5, place: "near a quarry",
            time: Date(timeIntervalSince1970: 1_700_000_000 + seconds), type: type)
    }

    static let quakes = [
        quake("new", "quarry blast", 4), quake("old", "quarry_blast", 3), quake("older", "quarry", 2),
        quake("x", "explosion", 1), quake("e", "earthquake", 0), quake("u", nil, -1),
    ]

    @Test func anUnknownTypeIsRefusedWithTheTypesThereAre() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).importFeed(Self.quakes)

        let typo = try await EarthquakesBinaryTests.run(["list", "--type", "quary", "--database", database])
        #expect(typo.status == 64)
        #expect(typo.stdout.isEmpty)
        #expect(
            typo.stderr.hasPrefix(
                "Error: --type \"quary\": no stored event has this type, and the USGS has no such type; "
                    + "the types stored are: quarry blast (3), "
                    + "earthquake (2), explosion (1)\n"), "\(typo.stderr)")
        let close = try await EarthquakesBinaryTests.run([
            "list", "--exclude-type", "explosoin", "--database", database,
        ])
        #expect(close.status == 64)
        #expect(close.stderr.contains("did you mean \"explosion\"?"), "\(close.stderr)")

        // Every spelling of a quarry blast, old and new, is one type.
        let blasts = try await EarthquakesBinaryTests.run([
            "list", "--type", "quarry blast", "--csv", "--database", database,
        ])
        #expect(blasts.status == 0, "\(blasts.stderr)")
        #expect(
            blasts.stdout.split(separator: "\n").dropFirst().map { $0.prefix { $0 != "," } } == ["new", "old", "older"])
        #expect(blasts.stdout.split(separator: "\n").dropFirst().allSatisfy { $0.contains(",quarry blast,") })
        let underscore = try await EarthquakesBinaryTests.run([
            "list", "--type", "quarry_blast", "--database", database,
        ])
        #expect(underscore.stdout.split(separator: "\n").count == 4)
        let status = try await EarthquakesBinaryTests.run(["status", "--database", database])
        #expect(status.stdout.contains("6 events (3 quarry blasts, 2 earthquakes, 1 explosion)"), "\(status.stdout)")
    }

    /// A real USGS type that no stored event has was refused as a mistake: the documented
    /// `--exclude-type "quarry blast,explosion"` failed on a store without explosions, and a script's
    /// `--type` broke once a prune removed the type's last event.
    @Test func aRealTypeThatNoStoredEventHasMatchesNothing() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).importFeed([
            Self.quake("e", "earthquake", 0), Self.quake("b", "quarry blast", 1),
        ])
        let excluded = try await EarthquakesBinaryTests.run([
            "list", "--exclude-type", "quarry blast,explosion", "--all", "--csv", "--database", database,
        ])
        #expect(excluded.status == 0, "\(excluded.stderr)")
        #expect(excluded.stdout.split(separator: "\n").dropFirst().map { $0.prefix { $0 != "," } } == ["e"])
        let none = try await EarthquakesBinaryTests.run([
            "list", "--type", "ice quake", "--csv", "--database", database,
        ])
        #expect(none.status == 0, "\(none.stderr)")
        #expect(none.stdout.split(separator: "\n").count == 1, "the header alone: \(none.stdout)")
    }

    /// `watch --type nosuch` was accepted: the watch ran, refreshed and alerted on nothing, for ever.
    /// It is refused as `list` refuses it, before anything is saved or started.
    @Test func aWatchRefusesAMistypedTypeAsListDoes() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).importFeed(Self.quakes)
        let feed = scratch.path("none.geojson")
        try Data(#"{"type":"FeatureCollection","features":[]}"#.utf8).write(to: URL(fileURLWithPath: feed))

        let typo = try await EarthquakesBinaryTests.run([
            "watch", "--once", "--type", "quarry blst", "--feed", feed, "--database", database,
        ])
        #expect(typo.status == 64, "\(typo.stderr)")
        #expect(typo.stderr.contains("--type \"quarry blst\": no stored event has this type"), "\(typo.stderr)")
        #expect(typo.stderr.contains("did you mean \"quarry blast\"?"), "\(typo.stderr)")
        #expect(typo.stdout.isEmpty)

        let real = try await EarthquakesBinaryTests.run([
            "watch", "--once", "--exclude-type", "quarry blast,ice quake", "--feed", feed, "--database", database,
        ])
        #expect(real.status == 0, "\(real.stderr)")
    }
}
