import Foundation
import GRDB

extension SQLiteJobStore {
    @discardableResult
    public func schedule(_ schedule: Schedule) async throws -> ScheduleRecord {
        try schedule.validate()
        let definition = try schedule.stored()
        let next = try schedule.tick(after: clock.now())
        return try await write(wake: false) { db in
            let stored = try Row.fetchOne(
                db, sql: "SELECT definition, next_tick FROM baton_schedules WHERE name = ?", arguments: [schedule.name]
            ).map { row in (definition: try row.value(at: 0) as String, nextTick: try row.value(at: 1) as Double?) }
            try db.execute(
                sql: """
                    INSERT INTO baton_schedules (name, definition, next_tick, paused) VALUES (?, ?, ?, 0)
                    ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, next_tick = excluded.next_tick
                    """,
                arguments: [
                    schedule.name, definition, schedule.keptTick(stored, name: schedule.name, fresh: next?.storeTime),
                ])
            return try Self.schedules(db, named: schedule.name)[0]
        }
    }

    public func schedules() async throws -> [ScheduleRecord] {
        try await reading { db in try Self.schedules(db, named: nil) }
    }

    public func scheduleListing() async throws -> ScheduleListing {
        try await reading { db in
            ScheduleListing(
                rows: try Row.fetchAll(
                    db, sql: "SELECT name, definition, next_tick, last_tick, paused FROM baton_schedules ORDER BY name"
                ).map { row in
                    (
                        name: try row.value(at: 0), definition: try row.value(at: 1), nextTick: try row.value(at: 2),
                        lastTick: try row.value(at: 3), paused: try row.value(at: 4)
                    )
                })
        }
    }

    public func setSchedule(named name: String, paused: Bool) async throws {
        // Pausing keeps the next tick and needs no definition: a schedule this program cannot read (one
        // written by a newer version) can be paused.
        if paused {
            try await write(wake: false) { db in
                try db.execute(sql: "UPDATE baton_schedules SET paused = 1 WHERE name = ?", arguments: [name])
                guard db.changesCount > 0 else { throw ScheduleErrors.unknown(name) }
            }
            return
        }
        let now = clock.now()
        try await write(wake: false) { db in
            guard let record = try Self.schedules(db, named: name).first else { throw ScheduleErrors.unknown(name) }
            guard record.paused != paused else { return }
            let next = paused ? record.nextTick : try record.schedule.tick(after: now)
            try db.execute(
                sql: "UPDATE baton_schedules SET paused = ?, next_tick = ? WHERE name = ?",
                arguments: [paused, next?.storeTime, name])
        }
    }

    public func removeSchedule(named name: String) async throws {
        try await write(wake: false) { db in
            try db.execute(sql: "DELETE FROM baton_schedules WHERE name = ?", arguments: [name])
            guard db.changesCount > 0 else { throw ScheduleErrors.unknown(name) }
        }
    }

    public func fireDueSchedules() async throws -> FiredSchedules {
        let now = clock.now()
        // Most calls find nothing due: read first, and take the write lock only when a tick is due.
        let due = try await reading { db in
            try Bool.fetchOne(
                db, sql: "SELECT 1 FROM baton_schedules WHERE paused = 0 AND next_tick <= ? LIMIT 1",
                arguments: [now.storeTime]) ?? false
        }
        guard due else { return FiredSchedules(runs: [], nextTick: try await nextScheduleTick()) }
        let fired = try await write(wake: false) { db in
            var runs: [(schedule: String, tick: Date, run: SubmittedRun)] = []
            var unfired: [String: String] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT name, definition, next_tick, last_tick FROM baton_schedules
                    WHERE paused = 0 AND next_tick <= ?
                    """,
                arguments: [now.storeTime])
            {
                let name: String = try row.value(at: 0)
                guard
                    let (schedule, due, next) = Schedule.firing(
                        try row.value(at: 1), name: name, next: try row.value(at: 2), now: now, &unfired)
                else { continue }
                let last = (try row.value(at: 3) as Double?).map(Date.init(storeTime:))
                let fire = try schedule.firing(due) {
                    guard let last else { return false }
                    return try Bool.fetchOne(
                        db, sql: "SELECT finished IS NULL FROM baton_runs WHERE unique_key = ?",
                        arguments: [schedule.key(of: last)]) ?? false
                }
                for tick in fire {
                    let run = try Self.insertChecked(
                        schedule.graph, uniqueKey: schedule.key(of: tick), now: now.storeTime, db)
                    runs.append((name, tick, run))
                }
                try db.execute(
                    sql: """
                        UPDATE baton_schedules SET next_tick = ?, last_tick = COALESCE(?, last_tick) WHERE name = ?
                        """, arguments: [next?.storeTime, fire.last?.storeTime, name])
            }
            // The next tick of those this program can fire: one it cannot fire stays due, and must not
            // make the worker look again before the others' ticks.
            let next = try Row.fetchAll(
                db, sql: "SELECT name, next_tick FROM baton_schedules WHERE paused = 0 AND next_tick IS NOT NULL"
            ).compactMap { row -> Double? in
                unfired[try row.value(at: 0) as String] == nil ? try row.value(at: 1) as Double : nil
            }.min()
            return FiredSchedules(runs: runs, nextTick: next.map(Date.init(storeTime:)), unfired: unfired)
        }
        // Runs submitted: wake the claim loops and outcome watchers (as a submission does).
        if !fired.runs.isEmpty {
            wakeupHub.wake()
            outcomeHub.wake()
        }
        return fired
    }

    private func nextScheduleTick() async throws -> Date? {
        try await reading { db in
            try Double.fetchOne(db, sql: "SELECT min(next_tick) FROM baton_schedules WHERE paused = 0")
                .map(Date.init(storeTime:))
        }
    }

    static func schedules(_ db: Database, named name: String?) throws -> [ScheduleRecord] {
        let rows =
            if let name {
                try Row.fetchAll(
                    db,
                    sql: "SELECT name, definition, next_tick, last_tick, paused FROM baton_schedules WHERE name = ?",
                    arguments: [name])
            } else {
                try Row.fetchAll(
                    db, sql: "SELECT name, definition, next_tick, last_tick, paused FROM baton_schedules ORDER BY name")
            }
        return try rows.map { row in
            ScheduleRecord(
                schedule: try Schedule.stored(try row.value(at: 1), name: try row.value(at: 0)),
                paused: try row.value(at: 4),
                nextTick: (try row.value(at: 2) as Double?).map(Date.init(storeTime:)),
                lastTick: (try row.value(at: 3) as Double?).map(Date.init(storeTime:)))
        }
    }
}
