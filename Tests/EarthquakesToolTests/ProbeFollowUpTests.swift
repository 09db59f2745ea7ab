import BatonTesting
import EarthquakesKit
import Foundation
import GRDB
import TestHTTPServer
import Testing

@testable import EarthquakesCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What was left after the probe's fixes (``ProbeFixesTests``): one test (or more) per problem.
@Suite(.timeLimit(.minutes(1))) struct ProbeFollowUpTests {
    /// The error `body` throws, as the one line the tool prints.
    private func message(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch {
            return EarthquakesCLI.message(for: error)
        }
    }

    /// Another program's database with a table named `earthquake`: `list` advised importing a feed into
    /// it, and `refresh` then failed with "table earthquake already exists". Every command now says the
    /// database belongs to something else, and none changes it.
    @Test func anotherProgramsEarthquakeTableIsNeverTouched() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("other.sqlite")
        let other = try DatabaseQueue(path: database)
        try await other.write { db in
            try db.execute(
                sql:
                    "CREATE TABLE earthquake (id INTEGER PRIMARY KEY, note TEXT); INSERT INTO earthquake VALUES (1, 'x')"
            )
        }
        try other.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: database))
        let feed = scratch.path("feed.geojson")
        try SampleFeed.geoJSON(count: 3).write(to: URL(fileURLWithPath: feed))
        let second = scratch.path("feed2.geojson")
        try SampleFeed.geoJSON(count: 3, seed: 2).write(to: URL(fileURLWithPath: second))
        let cli = EarthquakesCLI.forTests(CapturedConsole())
        let messages = [
            await message { try cli.list(ListOptions(limit: 5), database: database, json: false) },
            await message { try await cli.refresh(feed: feed, database: database, json: false) },
            await message {
                try await cli.refresh(feeds: [feed, second], resume: false, database: database, json: false)
            },
            await message { try cli.prune(before: Date(), database: database) },
            await message { try await cli.status(database: database) },
        ]
        for message in messages {
            let text = try #require(message)
            #expect(text.contains("belongs to something else"), "\(text)")
            #expect(text.contains("--database"), "\(text)")
            #expect(!text.contains("already exists"), "\(text)")
            #expect(!text.contains("import a feed into it"), "\(text)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == before, "the database was changed")
        #expect(scratch.contents == ["feed.geojson", "feed2.geojson", "other.sqlite"], "\(scratch.contents)")
    }

    /// A first refresh of several feeds that all failed said "The other 0 feeds were imported". The database
    /// it created is kept (another process may have it open), and said to hold no events.
    @Test func aFirstRefreshOfSeveralFeedsThatAllFailSaysWhatIsLeft() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (a, b) = (scratch.path("a.geojson"), scratch.path("b.geojson"))
        try Data("not json".utf8).write(to: URL(fileURLWithPath: a))
        try Data("{\"type\": \"Feature\"}".utf8).write(to: URL(fileURLWithPath: b))
        let database = scratch.path("q.sqlite")
        let cli = EarthquakesCLI.forTests(CapturedConsole())
        let text = try #require(
            await message { try await cli.refresh(feeds: [a, b], resume: false, database: database, json: false) })
        #expect(text.contains("2 of 2 feeds could not be refreshed"), "\(text)")
        #expect(text.contains("Nothing was imported; the new database \(database) holds no events."), "\(text)")
        #expect(!text.contains("The other 0"), "\(text)")
        #expect(!text.contains("not kept"), "\(text)")
        #expect(try EarthquakeStore(path: database).count() == 0)

        // A database that existed is said to be unchanged.
        try EarthquakeStore.withSample(at: scratch.path("other.sqlite")).close()
        let again = try #require(
            await message {
                try await cli.refresh(
                    feeds: [a, b], resume: false, database: scratch.path("other.sqlite"), json: false)
            })
        #expect(again.contains("Nothing was imported; the database was not changed"), "\(again)")
        #expect(try EarthquakeStore(path: scratch.path("other.sqlite")).count() == 40)
    }

    /// A first refresh of several feeds cancelled before any import said "the feeds imported so far are
    /// kept". It deletes nothing, and says the new database holds no events.
    @Test func aCancelledFirstRefreshOfSeveralFeedsSaysNothingWasImported() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let halfSent = Gate()
        let release = Gate()
        let body = SampleFeed.geoJSON(count: 400)
        let server = try await TestHTTPServer.start { _ in
            .partial(body: body, sentBeforeGate: body.count / 2, sent: halfSent, release: release)
        }
        let interrupts = Interrupts()
        let cli = EarthquakesCLI(
            console: CapturedConsole().console, environment: ["HOME": "/nonexistent-home"],
            session: URLSession(configuration: .ephemeral), interrupts: interrupts)
        let database = scratch.path("q.sqlite")
        let refresh = Task {
            try await cli.refresh(
                feeds: [server.url("/a").absoluteString, server.url("/b").absoluteString], resume: false,
                database: database, json: false)
        }
        await halfSent.waitAsync()
        interrupts.interrupt()
        release.open()  // (after a shutdown no job is claimed: the downloads may finish, nothing is imported)
        let result = await refresh.result
        await server.shutdown()
        let failure: (any Error)?
        if case .failure(let error) = result { failure = error } else { failure = nil }
        let error = try #require(failure as? CLIError)
        #expect(error.isCancellation)
        #expect(error.exitStatus == 130)
        #expect(error.message.contains("the new database \(database) holds no events"), "\(error)")
        #expect(!error.message.contains("imported so far are kept"), "\(error)")
        #expect(try EarthquakeStore(path: database).count() == 0)
    }

    /// "Refreshed 1 feeds", "Database …: 1 events", "1 months ago".
    @Test func countsOfOneAreSingular() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let feed = scratch.path("feed.geojson")
        try SampleFeed.geoJSON(count: 1).write(to: URL(fileURLWithPath: feed))
        let database = scratch.path("q.sqlite")
        let captured = CapturedConsole()
        let cli = EarthquakesCLI.forTests(captured)
        try await cli.refresh(feeds: [feed, feed], resume: false, database: database, json: false)
        #expect(captured.stdout.contains("Refreshed 1 feed into"), "\(captured.stdout)")
        try await cli.status(database: database)
        #expect(captured.stdout.contains("\(database): 1 event"), "\(captured.stdout)")
        #expect(!captured.stdout.contains("1 events"), "\(captured.stdout)")
        #expect(
            FeedRefresh.existingRunNote(imported: 1, of: 1, liveWorkers: 0, deadWorkers: 1, started: true)
                == "Resuming the interrupted refresh: 1 of 1 feed was imported before it stopped and is not "
                + "downloaded again.")
        let now = SampleFeed.referenceDate
        #expect(RelativeTime.ago(now.addingTimeInterval(-60 * 86_400), now: now) == "2 months ago")
        #expect(RelativeTime.ago(now.addingTimeInterval(-730 * 86_400), now: now) == "2 years ago")
        #expect(ProgressDisplay.size(1) == "1 byte")
        #expect(ImportSummary(inserted: 1, updated: 0, unchanged: 0).description.hasPrefix("1 earthquake:"))
    }

    /// `prune --before <a date to come>` deleted every event without a word about the cut-off.
    @Test func aCutOffInTheFutureIsPointedOut() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        let store = try EarthquakeStore.withSample(at: database)
        _ = try store.importFeed([Earthquake(id: "untimed", latitude: 1, longitude: 2, depth: 3, time: nil)])
        try store.close()
        let now = SampleFeed.referenceDate
        let future = now.addingTimeInterval(86_400)

        let dry = CapturedConsole()
        try EarthquakesCLI.forTests(dry, now: now).prune(before: future, database: database, dryRun: true)
        #expect(dry.stdout.hasPrefix("Would delete 40 events before "), "\(dry.stdout)")
        #expect(dry.stdout.contains("1 would be left (1 with no time, which prune never deletes)"), "\(dry.stdout)")
        #expect(dry.stdout.contains("Nothing was deleted (--dry-run)."))
        #expect(dry.stderr.contains("is in the future: every event older than it would be deleted"), "\(dry.stderr)")
        #expect(try EarthquakeStore(path: database).count() == 41)

        let real = CapturedConsole()
        try EarthquakesCLI.forTests(real, now: now).prune(before: future, database: database)
        #expect(real.stdout.hasPrefix("Deleted 40 events before "), "\(real.stdout)")
        #expect(real.stdout.contains("1 left (1 with no time, which prune never deletes)."), "\(real.stdout)")
        #expect(real.stderr.contains("is in the future: every event older than it was deleted"), "\(real.stderr)")
        #expect(try EarthquakeStore(path: database).count() == 1)

        // `--before 0d`: the cut-off is now.
        let zero = CapturedConsole()
        try EarthquakesCLI.forTests(zero, now: now).prune(before: now, database: database)
        #expect(zero.stderr.contains("is now: every event older than it was deleted"), "\(zero.stderr)")
        // A cut-off in the past is not pointed out.
        let past = CapturedConsole()
        try EarthquakesCLI.forTests(past, now: now).prune(before: now.addingTimeInterval(-86_400), database: database)
        #expect(past.stderr.isEmpty, "\(past.stderr)")
    }

    /// `list --csv` passed ESC, BEL, NUL and C1 characters of a feed through to whatever prints it.
    @Test func csvReplacesControlCharacters() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let database = scratch.path("q.sqlite")
        let quake = Earthquake(
            id: "us\u{1B}[31mx", latitude: 10, longitude: 20, depth: 5, magnitude: 4.2,
            place: "a\u{1B}[2Jb\u{07}c\u{0}d\u{85}e\u{9B}f\u{7F}g\th\nsecond line, \"quoted\"\r\nthird",
            time: Date(timeIntervalSince1970: 1_700_000_000), type: "quarry\u{1}blast")
        _ = try EarthquakeStore(path: database).importFeed([quake])
        let captured = CapturedConsole()
        try EarthquakesCLI.forTests(captured).list(ListOptions(limit: 10, csv: true), database: database, json: false)
        let controls = captured.stdout.unicodeScalars.filter {
            ($0.value < 0x20 && $0 != "\n" && $0 != "\r") || (0x7F...0x9F).contains($0.value)
        }
        #expect(controls.isEmpty, "\(captured.stdout.debugDescription)")
        #expect(captured.stdout.contains("us\u{FFFD}[31mx,"), "\(captured.stdout.debugDescription)")
        #expect(captured.stdout.contains("quarry\u{FFFD}blast"))
        #expect(
            captured.stdout.contains(
                "\"a\u{FFFD}[2Jb\u{FFFD}c\u{FFFD}d\u{FFFD}e\u{FFFD}f\u{FFFD}g h\nsecond line, \"\"quoted\"\"\r\nthird\""
            ),
            "line breaks stay, quoted: \(captured.stdout.debugDescription)")
    }
}
