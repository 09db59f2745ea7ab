import EarthquakesKit
import Foundation
import Testing

@testable import EarthquakesCLI

/// `show` as the WWDC app's detail view: distance from a point or home, map links, a shareable line,
/// local and relative times beside UTC; and `home`.
@Suite(.timeLimit(.minutes(1))) struct ShowTests {
    static let quake = Earthquake(
        id: "us7000abcd", latitude: -33.9, longitude: 151.2, depth: 10, magnitude: 6.2, magnitudeType: "mww",
        place: "12 km N of Sydney, Australia", time: Date(timeIntervalSince1970: 1_700_000_000), type: "earthquake",
        title: "M 6.2 - 12 km N of Sydney, Australia")

    private func database() throws -> (Scratch, String) {
        let scratch = try Scratch()
        let path = scratch.path("q.sqlite")
        _ = try EarthquakeStore(path: path).importFeed([Self.quake])
        return (scratch, path)
    }

    private func cli(_ captured: CapturedConsole, home: String, timeZone: String = "Australia/Sydney") -> EarthquakesCLI
    {
        var cli = EarthquakesCLI.forTests(captured, now: Date(timeIntervalSince1970: 1_700_000_000 + 3 * 3600 + 60))
        cli.environment = ["HOME": home, "TZ": timeZone]
        return cli
    }

    @Test func timesMapLinksAndDistanceFromAPoint() throws {
        let (scratch, path) = try database()
        defer { scratch.remove() }
        let captured = CapturedConsole()
        try cli(captured, home: scratch.url.path).show(
            id: "us7000abcd", database: path, json: false, from: Coordinate(latitude: -37.81, longitude: 144.96))
        let fields = Dictionary(
            captured.lines.filter { !$0.isEmpty }.map { line in
                (String(line.prefix(12)).trimmingCharacters(in: .whitespaces), String(line.dropFirst(13)))
            }, uniquingKeysWith: { first, _ in first })
        // 1_700_000_000 is 2023-11-14 22:13:20 UTC, 2023-11-15 09:13 in Sydney (UTC+11 in summer).
        #expect(fields["time"] == "2023-11-14 22:13:20 UTC (2023-11-15 09:13 local, UTC+11:00; 3 h ago)")
        #expect(fields["distance"] == "711 km from -37.8100,144.9600")  // haversine by hand: 710.54 km
        #expect(fields["map"] == "https://www.openstreetmap.org/?mlat=-33.9000&mlon=151.2000#map=8/-33.9000/151.2000")
        #expect(fields["geo"] == "geo:-33.9000,151.2000")
    }

    /// POSIX forms of `TZ` (`:Asia/Tokyo`, `JST-9`) were ignored: the local time was dropped.
    @Test func posixTimeZonesAreRead() throws {
        let (scratch, path) = try database()
        defer { scratch.remove() }
        for zone in [":Asia/Tokyo", "JST-9", "<+09>-9", "JST-09:00"] {
            let captured = CapturedConsole()
            try cli(captured, home: scratch.url.path, timeZone: zone).show(
                id: "us7000abcd", database: path, json: false)
            #expect(
                captured.lines.contains(
                    "time         2023-11-14 22:13:20 UTC (2023-11-15 07:13 local, UTC+09:00; 3 h ago)"),
                "\(zone): \(captured.stdout)")
        }
        #expect(EarthquakesCLI.timeZone(posix: "EST5EDT,M3.2.0,M11.1.0") == nil, "a rule with DST: the system's")
        #expect(EarthquakesCLI.timeZone(posix: "XY-9") == nil)
        #expect(EarthquakesCLI.timeZone(posix: "EST5")?.secondsFromGMT() == -18_000)
    }

    @Test func aRememberedHomeIsUsedWithoutFrom() throws {
        let (scratch, path) = try database()
        defer { scratch.remove() }
        let home = scratch.url.path
        let set = CapturedConsole()
        try cli(set, home: home).home(set: Coordinate(latitude: -33.87, longitude: 151.21), clear: false)
        #expect(set.stdout.hasPrefix("Home is -33.8700,151.2100 (saved in \(home)/.config/baton-earthquakes/home)"))

        let shown = CapturedConsole()
        try cli(shown, home: home).show(id: "us7000abcd", database: path, json: false)
        #expect(shown.lines.contains("distance     3 km from home (-33.8700,151.2100)"))

        let json = CapturedConsole()
        try cli(json, home: home).show(id: "us7000abcd", database: path, json: true)
        #expect(json.stdout.contains("\"distanceKm\" : 3.5"))

        let cleared = CapturedConsole()
        try cli(cleared, home: home).home(set: nil, clear: true)
        let after = CapturedConsole()
        try cli(after, home: home).show(id: "us7000abcd", database: path, json: false)
        #expect(!after.stdout.contains("distance"))
    }

    @Test func oneShareableLine() throws {
        let (scratch, path) = try database()
        defer { scratch.remove() }
        let captured = CapturedConsole()
        try cli(captured, home: scratch.url.path).show(id: "us7000abcd", database: path, json: false, share: true)
        #expect(
            captured.stdout
                == "M 6.2 earthquake 12 km N of Sydney, Australia, 2023-11-14 22:13 UTC — https://www.openstreetmap.org/?mlat=-33.9000&mlon=151.2000#map=8/-33.9000/151.2000\n"
        )
    }

    @Test func inUTCOnlyTheRelativeTimeIsAdded() throws {
        let (scratch, path) = try database()
        defer { scratch.remove() }
        let captured = CapturedConsole()
        try cli(captured, home: scratch.url.path, timeZone: "UTC").show(id: "us7000abcd", database: path, json: false)
        #expect(captured.lines.contains("time         2023-11-14 22:13:20 UTC (3 h ago)"))
    }

    @Test func relativeTimes() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        #expect(RelativeTime.ago(now.addingTimeInterval(-30), now: now) == "just now")
        #expect(RelativeTime.ago(now.addingTimeInterval(-125), now: now) == "2 min ago")
        #expect(RelativeTime.ago(now.addingTimeInterval(-3 * 3600), now: now) == "3 h ago")
        #expect(RelativeTime.ago(now.addingTimeInterval(-3 * 86_400), now: now) == "3 d ago")
        #expect(RelativeTime.ago(now.addingTimeInterval(7200), now: now) == "in 2 h")
    }
}
