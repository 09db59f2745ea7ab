import BatonDurable
import BatonTesting
import EarthquakesKit
import EarthquakesTestData
import Foundation
import Logging
import Testing

@testable import EarthquakesCLI

/// Problems a probe of the tool in daily use (several processes, busy databases, saved places) found,
/// each fixed; one test or more per problem.
@Suite struct DailyUseProbeTests {
    static func feed(_ count: Int) -> Data { SyntheticFeed.data(count) }

    static let context = DurableJobContext(
        job: DurableJobID(1), run: DurableRunID(1), name: "parse", attempt: 1, maxAttempts: 1, worker: "test",
        logger: Logger(label: "test"))

    /// Ctrl-C during a `watch` or a refresh of several feeds that parsed a big feed waited for the whole
    /// parse (10 s, then the worker gave up on it): the parse step of a refresh did not ask to stop.
    @Test("the parse step of a refresh stops when its attempt is cancelled")
    func parseStepStops() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("big.geojson")
        try Self.feed(5_000).write(to: URL(fileURLWithPath: path))
        let input = FetchFeed.Output(feed: path, file: path)
        // Not cancelled: the whole feed.
        let output = try await ParseFeed(strict: false).run(input, context: Self.context)
        #expect(output.events == 5_000)
        // Cancelled before it starts: stopped at the parse's first question.
        let attempt = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await ParseFeed(strict: false).run(input, context: Self.context)
        }
        await #expect(throws: CancellationError.self) { _ = try await attempt.value }
    }

    /// `home 0.00001,-0.00005` saved "1e-05,-5e-05", which every later command refused to read (and a
    /// place so saved blocked every place command, `--forget` included).
    @Test(
        "a saved location reads back as it was given",
        arguments: [
            (0.00001, -0.00005), (89.9999999999, -180), (0.1 + 0.2, 151.21), (-33.87, 1e-10), (-0.0, 0),
        ])
    func savedLocationsReadBack(latitude: Double, longitude: Double) throws {
        let coordinate = Coordinate(latitude: latitude, longitude: longitude)
        let text = coordinate.storedText
        #expect(!text.contains("e"), "\(text)")
        let read = try Coordinate(parsing: text)
        #expect(abs(read.latitude - latitude) < 1e-9 && abs(read.longitude - longitude) < 1e-9, "\(text)")
    }

    @Test(.enabled(if: EarthquakesBinaryTests.executable != nil, "the earthquakes executable is not built; skipping"))
    func aTinySavedPlaceDoesNotBlockThePlaceCommands() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let environment = ["XDG_CONFIG_HOME": scratch.path("config")]
        let saved = try await EarthquakesBinaryTests.run(["place", "gulf", "0.00001,0.5"], environment: environment)
        #expect(saved.status == 0, "\(saved.stderr)")
        let home = try await EarthquakesBinaryTests.run(["home", "0.00001,-0.00005"], environment: environment)
        #expect(home.status == 0, "\(home.stderr)")
        #expect(home.stdout.hasPrefix("Home is 0.0000,0.0000 "), "\(home.stdout)")
        let shown = try await EarthquakesBinaryTests.run(["home"], environment: environment)
        #expect(shown.status == 0, "\(shown.stderr)")
        let listed = try await EarthquakesBinaryTests.run(["place"], environment: environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("gulf"), "\(listed.stdout)")
        let forgot = try await EarthquakesBinaryTests.run(["place", "gulf", "--forget"], environment: environment)
        #expect(forgot.status == 0, "\(forgot.stderr)")
    }

    /// Twelve `place` commands at once kept 3 places, each saying it saved its own.
    @Test("places saved at once are all kept, and a forget at the same time keeps the others' saves")
    func placesSavedAtOnce() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let environment = ["XDG_CONFIG_HOME": scratch.path("config")]
        try Places.save("keep", at: Coordinate(latitude: 1, longitude: 1), environment: environment)
        let failures = Recorder<String>()
        DispatchQueue.concurrentPerform(iterations: 41) { index in
            do throws(CLIError) {
                if index == 40 {
                    _ = try Places.forget("keep", environment: environment)
                } else {
                    try Places.save(
                        "p\(index)", at: Coordinate(latitude: Double(index), longitude: 2), environment: environment)
                }
            } catch {
                failures.record("\(error)")
            }
        }
        #expect(failures.values.isEmpty, "\(failures.values)")
        let names = Set(try Places.all(environment: environment).map(\.name))
        #expect(names == Set((0..<40).map { "p\($0)" }), "\(names.sorted())")
    }

    /// `list --database /dev/null` said "No earthquakes stored in /dev/null yet", and a refresh into it
    /// failed with a disk I/O error that asked whether /dev is writable.
    @Test(
        "a device or a file of /proc is refused as a database, and left alone",
        arguments: [
            "/dev/null", "/dev/zero", "/proc/self/status",
        ])
    func specialFilesAreNotDatabases(path: String) throws {
        for mode in [EarthquakeStore.OpenMode.readOnly, .mustExist, .createIfMissing] {
            let error = #expect(throws: StoreError.self) { _ = try EarthquakeStore(path: path, mode: mode) }
            #expect(error?.code == .open, "\(String(describing: error))")
            #expect(error?.description.contains("not a database file") == true, "\(String(describing: error))")
        }
    }

    /// `earthquakes home -- -33.87,151.21` (the usual end of options) failed: "Unknown option '--'".
    @Test(.enabled(if: EarthquakesBinaryTests.executable != nil, "the earthquakes executable is not built; skipping"))
    func theEndOfOptionsIsTakenBeforeALocation() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let environment = ["XDG_CONFIG_HOME": scratch.path("config")]
        let home = try await EarthquakesBinaryTests.run(["home", "--", "-33.87,151.21"], environment: environment)
        #expect(home.status == 0, "\(home.stderr)")
        #expect(home.stdout.hasPrefix("Home is -33.8700,151.2100 "), "\(home.stdout)")
        let place = try await EarthquakesBinaryTests.run(
            ["place", "syd", "--", "-33.9,151.2"], environment: environment)
        #expect(place.status == 0, "\(place.stderr)")
        let listed = try await EarthquakesBinaryTests.run(["place"], environment: environment)
        #expect(listed.stdout.contains("syd  -33.9000,151.2000"), "\(listed.stdout)")
    }

    /// `TZ="NZST-12NZDT,M9.5.0,M4.1.0/3" earthquakes show ID` printed no local time (Foundation does not
    /// read a POSIX rule with daylight saving time); the C library does.
    @Test(.enabled(if: EarthquakesBinaryTests.executable != nil, "the earthquakes executable is not built; skipping"))
    func aPosixRuleWithDaylightSavingGivesTheLocalTime() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).importFeed(try FeedParser().parse(Self.feed(1)))
        let show = try await EarthquakesBinaryTests.run(
            ["show", "ev0", "--database", database], environment: ["TZ": "NZST-12NZDT,M9.5.0,M4.1.0/3"])
        #expect(show.status == 0, "\(show.stderr)")
        // 2023-11-14 22:13:20 UTC is in New Zealand's summer: UTC+13.
        #expect(show.stdout.contains("2023-11-15 11:13 local, UTC+13:00"), "\(show.stdout)")
    }
}
