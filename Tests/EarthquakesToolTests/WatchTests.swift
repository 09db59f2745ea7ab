import EarthquakesKit
import Foundation
import GRDB
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 31, what daily users miss: `earthquakes watch` (refresh on a schedule, alert on new events that
/// match, `--exec`, never twice across restarts) and `list --new`. Run with the built executable, on
/// feed files whose events happened minutes ago by this machine's clock.
@Suite(.timeLimit(.binarySuite), .enabled(if: EarthquakesBinaryTests.executable != nil, "the executable is not built"))
struct WatchTests {
    typealias Binary = EarthquakesBinaryTests

    /// An event `minutesAgo` before now, revised now (so each write of the feed revises every event).
    struct Event {
        var id: String
        var magnitude: Double
        var minutesAgo: Double
        var latitude = 35.7
        var longitude = -117.5
        var alert: String?
    }

    struct Setup {
        let scratch: Scratch
        let database: String
        let feed: String

        init() throws {
            scratch = try Scratch()
            database = scratch.path("q.sqlite")
            feed = scratch.path("feed.geojson")
        }

        /// Writes the feed file with `events`.
        func write(_ events: [Event]) throws {
            let now = Date().timeIntervalSince1970 * 1000
            let features: [[String: Any]] = events.map { event in
                [
                    "type": "Feature", "id": event.id,
                    "geometry": ["type": "Point", "coordinates": [event.longitude, event.latitude, 8.0]],
                    "properties": [
                        "mag": event.magnitude, "place": "near \(event.id)", "type": "earthquake",
                        "time": Int64(now - event.minutesAgo * 60_000), "updated": Int64(now),
                        "alert": event.alert ?? NSNull(),
                    ] as [String: Any],
                ]
            }
            let data = try JSONSerialization.data(withJSONObject: ["type": "FeatureCollection", "features": features])
            try data.write(to: URL(fileURLWithPath: feed))
        }

        /// `watch --once` with `arguments`; exits 0.
        func check(
            _ arguments: [String] = [], sourceLocation: SourceLocation = #_sourceLocation
        ) async throws
            -> Binary.Run
        {
            let run = try await Binary.run(
                ["watch", "--once", "--feed", feed, "--database", database] + arguments, sourceLocation: sourceLocation)
            #expect(run.status == 0, "\(run.stderr)", sourceLocation: sourceLocation)
            return run
        }
    }

    /// What the database says of the watch, its events and its jobs (for a failure's message).
    static func dump(_ database: String) -> String {
        do {
            let queue = try DatabaseQueue(path: database)
            defer { try? queue.close() }
            return try queue.read { db in
                let tables = [
                    ("watch", "SELECT * FROM earthquake_watch"), ("alerts", "SELECT * FROM earthquake_alert"),
                    ("events", "SELECT id, added, changed, time FROM earthquake"),
                    (
                        "jobs",
                        "SELECT run, name, state, attempts, last_error, started, finished FROM baton_jobs ORDER BY id"
                    ),
                ]
                return try tables.map { name, sql in
                    "\(name):\n" + (try Row.fetchAll(db, sql: sql).map { "  \($0)" }.joined(separator: "\n"))
                }.joined(separator: "\n")
            }
        } catch {
            return "(the database could not be read: \(error))"
        }
    }

    /// The ids of the ALERT lines of some output, in order.
    static func alerted(_ output: String) -> [String] {
        output.split(separator: "\n").filter { $0.hasPrefix("ALERT ") }.compactMap {
            $0.split(separator: " ").last.map(String.init)
        }
    }

    @Test func alertsOnWhatComesInAfterTheStartOnceEach() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        let filter = ["--min-magnitude", "4"]
        try setup.write([
            Event(id: "known", magnitude: 5, minutesAgo: 30), Event(id: "small", magnitude: 3, minutesAgo: 20),
        ])
        let start = try await setup.check(filter)
        #expect(Self.alerted(start.stdout) == [], "what the database held at the start is not news")
        #expect(start.stderr.contains("1 stored event matches and is not alerted"), "\(start.stderr)")

        // Every event is revised (its `updated` time is now); two come in, one matching; one comes in
        // that happened days ago (news to the database, not to the world); `small` grows to match.
        try setup.write([
            Event(id: "known", magnitude: 5.1, minutesAgo: 30), Event(id: "small", magnitude: 4.2, minutesAgo: 20),
            Event(id: "new", magnitude: 4.6, minutesAgo: 5), Event(id: "tiny", magnitude: 2, minutesAgo: 3),
            Event(id: "old", magnitude: 6, minutesAgo: 3 * 24 * 60),
        ])
        let second = try await setup.check(filter)
        #expect(Self.alerted(second.stdout) == ["new"], "\(second.stdout)")
        #expect(second.stdout.contains("M4.6  near new  "), "\(second.stdout)")

        // The same feed again, and a watch stopped and started: nothing is alerted twice.
        try setup.write([
            Event(id: "known", magnitude: 5.1, minutesAgo: 30), Event(id: "new", magnitude: 4.7, minutesAgo: 5),
        ])
        #expect(Self.alerted(try await setup.check(filter).stdout) == [])

        // Filters: a radius around a point and a PAGER level.
        try setup.write([
            Event(id: "far", magnitude: 6, minutesAgo: 2, latitude: -33.9, longitude: 151.2, alert: "red"),
            Event(id: "close-green", magnitude: 6, minutesAgo: 2, alert: "green"),
            Event(id: "close-orange", magnitude: 6, minutesAgo: 1, alert: "orange"),
        ])
        let near = try await setup.check(
            filter + ["--near", "35.7,-117.5", "--within", "100km", "--alert-level", "yellow", "--name", "pager"])
        #expect(Self.alerted(near.stdout) == [], "a new watch starts from what the database holds")
        try setup.write([Event(id: "later-orange", magnitude: 6, minutesAgo: 1, alert: "orange")])
        let pager = try await setup.check(
            filter + ["--near", "35.7,-117.5", "--within", "100km", "--alert-level", "yellow", "--name", "pager"])
        #expect(Self.alerted(pager.stdout) == ["later-orange"], "\(pager.stdout)")
        #expect(pager.stdout.contains("0 km from 35.7000,-117.5000"), "\(pager.stdout)")
        // The default watch has its own starting point: it alerts the three it had not seen.
        #expect(
            Set(Self.alerted(try await setup.check(filter).stdout)) == [
                "far", "close-green", "close-orange", "later-orange",
            ])
    }

    @Test func execGetsEachEventAsJSONAndAFailedCommandIsTriedAgain() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        try setup.write([])
        _ = try await setup.check()
        try setup.write([Event(id: "us1", magnitude: 5.5, minutesAgo: 4)])
        let received = setup.scratch.path("received.jsonl")
        let run = try await setup.check(["--exec", "cat >> '\(received)'; echo \"id $EARTHQUAKE_ID\" >> '\(received)'"])
        #expect(Self.alerted(run.stdout) == ["us1"])
        let lines = try String(contentsOfFile: received, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2, "one JSON line, then the id: \(lines)")
        let event = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(event["id"] as? String == "us1")
        #expect(event["magnitude"] as? Double == 5.5)
        #expect(lines[1] == "id us1")

        // A command that fails: warned about, tried at the next two checks, then given up; `--once` exits 1.
        // The alert's line is shown once, with the first try (a probe, 7 December 2026: it was shown at each).
        try setup.write([Event(id: "us2", magnitude: 5.5, minutesAgo: 3)])
        for attempt in 1...3 {
            let failed = try await Binary.run(
                ["watch", "--once", "--feed", setup.feed, "--database", setup.database, "--exec", "exit 3"])
            #expect(failed.status == 1)
            #expect(
                Self.alerted(failed.stdout) == (attempt == 1 ? ["us2"] : []), "attempt \(attempt): \(failed.stdout)")
            #expect(failed.stderr.contains("--exec for us2: the command exited with status 3"), "\(failed.stderr)")
            #expect(failed.stderr.contains(attempt < 3 ? "(\(attempt) of 3 tries)" : "given up after 3 tries"))
        }
        #expect(Self.alerted(try await setup.check(["--exec", "exit 3"]).stdout) == [])

        // The command has ended when its shell exits: what it leaves running in the background does not
        // hold the watch (it would, until the command's time limit, and then count as a failure).
        try setup.write([Event(id: "us3", magnitude: 5.5, minutesAgo: 2)])
        let background = try await setup.check([
            "--exec", "sleep 120 >/dev/null 2>&1 </dev/null & echo \"started $EARTHQUAKE_ID\" >> '\(received)'",
        ])
        #expect(Self.alerted(background.stdout) == ["us3"])
        #expect(!background.stderr.contains("warning"), "\(background.stderr)")
        #expect(try String(contentsOfFile: received, encoding: .utf8).hasSuffix("started us3\n"))

        #if os(Linux)
        // The command starts with no signal blocked (the watch's threads block most: SIGTERM would not stop
        // a command that inherited their mask).
        try setup.write([Event(id: "us4", magnitude: 5.5, minutesAgo: 1)])
        let signals = setup.scratch.path("signals")
        _ = try await setup.check(["--exec", "grep -E '^SigBlk' /proc/self/status > '\(signals)'"])
        let masks = try String(contentsOfFile: signals, encoding: .utf8)
        #expect(masks.contains("SigBlk:\t0000000000000000"), "\(masks)")
        #endif
    }

    /// `watch --once` listed, beside the feed that failed, each job cancelled because of it ("import …:
    /// dependency 'parse …' was cancelled"): one problem, said three ways. Only the first is listed.
    @Test func aFailedFeedIsListedOnceNotWithTheJobsItCancelled() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        try setup.write([])
        _ = try await setup.check()
        try Data("{ not a feed".utf8).write(to: URL(fileURLWithPath: setup.feed))
        let failed = try await Binary.run(["watch", "--once", "--feed", setup.feed, "--database", setup.database])
        #expect(failed.status == 1, "\(failed.stderr)")
        let details = failed.stderr.split(separator: "\n").filter { $0.hasPrefix("  ") }
        #expect(details.count == 1, "\(failed.stderr)")
        #expect(details.first?.contains("parse ") == true, "\(failed.stderr)")
        #expect(!failed.stderr.contains("dependency '"), "\(failed.stderr)")
    }

    @Test func aWatchStartedAgainUsesItsNewSettingsAndNeverSendsAnothersAlerts() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        let log = setup.scratch.path("exec.log")
        func watch(_ name: String, exec tag: String) -> [String] {
            [
                "watch", "--once", "--name", name, "--feed", setup.feed, "--database", setup.database, "--exec",
                "echo \"\(tag) $EARTHQUAKE_ID\" >> '\(log)'",
            ]
        }
        try setup.write([])
        _ = try await Binary.run(watch("a", exec: "a1"))
        _ = try await Binary.run(watch("b", exec: "b1"))
        try setup.write([Event(id: "q1", magnitude: 6, minutesAgo: 2)])
        // Watch a decides to alert q1, and is killed before it delivers it.
        let killed = try PausedRun(watch("a", exec: "a1"), pauseAt: "alerts-decided")
        try await killed.waitUntilPaused()
        killed.send(SIGKILL)
        _ = try await killed.finish("the killed watch to end")
        // Watch b delivers its own alert of q1, not a's (a's check is cancelled: a is not running).
        let b = try await Binary.run(watch("b", exec: "b2"))
        #expect(b.status == 0, "\(b.stderr)")
        #expect(try String(contentsOfFile: log, encoding: .utf8) == "b2 q1\n")
        // Watch a, started again with another command, delivers its alert with that command.
        let a = try await Binary.run(watch("a", exec: "a2"))
        #expect(a.status == 0, "\(a.stderr)")
        #expect(try String(contentsOfFile: log, encoding: .utf8) == "b2 q1\na2 q1\n")
    }

    @Test func aWatchKilledBeforeItDeliveredDeliversOnceWhenStartedAgain() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        try setup.write([])
        _ = try await setup.check()
        try setup.write([Event(id: "kept", magnitude: 6, minutesAgo: 2)])
        // Killed once the alert is decided (recorded with its job), before it is delivered.
        let killed = try PausedRun(
            ["watch", "--once", "--feed", setup.feed, "--database", setup.database], pauseAt: "alerts-decided")
        try await killed.waitUntilPaused()
        killed.send(SIGKILL)
        let gone = try await killed.finish("the killed watch to end")
        #expect(Self.alerted(gone.stdout) == [], "nothing was delivered before the kill")
        let again = try await setup.check()
        #expect(Self.alerted(again.stdout) == ["kept"], "\(again.stdout)\n\(again.stderr)")
        #expect(Self.alerted(try await setup.check().stdout) == [])
    }

    @Test func theScheduleChecksAgainAndCtrlCStops() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        try setup.write([Event(id: "before", magnitude: 5, minutesAgo: 10)])
        // (A pause point that is never reached: pauses on makes the tool say when it checked.)
        let watch = try PausedRun(
            ["watch", "--every", "1s", "--feed", setup.feed, "--database", setup.database], pauseAt: "never")
        try await watch.waitUntilSaid("checked")
        // A second watch of the same database is refused while this one runs, also through a symbolic link.
        let link = setup.scratch.path("link.sqlite")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: setup.database)
        for database in [setup.database, link] {
            let second = try await Binary.run(
                ["watch", "--once", "--name", "other", "--feed", setup.feed, "--database", database])
            #expect(second.status == 1)
            #expect(
                second.stderr.contains("another `earthquakes watch` (the watch \"default\") is running on"),
                "\(second.stderr)")
        }
        let running = try await Binary.run(["status", "--database", setup.database])
        #expect(running.stdout.contains("Watch      \"default\" every 1 s, running now"), "\(running.stdout)")

        try setup.write([
            Event(id: "before", magnitude: 5, minutesAgo: 10), Event(id: "during", magnitude: 5, minutesAgo: 1),
        ])
        // The schedule's checks (a second apart) import it and alert it: counted from the write (checks
        // went on while the commands above waited for their turn to run).
        // (What the watch said while the test did not read is read first: those checks came before it.)
        watch.readAvailable()
        var checks = watch.text.components(separatedBy: "PAUSE checked\n").count - 1
        let limit = checks + 30
        while !watch.outputSoFar.contains("during") {
            checks += 1
            try #require(checks < limit, "no check alerted the new event: \(watch.text)\n\(Self.dump(setup.database))")
            try await watch.waitUntilSaid("checked", count: checks)
        }
        try await watch.interrupt()
        let ended = try await watch.finish()
        #expect(ended.status == 130, "\(ended.stderr)")
        #expect(ended.stderr.contains("Stopped watching."), "\(ended.stderr)")
        #expect(Self.alerted(ended.stdout) == ["during"], "\(ended.stdout)")
        let stopped = try await Binary.run(["status", "--database", setup.database])
        #expect(stopped.stdout.contains("Watch      \"default\" every 1 s, stopped, last check "), "\(stopped.stdout)")
        #expect(stopped.stdout.contains("; 1 alert sent\n"), "\(stopped.stdout)")
    }

    @Test func listNewShowsWhatCameInSinceTheLastLook() async throws {
        let setup = try Setup()
        defer { setup.scratch.remove() }
        func ids(_ arguments: [String] = []) async throws -> (ids: [String], run: Binary.Run) {
            let run = try await Binary.run(["list", "--new", "--csv", "--database", setup.database] + arguments)
            #expect(run.status == 0, "\(run.stderr)")
            return (run.stdout.split(separator: "\n").dropFirst().map { String($0.prefix { $0 != "," }) }, run)
        }
        try setup.write((1...25).map { Event(id: "a\($0)", magnitude: 3, minutesAgo: Double($0)) })
        #expect(try await Binary.run(["refresh", "--feed", setup.feed, "--database", setup.database]).status == 0)
        #expect(try await ids().ids.count == 25, "the first look shows every event, not 20")
        let none = try await ids()
        #expect(none.ids == [])
        #expect(none.run.stderr.contains("Nothing new since you last looked"), "\(none.run.stderr)")

        try setup.write([
            Event(id: "a1", magnitude: 3.5, minutesAgo: 1), Event(id: "b1", magnitude: 4, minutesAgo: 1),
            Event(id: "b2", magnitude: 2, minutesAgo: 2),
        ])
        #expect(try await Binary.run(["refresh", "--feed", setup.feed, "--database", setup.database]).status == 0)
        // A revised event is not new; filters apply; the look covers what was shown and what was not.
        #expect(try await ids(["--min-magnitude", "3"]).ids == ["b1"])
        #expect(try await ids().ids == [])

        let csv = try await Binary.run(["list", "--new", "--csv", "--database", setup.database])
        #expect(csv.stdout.hasPrefix("id,time,"), "CSV with no rows is still CSV: \(csv.stdout)")
        let table = try await Binary.run(["list", "--new", "--database", setup.database])
        #expect(table.stdout.hasPrefix("Nothing new since you last looked ("), "\(table.stdout)")
        let sample = try await Binary.run(["list", "--new", "--sample"])
        #expect(sample.status == 64)
    }
}
