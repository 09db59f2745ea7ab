import EarthquakesKit
import Foundation
import Testing

@testable import EarthquakesCLI

/// Issue 10, defects 9 and 10 and the new list options: types, the streamed table and CSV, `--near` in
/// SQL, `--max-magnitude`, colours, data age, prune.
@Suite(.timeLimit(.binarySuite)) struct ListingTests {
    typealias Binary = EarthquakesBinaryTests

    /// Events of several types and magnitudes, some awkward (negative magnitude, no time, commas and
    /// quotes in the place, a long non-ASCII place).
    static let quakes: [Earthquake] = [
        Earthquake(
            id: "q1", latitude: 34.05, longitude: -118.25, depth: 0, magnitude: 1.9, place: "5 km SE of Tehachapi, CA",
            time: Date(timeIntervalSince1970: 1_700_000_000.123), type: "quarry blast"),
        Earthquake(
            id: "e1", latitude: -33.9, longitude: 151.2, depth: 10, magnitude: 6.2,
            place: "12 km N of \"Sydney\", Australia", time: Date(timeIntervalSince1970: 1_700_003_600),
            type: "earthquake"),
        Earthquake(
            id: "e2", latitude: 64.25, longitude: -15.2, depth: 3.5, magnitude: -0.5,
            place: String(repeating: "Höfn ", count: 20), time: Date(timeIntervalSince1970: 1_600_000_000),
            type: "earthquake"),
        Earthquake(
            id: "x1", latitude: 37.1, longitude: -116.0, depth: -0.2, magnitude: 3.1, place: "Nevada Test Site",
            time: Date(timeIntervalSince1970: 1_650_000_000), type: "explosion"),
        Earthquake(id: "n1", latitude: 0, longitude: 0, depth: 1, magnitude: nil, place: nil, time: nil, type: nil),
    ]

    static func database() throws -> (Scratch, String) {
        let scratch = try Scratch()
        let path = scratch.path("q.sqlite")
        _ = try EarthquakeStore(path: path).importFeed(quakes)
        return (scratch, path)
    }

    private func list(
        _ options: ListOptions, _ path: String, console: CapturedConsole = CapturedConsole()
    ) throws
        -> CapturedConsole
    {
        try EarthquakesCLI.forTests(console).list(options, database: path, json: false)
        return console
    }

    @Test func theTableShowsTypesOtherThanEarthquakeAndFormatsEveryField() async throws {
        let (scratch, path) = try Self.database()
        defer { scratch.remove() }
        let lines = try list(ListOptions(limit: nil), path).lines
        #expect(
            lines[0] == "TIME (UTC)          MAG  DEPTH km  PLACE" + String(repeating: " ", count: 45) + "ID"
                + String(repeating: " ", count: 12)
                + "DETAILS")
        #expect(lines[1].hasPrefix("2023-11-14 23:13    6.2      10.0  12 km N of \"Sydney\", Australia"))
        #expect(lines[1].hasSuffix("  e1"))
        #expect(lines[2].hasPrefix("2023-11-14 22:13    1.9       0.0  [quarry blast] 5 km SE of Tehachapi, CA"))
        #expect(lines[3].hasPrefix("2022-04-15 05:20    3.1      -0.2  [explosion] Nevada Test Site"))
        #expect(lines[4].hasPrefix("2020-09-13 12:26   -0.5       3.5  Höfn Höfn"))
        #expect(lines[4].contains("…  e2"))  // clipped to the column, then the id
        #expect(lines[5].hasPrefix("-" + String(repeating: " ", count: 21) + "?       1.0  -  "))
        #expect(lines[5].hasSuffix("n1"))
        // Every id starts in the same column (the place column has a fixed width, counted in characters).
        let idColumns = lines.dropFirst().filter { !$0.isEmpty }.map {
            $0.count - ($0.split(separator: " ").last?.count ?? 0)
        }
        #expect(Set(idColumns).count == 1)
    }

    /// An id longer than the 12 characters the table keeps for it ran into its row's details
    /// ("abcdefghijklmnopsig 50"): at least two spaces now part them.
    @Test func aLongIDIsPartedFromItsDetails() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let quake = Earthquake(
            id: "abcdefghijklmnop", latitude: 1, longitude: 2, depth: 3, magnitude: 4, place: "somewhere",
            time: Date(timeIntervalSince1970: 1_700_000_000), significance: 50)
        _ = try EarthquakeStore(path: path).importFeed([quake])
        let lines = try list(ListOptions(limit: nil), path).lines
        #expect(lines.contains { $0.contains("abcdefghijklmnop  sig 50") }, "\(lines)")
    }

    /// Defect 9: `--type` and `--exclude-type`, in SQL, case-insensitive, repeatable and comma-separated.
    @Test func typeFilters() async throws {
        let (scratch, path) = try Self.database()
        defer { scratch.remove() }
        func ids(_ options: ListOptions) throws -> [String] {
            let store = try EarthquakeStore(path: path)
            return try store.earthquakes(matching: options.filter, order: .time, limit: nil).map(\.earthquake.id)
        }
        #expect(try ids(ListOptions(types: ["Quarry Blast"])) == ["q1"])
        #expect(try ids(ListOptions(types: ListOptions.typeNames(["quarry blast,explosion"]))) == ["q1", "x1"])
        // One rule for types (the probe): an untyped event (n1) is an earthquake, for --type as for
        // --exclude-type, as `status` and `refresh` count it.
        #expect(try ids(ListOptions(excludedTypes: ["earthquake"])) == ["q1", "x1"])
        #expect(try ids(ListOptions(types: ["EARTHQUAKE"])) == ["e1", "e2", "n1"])
        #expect(
            try ids(ListOptions(excludedTypes: ListOptions.typeNames(["quarry blast", " explosion "])))
                == ["e1", "e2", "n1"])
    }

    @Test func magnitudeRange() async throws {
        let (scratch, path) = try Self.database()
        defer { scratch.remove() }
        let store = try EarthquakeStore(path: path)
        let between = try store.earthquakes(
            matching: ListOptions(minMagnitude: -1, maxMagnitude: 3.1).filter, order: .magnitude, limit: nil)
        #expect(between.map(\.earthquake.id) == ["x1", "q1", "e2"])
        #expect(throws: CLIError.self) { try ListOptions(minMagnitude: 5, maxMagnitude: 4).validated() }
        // "nan" and "inf" parse as numbers but match nothing (or everything): a usage error that says so.
        for options in [ListOptions(minMagnitude: .nan), ListOptions(maxMagnitude: .infinity)] {
            let error = try #require(throws: CLIError.self) { try options.validated() }
            #expect(error.isUsage && error.message.contains("must be a number such as 4.5"), "\(error.message)")
        }
    }

    /// A probe (7 December 2026): `watch --type earthquake --exclude-type earthquake` was accepted, and
    /// would never alert.
    @Test func aTypeBothAskedForAndLeftOutIsRefused() async throws {
        let (scratch, path) = try Self.database()
        defer { scratch.remove() }
        let store = try EarthquakeStore(path: path)
        let error = try #require(throws: CLIError.self) {
            try EarthquakesCLI.checkTypes(["quarry blast", "earthquake"], excluded: ["Earthquake"], in: store)
        }
        #expect(error.isUsage && error.message.contains("nothing can match"), "\(error.message)")
        try EarthquakesCLI.checkTypes(["earthquake"], excluded: ["quarry blast"], in: store)
        // An empty store has no types to compare with; the contradiction is refused all the same.
        #expect(throws: CLIError.self) {
            try EarthquakesCLI.checkTypes(["earthquake"], excluded: ["earthquake"], in: try EarthquakeStore.inMemory())
        }
    }

    /// Defect 10: `--near` ranks in SQL and gives the same answer as the reference ranking in Swift.
    @Test(arguments: [(-33.9, 151.2), (35.68, 139.69), (0.0, 0.0), (64.0, -15.0)])
    func nearInSQLMatchesTheReference(latitude: Double, longitude: Double) async throws {
        let (scratch, path) = try Self.database()
        defer { scratch.remove() }
        let store = try EarthquakeStore(path: path)
        let reference = try store.near(latitude: latitude, longitude: longitude, limit: 3)
        let sql = try store.earthquakes(
            matching: EarthquakeFilter(), order: .distance(latitude: latitude, longitude: longitude), limit: 3)
        #expect(sql.map(\.earthquake.id) == reference.map(\.earthquake.id))
        for (row, expected) in zip(sql, reference) {
            #expect(abs((row.distanceKilometers ?? -1) - expected.distanceKilometers) < 1e-6)
        }
        var streamed: [String] = []
        try store.forEachRow(
            matching: EarthquakeFilter(), order: .distance(latitude: latitude, longitude: longitude), limit: 3
        ) { row in streamed.append(String(decoding: row.id, as: UTF8.self)) }
        #expect(streamed == reference.map(\.earthquake.id))
    }

    /// Defect 10: the streamed table's times and numbers agree with Foundation's formatting, for many
    /// moments (leap years, before 1970, the end of a day).
    @Test func streamedTimesMatchFoundation() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        var random = SystemRandomNumberGenerator()
        var quakes: [Earthquake] = []
        for index in 0..<500 {
            let seconds = Double(Int.random(in: -1_000_000_000...3_000_000_000, using: &random)) + Double(index) / 1000
            let depth = Double(Int.random(in: 0..<7000, using: &random)) / 10 - 5
            let magnitude = Double(Int.random(in: 0..<100, using: &random)) / 10 - 1
            quakes.append(
                Earthquake(
                    id: "t\(index)", latitude: 0, longitude: 0, depth: depth, magnitude: magnitude, place: "p",
                    time: Date(timeIntervalSince1970: seconds)))
        }
        _ = try EarthquakeStore(path: path).importFeed(quakes)
        let lines = try list(ListOptions(limit: nil), path).lines.dropFirst().filter { !$0.isEmpty }
        #expect(lines.count == 500)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        var byID: [String: Earthquake] = [:]
        for quake in quakes { byID[quake.id] = quake }
        for line in lines {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            let quake = try #require(byID[String(fields.last!)])
            let time = Date(timeIntervalSince1970: (quake.time!.timeIntervalSince1970 * 1000).rounded() / 1000)
            #expect(line.hasPrefix(formatter.string(from: time)))
            #expect(
                String(fields[2])
                    == String(format: "%.1f", quake.magnitude!).replacingOccurrences(of: "-0.0", with: "0.0"))
            #expect(
                String(fields[3]) == String(format: "%.1f", quake.depth).replacingOccurrences(of: "-0.0", with: "0.0"))
        }
    }

    @Test func csvIsQuotedAndComplete() async throws {
        let (scratch, path) = try Self.database()
        defer { scratch.remove() }
        let lines = try list(ListOptions(limit: nil, csv: true), path).lines
        #expect(lines[0] == "id,time,latitude,longitude,depth_km,magnitude,type,place,felt,cdi,mmi,significance,alert")
        #expect(
            lines[1]
                == "e1,2023-11-14T23:13:20.000Z,-33.9,151.2,10.0,6.2,earthquake,\"12 km N of \"\"Sydney\"\", Australia\",,,,,"
        )
        #expect(
            lines[2]
                == "q1,2023-11-14T22:13:20.123Z,34.05,-118.25,0.0,1.9,quarry blast,\"5 km SE of Tehachapi, CA\",,,,,")
        #expect(lines[5] == "n1,,0.0,0.0,1.0,,earthquake,,,,,,")  // untyped: an earthquake, as filters count it
        #expect(lines.count == 7)  // header, five rows, and the empty string after the last newline

        let near = try list(ListOptions(limit: 1, near: Coordinate(latitude: -33.9, longitude: 151.2), csv: true), path)
        #expect(near.lines[0].hasSuffix(",distance_km"))
        #expect(near.lines[1].hasSuffix(",0.0"))
    }

    /// Magnitude colours only on a terminal, and never with NO_COLOR.
    @Test func coloursOnATerminalUnlessNoColor() async throws {
        let (scratch, path) = try Self.database()
        defer { scratch.remove() }
        let terminal = CapturedConsole(isOutputTerminal: true)
        _ = try list(ListOptions(limit: nil), path, console: terminal)
        #expect(terminal.stdout.contains("\u{1B}[1;31m  6.2\u{1B}[0m"))  // M6+: bold red
        #expect(terminal.stdout.contains("\u{1B}[33m  3.1\u{1B}[0m"))  // M2.5+: yellow
        #expect(terminal.stdout.contains("   1.9  "))  // small: plain

        let noColor = CapturedConsole(isOutputTerminal: true)
        var cli = EarthquakesCLI.forTests(noColor)
        cli.environment["NO_COLOR"] = "1"
        try cli.list(ListOptions(limit: nil), database: path, json: false)
        #expect(!noColor.stdout.contains("\u{1B}["))

        let piped = try list(ListOptions(limit: nil), path)
        #expect(!piped.stdout.contains("\u{1B}["))
    }

    /// Issue 10, defect 10: every row of a large database is printed (the speed itself is measured by
    /// the benchmark, not here), through the executable, with `--all`.
    @Test(.enabled(if: Binary.executable != nil, "the earthquakes executable is not built; skipping"))
    func allRowsAreStreamed() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        var many: [Earthquake] = []
        for index in 0..<5000 {
            let latitude = Double(index % 180) - 89
            let longitude = Double(index % 360) - 179
            let time = Date(timeIntervalSince1970: 1_600_000_000 + Double(index) * 60)
            many.append(
                Earthquake(
                    id: "m\(index)", latitude: latitude, longitude: longitude, depth: 1,
                    magnitude: Double(index % 70) / 10, place: "place \(index)", time: time,
                    type: index % 10 == 0 ? "quarry blast" : "earthquake"))
        }
        _ = try EarthquakeStore(path: path).importFeed(many)
        let all = try await Binary.run(["list", "--all", "--database", path])
        #expect(all.status == 0)
        let lines = all.stdout.split(separator: "\n")
        #expect(lines.count == 5001)
        #expect(lines[1].hasSuffix("m4999"))
        #expect(lines[5000].hasSuffix("m0"))

        let quarries = try await Binary.run(["list", "--all", "--type", "quarry blast", "--csv", "--database", path])
        #expect(quarries.stdout.split(separator: "\n").count == 501)
        let others = try await Binary.run(["list", "--all", "--exclude-type", "quarry blast", "--database", path])
        #expect(others.stdout.split(separator: "\n").count == 4501)
        #expect(!others.stdout.contains("[quarry blast]"))
        let bounded = try await Binary.run([
            "list", "--min-magnitude", "2", "--max-magnitude", "2", "--all", "--database", path,
        ])
        let expected = many.filter { $0.magnitude == 2 }.count
        #expect(bounded.stdout.split(separator: "\n").count == 1 + expected)
    }

    @Test func pruneDeletesOldEvents() async throws {
        let (scratch, path) = try Self.database()
        defer { scratch.remove() }
        let captured = CapturedConsole()
        try EarthquakesCLI.forTests(captured).prune(before: Date(timeIntervalSince1970: 1_650_000_000), database: path)
        #expect(
            captured.stdout
                == "Deleted 1 event before 2022-04-15 05:20 UTC from \(path); 4 left (1 with no time, which prune never deletes).\n"
        )
        #expect(try EarthquakeStore(path: path).snapshot().map(\.id).sorted() == ["e1", "n1", "q1", "x1"])
    }

    /// The data's age, after a refresh: in `status`, below `show`, and after `list` on a terminal.
    @Test func dataAgeIsShown() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        let feed = scratch.path("2.5_day.geojson")
        try SampleFeed.geoJSON(count: 5, seed: 3).write(to: URL(fileURLWithPath: feed))
        let refreshedAt = SampleFeed.referenceDate
        try await EarthquakesCLI.forTests(CapturedConsole(), now: refreshedAt).refresh(
            feed: feed, database: path, json: false)
        let later = refreshedAt.addingTimeInterval(2 * 3600 + 120)

        let status = CapturedConsole()
        try await EarthquakesCLI.forTests(status, now: later).status(database: path)
        #expect(
            status.stdout.contains(
                "Refreshed  2 h ago (2025-01-01 00:00 UTC) from 2.5_day: 5 new, 0 updated, 0 unchanged"))

        let listed = CapturedConsole(isErrorTerminal: true)
        try EarthquakesCLI.forTests(listed, now: later).list(ListOptions(), database: path, json: false)
        #expect(listed.stderr == "Last refreshed 2 h ago from 2.5_day.\n")
    }
}
