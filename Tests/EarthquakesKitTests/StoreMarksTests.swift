import BatonTesting
import Foundation
import GRDB
import Testing

@testable import EarthquakesKit

/// The marks of imports (what `list --new` and `watch` find new by): each import that writes takes one
/// above every mark before it, whatever the clock says; a row keeps its first and its last.
@Suite("EarthquakeStore marks", .offThePool)
struct StoreMarksTests {
    static func marks(_ store: EarthquakeStore, _ id: String) throws -> (added: Int64?, changed: Int64?) {
        try store.onConnection { db in
            let row = try Row.fetchOne(db, sql: "SELECT added, changed FROM earthquake WHERE id = ?", arguments: [id])
            return (row?["added"], row?["changed"])
        }
    }

    @Test("a row keeps the mark it was added with; a change moves its changed mark; an unchanged import none")
    func addedAndChanged() throws {
        let store = try EarthquakeStore.inMemory()
        #expect(try store.latestMark() == 0)
        try store.importFeed([Quakes.tokyo])
        let first = try Self.marks(store, "tokyo")
        #expect(first.added != nil && first.added == first.changed)
        #expect(try store.latestMark() == first.changed)

        try store.importFeed([Quakes.tokyo])  // the same values: nothing written
        #expect(try Self.marks(store, "tokyo") == first)

        var revised = Quakes.tokyo
        revised.magnitude = (revised.magnitude ?? 0) + 0.3
        try store.importFeed([revised, Quakes.sanFrancisco])
        let second = try Self.marks(store, "tokyo")
        #expect(second.added == first.added)
        #expect(second.changed! > first.changed!)
        #expect(try Self.marks(store, "sf").added == second.changed, "one mark per import")

        // What came since a look: the new row, not the revised one.
        let since = EarthquakeFilter(storedAfter: first.changed!, storedThrough: try store.latestMark())
        #expect(try store.earthquakes(matching: since, order: .time, limit: nil).map(\.earthquake.id) == ["sf"])
    }

    @Test("a clock set back does not set marks back: the next is above every mark in the file")
    func marksOnlyGoUp() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed([Quakes.tokyo])
        let latest = try store.latestMark()
        let next = try store.onConnection { db in
            try EarthquakeStore.nextMark(db, now: Date(timeIntervalSince1970: 0))
        }
        #expect(next == latest + 1)
    }

    @Test("looks are remembered by name and never move back")
    func looks() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("marks-\(UUID().uuidString).sqlite")
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: scratch.path + suffix) }
        }
        let store = try EarthquakeStore(path: scratch.path)
        defer { try? store.close() }
        #expect(try store.lastLook(named: "list") == nil)
        let look = EarthquakeStore.Look(mark: 10, date: Date(timeIntervalSince1970: 1000))
        try store.recordLook(named: "list", look)
        try store.recordLook(named: "list", EarthquakeStore.Look(mark: 5, date: Date(timeIntervalSince1970: 2000)))
        #expect(try store.lastLook(named: "list") == look)
        #expect(try store.lastLook(named: "other") == nil)
    }
}
