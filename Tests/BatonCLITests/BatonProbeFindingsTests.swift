import BatonDurable
import BatonPostgres
import Foundation
import GRDB
import Testing

@testable import BatonCLI

/// What a probe of the `baton` command and its dashboard found (7 December 2026): a time far out of
/// range trapped, a timeline could be written over its own store, table cells lost their ends, and
/// ages and addresses were read too loosely.
/// (In the suite that reads and repairs a SQLite store: its scratch folder and store path.)
extension BatonToolSQLiteTests {
    /// A time far out of range (a hand edit, a worker with a wrong clock) trapped as it was converted:
    /// `baton runs`, `baton timeline` and the dashboard's server, which shares the code, died with it.
    @Test func timesFarOutOfRangeAreShownNotTrappedOn() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteJobStore(path: path)
        let fixture = try await Fixture.fill(store)
        try store.close()
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE baton_attempts SET ended = 1e12")
            try db.execute(
                sql: "UPDATE baton_runs SET finished = 1e20 WHERE id = ?", arguments: [fixture.failed.rawValue])
        }
        let captured = Captured()
        let tool = BatonTool(write: captured.write, timeZone: TimeZone(identifier: "UTC")!)
        try await StoreAddress.sqlite(path: path).withStore { store in
            try await tool.runs(store, filter: RunFilter(), json: false)
            #expect(captured.output.contains("over 10,000,000,000 d"), "\(captured.output)")
            let page = try await tool.timeline(store, run: fixture.failed)
            #expect(page.contains("<svg"))
        }
        #expect(TimeText.duration(.infinity) == "over 10,000,000,000 d")
        #expect(TimeText.duration(.nan) == "unknown")
    }

    /// `baton timeline 2 -o jobs.sqlite` replaced the store with the page.
    @Test func aTimelineIsNotWrittenOverItsStore() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try SQLiteJobStore(path: path).close()
        let address = StoreAddress.sqlite(path: path)
        #expect(address.isOverwritten(by: path))
        #expect(address.isOverwritten(by: directory.appendingPathComponent("./jobs.sqlite-wal").path))
        #expect(address.isOverwritten(by: directory.appendingPathComponent("jobs.sqlite-journal").path))
        let link = directory.appendingPathComponent("link.html").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: path)
        #expect(address.isOverwritten(by: link), "by a link to it")
        #expect(!address.isOverwritten(by: directory.appendingPathComponent("run.html").path))
        #expect(!StoreAddress.postgres(url: "postgres://u@h/d", schema: "baton").isOverwritten(by: path))
    }

    /// Cells were padded with `padding(toLength:)`, which counts UTF-16 units and cut the widest cell
    /// of a column short when it held an emoji.
    @Test func tableCellsKeepTheirTextAndLineUpByTerminalColumns() {
        var table = TextTable(["NAME", "STATE"])
        table.add(["nightly 😀😀 backup", "ok"])
        table.add(["漢字", "failed"])
        table.add(["e\u{301}te\u{301}", "x"])
        let lines = table.text.split(separator: "\n").map(String.init)
        // The widest name takes 19 columns (each emoji two); the others are padded to it.
        #expect(lines[0] == "NAME" + String(repeating: " ", count: 15) + "  STATE")
        #expect(lines[1] == "nightly 😀😀 backup  ok")
        #expect(lines[2] == "漢字" + String(repeating: " ", count: 15) + "  failed")
        #expect(
            lines[3] == "e\u{301}te\u{301}" + String(repeating: " ", count: 16) + "  x", "a combining mark takes none")
        let long = String(repeating: "😀", count: 40)
        let clipped = TextTable.clipped(long, to: 60)
        #expect(clipped == String(repeating: "😀", count: 29) + "…")
        #expect(TextTable.columns(clipped) <= 60)
    }

    /// A probe (7 December 2026): each line was trimmed at both ends, so `baton schedules` listed a
    /// schedule named "  spaced" as `spaced`, which `baton schedules pause spaced` did not find.
    @Test func aNameKeepsItsLeadingSpacesInATable() {
        var table = TextTable(["NAME", "STATE"])
        table.add(["  spaced", ""])
        let lines = table.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[1] == "  spaced", "only the padding at the end goes: \(lines)")
    }

    /// `5M` was read as five minutes (the unit's case was ignored): `prune --before 5M`, meant as five
    /// months, deleted all but the last five minutes' runs. `1e10w` was read as an age, and printed an
    /// empty date.
    @Test func agesAreReadStrictly() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let utc = TimeZone(identifier: "UTC")!
        #expect(try TimeText.moment("5m", now: now, timeZone: utc, option: "--before") == now.addingTimeInterval(-300))
        #expect(
            try TimeText.moment("2W", now: now, timeZone: utc, option: "--before") == now.addingTimeInterval(-1_209_600)
        )
        #expect(
            try TimeText.moment("1.5h", now: now, timeZone: utc, option: "--before") == now.addingTimeInterval(-5_400))
        let months = #expect(throws: BatonCLIError.self) {
            try TimeText.moment("5M", now: now, timeZone: utc, option: "--before")
        }
        #expect(months?.message.contains("M is not a unit here") == true, "\(months?.message ?? "")")
        for text in ["1e10w", "-5d", "0x10s", "infd", "99999999d"] {
            #expect(throws: BatonCLIError.self, "\(text)") {
                try TimeText.moment(text, now: now, timeZone: utc, option: "--before")
            }
        }
    }

    /// An address that does not parse was echoed with its password.
    @Test func anUnreadableAddressIsEchoedWithoutItsPassword() {
        defer { try? FileManager.default.removeItem(at: directory) }
        let error = #expect(throws: (any Error).self) {
            try PostgresStoreConfiguration(url: "postgres://u:s3cretpw@[bad?password=other", environment: [:])
        }
        let message = "\(error.map { BatonTool.message(for: $0) } ?? "")"
        #expect(!message.contains("other"), "\(message)")
        #expect(!message.contains("s3cretpw"), "\(message)")
        #expect(message.contains("postgres://u:***@[bad?password=***"), "\(message)")
    }

    /// `schedules --json` showed an interval as a `Duration`'s pair of integers only.
    @Test func scheduleTimingsAreReadableInJSON() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteJobStore(path: path)
        defer { try? store.close() }
        var graph = JobGraph(name: "tick")
        graph.add(Echo.self, input: "tick")
        _ = try await store.schedule(name: "hourly", every: .seconds(3_600), graph: graph)
        _ = try await store.schedule(name: "nightly", cron: "0 3 * * *", timeZone: "Europe/Paris", graph: graph)
        let captured = Captured()
        try await BatonTool(write: captured.write).schedules(store, json: true)
        struct Entry: Decodable {
            struct Timing: Decodable {
                var every: Double?
                var cron: String?
                var timeZone: String?
            }
            var timing: Timing
        }
        let entries = try JSONDecoder().decode([Entry].self, from: Data(captured.output.utf8))
        #expect(entries.map(\.timing.every) == [3_600, nil], "\(captured.output)")
        #expect(entries.map(\.timing.cron) == [nil, "0 3 * * *"])
        #expect(entries.last?.timing.timeZone == "Europe/Paris")
    }
}
