import Foundation
import Testing

@testable import BatonDurable

/// A listing shows every schedule by name, those this program cannot read among the others.
@Suite("Schedule listings")
struct ScheduleListingTests {
    static func record(_ name: String) -> ScheduleRecord {
        ScheduleRecord(
            schedule: Schedule(name: name, timing: .every(.seconds(60)), graph: GraphSpec(name: name)), paused: false,
            nextTick: nil, lastTick: nil)
    }

    static func unreadable(_ name: String) -> UnreadableSchedule {
        UnreadableSchedule(name: name, paused: true, nextTick: nil, lastTick: nil, reason: "newer")
    }

    @Test func entriesAreByNameWithTheUnreadableAmongTheOthers() {
        let listing = ScheduleListing(
            schedules: [Self.record("b"), Self.record("d")], unreadable: [Self.unreadable("a"), Self.unreadable("c")])
        #expect(listing.entries.map(\.name) == ["a", "b", "c", "d"])
        #expect(listing.entries.first == .unreadable(Self.unreadable("a")))
        #expect(listing.entries.last == .readable(Self.record("d")))
        #expect(ScheduleListing(schedules: []).entries.isEmpty)
        #expect(ScheduleListing(schedules: [], unreadable: [Self.unreadable("x")]).entries.map(\.name) == ["x"])
    }
}
