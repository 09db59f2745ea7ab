import BatonDurable
import Foundation

// snippet: schedules
struct RefreshFeed: DurableJob {
    static let kind = "quakes.refresh"
    func run(_ feed: String, context: DurableJobContext) async throws -> String { "refreshed \(feed)" }
}

func scheduleRefreshes(store: some JobStore) async throws {
    var hourly = JobGraph(name: "refresh hourly feed")
    hourly.add(RefreshFeed.self, input: "all_hour")
    // Every 5 minutes (at :00, :05, …); a tick missed while no worker ran is dropped.
    try await store.schedule(name: "hourly feed", every: .seconds(300), graph: hourly)

    var monthly = JobGraph(name: "refresh monthly feed")
    monthly.add(RefreshFeed.self, input: "2.5_month")
    // At 02:30 in Paris on weekdays; after an outage, the latest missed tick runs once.
    try await store.schedule(
        name: "monthly feed", cron: "30 2 * * mon-fri", timeZone: "Europe/Paris", graph: monthly, catchUp: .once)

    for record in try await store.schedules() {
        print(record.schedule.name, record.schedule.timing, "next:", record.nextTick.map { "\($0)" } ?? "never")
    }
    try await store.pauseSchedule(named: "monthly feed")  // resumeSchedule(named:) starts again from the next tick
}
// end snippet

func scheduleChecks(store: some JobStore, check: JobGraph) async throws {
    // snippet: schedule-overlap
    try await store.schedule(name: "feeds", every: .seconds(30), graph: check, overlap: .skip)
    // end snippet
}
