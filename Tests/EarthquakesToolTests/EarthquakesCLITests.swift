import EarthquakesCLI
import EarthquakesKit
import Foundation
import TestHTTPServer
import Testing

/// The commands of the `earthquakes` tool, run in-process.
@Suite(.timeLimit(.minutes(1))) struct EarthquakesCLITests {
    /// A database filled with the sample feed (40 events), and a CLI writing to a recorded console.
    private func sampleDatabase() async throws -> (Scratch, String) {
        let scratch = try Scratch()
        let path = scratch.path("quakes.sqlite")
        try EarthquakeStore.withSample(at: path)
        return (scratch, path)
    }

    /// Issue 10, defect 4: the sample never goes into the user's database; issue 31, defect 9: it is made
    /// in memory, so no file is created for it (one was, and made again after `--remove-sample`).
    @Test func withoutArgumentsAnEmptyDatabaseShowsTheSampleFromMemoryAndCreatesNothing() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("nested/folder/quakes.sqlite")
        let captured = CapturedConsole()
        try await EarthquakesCLI.forTests(captured).sample(database: path)

        let lines = captured.lines
        #expect(lines[0].hasPrefix("SAMPLE DATA"))
        #expect(lines[1].contains("made in memory") && lines[1].contains(path), "\(lines[1])")
        #expect(
            lines.contains { $0.hasPrefix("TIME (UTC)") && $0.contains("MAG") && $0.hasSuffix("ID            DETAILS") }
        )
        #expect(lines.contains { $0.contains("[SAMPLE]") && $0.contains("  sample0001    sig ") })
        #expect(captured.stdout.contains("`earthquakes list --sample` lists it again"))
        #expect(captured.stderr.isEmpty)
        #expect(scratch.contents.isEmpty, "nothing is created: \(scratch.contents)")

        let listed = CapturedConsole()
        try EarthquakesCLI.forTests(listed).list(ListOptions(limit: 100), database: path, json: true, sample: true)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
        #expect(rows.count == 40)

        let removed = CapturedConsole()
        try EarthquakesCLI.forTests(removed).removeSample(database: path)
        let samplePath = scratch.path("nested/folder/\(DatabaseLocation.sampleFileName)")
        #expect(removed.stdout == "There is no sample database at \(samplePath).\n")
    }

    /// The probe: a database named earthquakes-sample.sqlite was its own sample database — the default
    /// command mixed sample events into it and `--remove-sample` deleted it.
    @Test func aDatabaseWithTheSampleDatabasesNameIsNeverTreatedAsItsSample() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path(DatabaseLocation.sampleFileName)
        let store = try EarthquakeStore(path: path)
        try store.importFeed([Earthquake(id: "real1", latitude: 1, longitude: 2, depth: 3, magnitude: 4)])
        try store.close()
        let shown = CapturedConsole()
        let cli = EarthquakesCLI.forTests(shown)
        try await cli.sample(database: path)  // the user's own events: no sample at all
        #expect(shown.stdout.hasPrefix("The newest 1 of 1 event in \(path)."), "\(shown.stdout)")
        let removed = #expect(throws: CLIError.self) { try cli.removeSample(database: path) }
        #expect(removed?.message.contains("--database") == true)
        try cli.list(ListOptions(limit: 5), database: path, json: true, sample: true)  // the sample, in memory
        #expect(try EarthquakeStore(path: path).count() == 1)
    }

    /// A process that exits before its database is closed leaves SQLite's log beside the file; a copy
    /// of the file alone then lacks the log's rows. Every command closes what it opened.
    @Test func everyCommandClosesItsDatabase() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("quakes.sqlite")
        let feed = scratch.path("feed.geojson")
        try SampleFeed.geoJSON(count: 30).write(to: URL(fileURLWithPath: feed))
        let cli = EarthquakesCLI.forTests(CapturedConsole())
        try await cli.refresh(feed: feed, database: path, json: false)
        #expect(SQLiteSideFiles.left(beside: path).isEmpty, "after refresh: \(SQLiteSideFiles.left(beside: path))")
        let copy = scratch.path("copy.sqlite")
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        #expect(try EarthquakeStore(path: copy, mode: .readOnly).count() == 30)  // the file alone has every row

        let id = try #require(try EarthquakeStore(path: path, mode: .readOnly).list(limit: 1).first?.id)
        let commands: [(String, () async throws -> Void)] = [
            ("list", { try cli.list(ListOptions(limit: 5), database: path, json: true) }),
            ("show", { try cli.show(id: id, database: path, json: true) }),
            ("status", { try await cli.status(database: path) }),
            ("prune", { try cli.prune(before: Date(timeIntervalSince1970: 0), database: path) }),
        ]
        for (name, command) in commands {
            try await command()
            #expect(SQLiteSideFiles.left(beside: path).isEmpty, "after \(name): \(SQLiteSideFiles.left(beside: path))")
        }
    }

    @Test func listFiltersByMagnitudeAndLimit() async throws {
        let (scratch, path) = try await sampleDatabase()
        defer { scratch.remove() }
        let captured = CapturedConsole()
        try EarthquakesCLI.forTests(captured).list(
            ListOptions(minMagnitude: 4, limit: 3, sort: .magnitude), database: path, json: true)

        let rows = try #require(try JSONSerialization.jsonObject(with: Data(captured.stdout.utf8)) as? [[String: Any]])
        let magnitudes = rows.compactMap { $0["magnitude"] as? Double }
        let all = try EarthquakeStore(path: path).list(minMagnitude: 4, sort: .magnitude)
        #expect(rows.count == 3)
        #expect(magnitudes == all.prefix(3).compactMap(\.magnitude))
        #expect(magnitudes.allSatisfy { $0 >= 4 })
        #expect(magnitudes == magnitudes.sorted(by: >))
    }

    @Test func listSinceARelativeAgeUsesTheClock() async throws {
        let (scratch, path) = try await sampleDatabase()
        defer { scratch.remove() }
        let captured = CapturedConsole()
        let cli = EarthquakesCLI.forTests(captured, now: SampleFeed.referenceDate)
        let since = try SinceParser.parse("24h", now: cli.now())
        try cli.list(ListOptions(since: since, limit: 100), database: path, json: true)

        let rows = try #require(try JSONSerialization.jsonObject(with: Data(captured.stdout.utf8)) as? [[String: Any]])
        let expected = try EarthquakeStore(path: path).list(since: SampleFeed.referenceDate.addingTimeInterval(-86_400))
        #expect(rows.count == expected.count)
        #expect(rows.count > 0 && rows.count < 40)
        #expect(rows.compactMap { $0["id"] as? String } == expected.map(\.id))
    }

    @Test func listNearSortsByDistanceAndShowsKilometres() async throws {
        let (scratch, path) = try await sampleDatabase()
        defer { scratch.remove() }
        let tokyo = Coordinate(latitude: 35.68, longitude: 139.69)
        let json = CapturedConsole()
        let cli = EarthquakesCLI.forTests(json)
        try cli.list(ListOptions(limit: 5, near: tokyo), database: path, json: true, explicitSort: false)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        let distances = rows.compactMap { $0["distanceKm"] as? Double }
        #expect(distances.count == 5)
        #expect(distances == distances.sorted())
        #expect(
            rows.first?["place"] as? String
                == (try EarthquakeStore(path: path).near(latitude: 35.68, longitude: 139.69, limit: 1)).first?
                .earthquake.place)

        let text = CapturedConsole()
        try EarthquakesCLI.forTests(text).list(
            ListOptions(limit: 5, near: tokyo), database: path, json: false, explicitSort: false)
        #expect(text.lines[0].contains("DIST km"))
        #expect(text.lines.filter { !$0.isEmpty }.count == 6)  // header and five rows
        #expect(text.lines[1].contains("Honshu, Japan"))
    }

    @Test func listOnAnEmptyDatabaseSaysWhatToDo() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("empty.sqlite")
        _ = try EarthquakeStore(path: path)
        let captured = CapturedConsole()
        try EarthquakesCLI.forTests(captured).list(ListOptions(), database: path, json: false)
        #expect(captured.stdout.contains("No earthquakes stored"))
        #expect(captured.stdout.contains("earthquakes refresh"))
    }

    @Test func showPrintsOneEarthquakeAndJSON() async throws {
        let (scratch, path) = try await sampleDatabase()
        defer { scratch.remove() }
        let text = CapturedConsole()
        try EarthquakesCLI.forTests(text).show(id: "sample0001", database: path, json: false)
        #expect(text.lines[0].hasPrefix("id") && text.lines[0].hasSuffix("sample0001"))
        #expect(text.stdout.contains("[SAMPLE]"))

        let json = CapturedConsole()
        try EarthquakesCLI.forTests(json).show(id: "sample0001", database: path, json: true)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["id"] as? String == "sample0001")
        #expect(object["network"] as? String == "sample")
    }

    @Test func showAnUnknownIDIsAClearError() async throws {
        let (scratch, path) = try await sampleDatabase()
        defer { scratch.remove() }
        let error = try #require(throws: CLIError.self) {
            try EarthquakesCLI.forTests(CapturedConsole()).show(id: "nope", database: path, json: false)
        }
        #expect(error.message == "no earthquake with id \"nope\" in \(path); `earthquakes list` shows the ids")
    }

    /// A probe (7 December 2026, night): an id the USGS deleted, or moved the event from, was "no
    /// earthquake with id", as if it had never been imported.
    @Test func showAnIDTheUSGSDeletedSaysSo() async throws {
        let (scratch, path) = try await sampleDatabase()
        defer { scratch.remove() }
        do {
            let store = try EarthquakeStore(path: path)
            var gone = try #require(try store.earthquake(id: "sample0001"))
            gone.status = "deleted"
            gone.updated = (gone.updated ?? Date(timeIntervalSince1970: 0)).addingTimeInterval(60)
            #expect(try store.importFeed([gone]).removed == 1)
            try store.close()
        }
        let error = try #require(throws: CLIError.self) {
            try EarthquakesCLI.forTests(CapturedConsole()).show(id: "sample0001", database: path, json: false)
        }
        #expect(
            error.message
                == "no earthquake with id \"sample0001\" in \(path): the USGS deleted it, or lists the event under another id now (another network's solution was preferred); `earthquakes list` shows the ids"
        )
    }

    @Test func refreshPrintsJSONForScriptsAndNoProgressWhenNotATerminal() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { _ in .ok(SampleFeed.data) }
        let captured = CapturedConsole(isErrorTerminal: false)
        try await EarthquakesCLI.forTests(captured).refresh(
            feed: server.url("/feed").absoluteString, database: scratch.path("q.sqlite"), json: true)
        await server.shutdown()

        let object = try #require(try JSONSerialization.jsonObject(with: Data(captured.stdout.utf8)) as? [String: Any])
        #expect(object["inserted"] as? Int == 40)
        #expect(object["total"] as? Int == 40)
        #expect(object["source"] as? String == server.url("/feed").absoluteString)
        #expect(captured.stderr.isEmpty)
    }

    @Test func refreshShowsProgressOnATerminal() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try await TestHTTPServer.start { _ in .ok(SampleFeed.data) }
        let captured = CapturedConsole(isErrorTerminal: true)
        try await EarthquakesCLI.forTests(captured).refresh(
            feed: server.url("/feed").absoluteString, database: scratch.path("q.sqlite"), json: false)
        await server.shutdown()

        #expect(captured.stderr.contains("Importing 40 earthquakes…"))
        #expect(captured.stderr.hasSuffix("\r\u{1B}[K"))  // the progress line is cleared at the end
        #expect(captured.stdout.hasPrefix("Imported 40 events from \(server.url("/feed").absoluteString)"))
        #expect(captured.stdout.contains("(40 new, 0 updated, 0 unchanged): 39 earthquakes, 1 quarry blast.\n"))
    }

    @Test func aRefreshErrorIsOneLineAndLeavesTheDatabaseAsItWas() async throws {
        let (scratch, path) = try await sampleDatabase()
        defer { scratch.remove() }
        let before = try EarthquakeStore(path: path).snapshot()
        let server = try await TestHTTPServer.start { _ in .status(503) }
        let url = server.url("/feed")
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
                feed: url.absoluteString, database: path, json: false)
        }
        await server.shutdown()

        let message = EarthquakesCLI.message(for: try #require(error))
        #expect(message.hasPrefix("HTTP 503 "))
        #expect(message.contains("from \(url.absoluteString)."))
        #expect(message.hasSuffix("The database was not changed."))
        #expect(!message.contains("\n"))
        #expect(try EarthquakeStore(path: path).snapshot() == before)
    }
}
