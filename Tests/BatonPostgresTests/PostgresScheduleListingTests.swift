import BatonDurable
import Foundation
import PostgresNIO
import Testing

@testable import BatonPostgres

/// A schedule written by a newer version of Baton (a timing this one does not know) beside others: the
/// operators' listing shows it apart with the reason instead of failing, and it can still be paused.
@Suite("PostgreSQL: schedules this program cannot read", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresScheduleListingTests {
    @Test("the listing shows a schedule this program cannot read beside the others, with the reason")
    func listsUnreadableApart() async throws {
        try await TestPostgres.withStore("schedule_listing") { store, _ in
            var graph = JobGraph(name: "tick")
            graph.add(PostgresTracingTests.Traced.self, input: "tick", name: "tick")
            for name in ["hourly", "later"] {
                _ = try await store.schedule(name: name, every: .seconds(3_600), graph: graph)
            }
            try await store.client.query(
                """
                UPDATE schedules SET definition = '{"name":"later","timing":{"fortnightly":{}},"catchUp":"skip"}'
                WHERE name = 'later'
                """)
            await #expect(throws: DurableError.self) { try await store.schedules() }
            let listing = try await store.scheduleListing()
            #expect(listing.schedules.map(\.schedule.name) == ["hourly"])
            #expect(listing.unreadable.map(\.name) == ["later"])
            let later = try #require(listing.unreadable.first)
            #expect(!later.paused && later.nextTick != nil)
            #expect(later.reason.contains("schedule 'later' is stored in a form this program cannot read"), "\(later)")
            try await store.setSchedule(named: "later", paused: true)
            #expect(try await store.scheduleListing().unreadable.first?.paused == true)
        }
    }
}
