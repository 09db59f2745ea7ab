import BatonDurable
import Foundation

/// Schedules: one run per tick, whoever fires it, and what happens to missed ticks.
extension JobStoreConformance {
    static func every(
        _ seconds: Int64, _ name: String = "tick", catchUp: Schedule.CatchUp = .skip, kind: String = "sched"
    ) -> Schedule {
        Schedule(
            name: name, timing: .every(.seconds(seconds)),
            graph: Build.graph("\(name) run", Build.job("work", kind: kind)), catchUp: catchUp)
    }

    static let scheduleChecks: [Check] = [
        check("a schedule submits one run at each tick, keyed by the tick, and nothing before it") { store, clock in
            let record = try await store.schedule(every(60))
            let next = try requireValue(record.nextTick, "the next tick")
            try expect(next > clock.now && next <= clock.now.addingTimeInterval(60), "next tick within a minute")
            try expectEqual(
                next.timeIntervalSince1970.truncatingRemainder(dividingBy: 60), 0, "on the minute (from 1970)")
            try expectEqual(try await store.fireDueSchedules().runs.count, 0, "nothing due yet")
            clock.advance(by: .seconds(Int64(next.timeIntervalSince(clock.now).rounded(.up))))
            let fired = try await store.fireDueSchedules()
            try expectEqual(fired.runs.map(\.schedule), ["tick"], "one run")
            try expectEqual(fired.runs.map(\.tick), [next], "for the tick")
            try expectEqual(fired.runs.map(\.run.existing), [false], "a new run")
            let stored = try await store.record(of: fired.runs[0].run.run)
            try expectEqual(stored.name, "tick run", "named after the graph")
            try expect(stored.uniqueKey?.hasPrefix("schedule/tick/") == true, "keyed by the tick: \(stored)")
            try expectEqual(try await store.fireDueSchedules().runs.count, 0, "fired once")
            let after = try await store.schedules()
            try expectEqual(after.map(\.lastTick), [next], "last tick")
            try expectEqual(after.map(\.nextTick), [next.addingTimeInterval(60)], "next tick")
            try expectEqual(try await store.claimAll(["sched"]).count, 1, "its job runs")
        },
        // A watch checking feeds every few seconds piled up runs behind one held up by a slow server,
        // until they filled every worker's slots.
        check("overlap skip: no tick fires while the previous tick's run is unfinished, nor several at once") {
            store, clock in
            var schedule = every(10)
            schedule.overlap = .skip
            let record = try await store.schedule(schedule)
            let first = try requireValue(record.nextTick, "the first tick")
            clock.advance(by: .seconds(Int64(first.timeIntervalSince(clock.now).rounded(.up))))
            try expectEqual(try await store.fireDueSchedules().runs.map(\.tick), [first], "the first tick fires")
            let running = try await store.claimAll(["sched"])
            try expectEqual(running.count, 1, "its job runs")
            for _ in 0..<3 {
                clock.advance(by: .seconds(10))
                try expectEqual(try await store.fireDueSchedules().runs.count, 0, "skipped while it runs")
            }
            let skipped = try await store.schedules()[0]
            try expectEqual(skipped.lastTick, first, "the last fired tick stays the first")
            try expectEqual(skipped.nextTick, first.addingTimeInterval(40), "the next tick moved on")
            _ = try await store.succeed(running[0])
            clock.advance(by: .seconds(10))
            let fired = try await store.fireDueSchedules()
            try expectEqual(fired.runs.map(\.tick), [first.addingTimeInterval(40)], "fires again once it finished")
            try expectEqual(try await store.runs(RunFilter(name: "tick run")).runs.count, 2, "two runs in all")
            // Missed ticks caught up with .all: one run, not one per tick, while overlaps are skipped.
            var all = every(10, "all", catchUp: .all)
            all.overlap = .skip
            _ = try await store.schedule(all)
            clock.advance(by: .seconds(45))
            try expectEqual(
                try await store.fireDueSchedules().runs.filter { $0.schedule == "all" }.count, 1, "one catch-up run")
            // A schedule stored without the setting (an older version's) allows overlaps.
            try expectEqual(every(10).overlap, .allow, "the default")
        },
        // A probe (7 December 2026): the backlog was cut into batches of 1,000 ticks, each batch's last one
        // fired: four runs for a one-hour outage, the first for a tick 1,000 s old.
        check("overlap skip with catch-up all: a long outage fires one run, for the latest tick") { store, clock in
            var schedule = every(1, "backlog", catchUp: .all)
            schedule.overlap = .skip
            let first = try requireValue(try await store.schedule(schedule).nextTick, "the first tick")
            clock.advance(by: .seconds(Int64(first.timeIntervalSince(clock.now).rounded(.up)) + 3_600))
            let fired = try await store.fireDueSchedules().runs
            try expectEqual(fired.count, 1, "one run")
            let latest = first.addingTimeInterval(
                (clock.now.timeIntervalSince(first)).rounded(.down))
            try expectEqual(fired.map(\.tick), [latest], "for the latest tick")
            _ = try await store.succeed(try await store.claimAll(["sched"])[0])
            try expectEqual(try await store.fireDueSchedules().runs.count, 0, "nothing more of the backlog")
            try expect(try await store.schedules()[0].nextTick! > clock.now, "the next tick is in the future")
        },
        check("100 ticks fired by 3 racing callers make exactly 100 runs") { store, clock in
            _ = try await store.schedule(every(10, catchUp: .all))
            var random = SystemRandomNumberGenerator()
            for _ in 0..<100 {
                clock.advance(by: .seconds(10))
                // Three "workers" fire at once; one of them is stopped part-way at times (a kill).
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<3 {
                        let task = Task { _ = try await store.fireDueSchedules() }
                        if index == 2 && Bool.random(using: &random) { task.cancel() }
                        group.addTask { _ = try? await task.value }
                    }
                    try await group.waitForAll()
                }
            }
            _ = try await store.fireDueSchedules()  // a tick a stopped caller left due
            let runs = try await store.runs(RunFilter(name: "tick run", limit: 1000)).runs
            try expectEqual(runs.count, 100, "one run per tick")
            try expectEqual(Set(runs.compactMap(\.uniqueKey)).count, 100, "each with its own tick")
        },
        check("missed ticks: skip drops them, once runs the latest, all runs each") { store, clock in
            for catchUp in Schedule.CatchUp.allCases {
                _ = try await store.schedule(every(120, "\(catchUp)", catchUp: catchUp))
            }
            // Ten ticks pass with no worker; the last is 90 s late when one comes back.
            let first = try await store.schedules()[0].nextTick!
            clock.advance(by: .seconds(Int64(first.timeIntervalSince(clock.now).rounded(.up)) + 9 * 120 + 90))
            let fired = try await store.fireDueSchedules()
            let counts = Dictionary(grouping: fired.runs, by: \.schedule).mapValues(\.count)
            try expectEqual(counts["skip"], nil, "skip: none")
            try expectEqual(counts["once"], 1, "once: one")
            try expectEqual(counts["all"], 10, "all: ten")
            try expectEqual(
                fired.runs.filter { $0.schedule == "once" }.map(\.tick),
                [fired.runs.filter { $0.schedule == "all" }.map(\.tick).max()!], "once runs the latest")
            try expect(
                try await store.schedules().allSatisfy { $0.nextTick! > clock.now }, "each moves on to a future tick")
        },
        check("schedules are listed, paused, resumed from the next tick, replaced and removed") { store, clock in
            _ = try await store.schedule(every(60, "b"))
            _ = try await store.schedule(every(60, "a"))
            try expectEqual(try await store.schedules().map(\.schedule.name), ["a", "b"], "by name")
            try await store.pauseSchedule(named: "a")
            clock.advance(by: .seconds(300))
            try expectEqual(
                try await store.fireDueSchedules().runs.map(\.schedule), ["b"], "a paused one does not fire")
            try await store.resumeSchedule(named: "a")
            let resumed = try await store.schedules()[0]
            try expect(!resumed.paused && resumed.nextTick! > clock.now, "resumed from its next tick: \(resumed)")
            try expectEqual(try await store.fireDueSchedules().runs.count, 0, "ticks passed while paused are not fired")
            _ = try await store.schedule(every(3600, "a"))
            try expectEqual(try await store.schedules()[0].schedule.timing, .every(.seconds(3600)), "replaced")
            try await store.removeSchedule(named: "a")
            try expectEqual(try await store.schedules().map(\.schedule.name), ["b"], "removed")
            try await expectDurableError(.misuse) { try await store.removeSchedule(named: "a") }
            try await expectDurableError(.misuse) { try await store.pauseSchedule(named: "nope") }
            try await expectDurableError(.invalidGraph) {
                _ = try await store.schedule(
                    Schedule(name: "bad", timing: .cron("61 * * * *", timeZone: "UTC"), graph: every(1).graph))
            }
            try await expectDurableError(.invalidGraph) { _ = try await store.schedule(every(0, "zero")) }
            try expectEqual(try await store.schedules().count, 1, "nothing stored by a refusal")
        },
        check("a schedule stored again with the same timing keeps a due tick; a new timing starts afresh") {
            store, clock in
            let first = try requireValue(try await store.schedule(every(60, catchUp: .once)).nextTick, "next tick")
            // The tick passes while no worker runs; the application starts and stores its schedule again.
            clock.advance(by: .seconds(Int64(first.timeIntervalSince(clock.now).rounded(.up)) + 1))
            let again = try await store.schedule(every(60, catchUp: .once))
            try expectEqual(again.nextTick, first, "the due tick is kept")
            try expectEqual(try await store.fireDueSchedules().runs.map(\.tick), [first], "and fired")
            let changed = try await store.schedule(every(120, catchUp: .once))
            try expect(
                changed.nextTick! > clock.now && changed.schedule.timing == .every(.seconds(120)),
                "a new timing starts from its first tick after now: \(changed)")
        },
        check("a schedule that could never run is refused, saying why") { store, _ in
            try await expectDurableError(.invalidGraph) {
                _ = try await store.schedule(
                    Schedule(name: "never", timing: .cron("0 0 30 2 *", timeZone: "UTC"), graph: every(1).graph))
            }
            try await expectDurableError(.invalidGraph) {
                _ = try await store.schedule(
                    Schedule(name: "huge", timing: .every(.seconds(Int64.max)), graph: every(1).graph))
            }
            try expectEqual(try await store.schedules().count, 0, "nothing stored")
        },
        check("a cron schedule ticks at its times in its time zone") { store, clock in
            let record = try await store.schedule(
                Schedule(
                    name: "nightly", timing: .cron("30 2 * * *", timeZone: "Europe/Paris"),
                    graph: every(1).graph))
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "Europe/Paris")!
            let next = try requireValue(record.nextTick, "next tick")
            let parts = calendar.dateComponents([.hour, .minute], from: next)
            try expectEqual([parts.hour, parts.minute], [2, 30], "02:30 in Paris")
            try expect(next > clock.now && next <= clock.now.addingTimeInterval(25 * 3600), "within a day")
        },
    ]
}

func requireValue<T>(_ value: T?, _ what: String, file: String = #fileID, line: UInt = #line) throws -> T {
    guard let value else { throw ConformanceFailure(message: "\(what) is nil", file: file, line: line) }
    return value
}
