public import BatonDurable
import Foundation
import Logging
import PostgresNIO

/// Schedules, with their ticks on the database server's clock (a test's clock when it gave one).
extension PostgresJobStore {
    @discardableResult
    public func schedule(_ schedule: Schedule) async throws -> ScheduleRecord {
        try schedule.validate()
        let definition = try schedule.stored()
        let logger = logger
        return try await transaction("schedule") { connection in
            let now = Date(storeTime: try await self.serverTime(on: connection))
            let stored = try await connection.liveQuery(
                "SELECT definition, next_tick FROM schedules WHERE name = \(schedule.name) FOR UPDATE", logger: logger
            ).collect().first.map { row in
                let (definition, nextTick) = try row.decode((String, Double?).self)
                return (definition: definition, nextTick: nextTick)
            }
            let next = schedule.keptTick(stored, name: schedule.name, fresh: try schedule.tick(after: now)?.storeTime)
            try await connection.liveQuery(
                """
                INSERT INTO schedules (name, definition, next_tick, paused) VALUES (\(schedule.name), \(definition), \(next), false)
                ON CONFLICT (name) DO UPDATE SET definition = EXCLUDED.definition, next_tick = EXCLUDED.next_tick
                """, logger: logger)
            return try await Self.schedules(connection, named: schedule.name, logger: logger)[0]
        }
    }

    public func schedules() async throws -> [ScheduleRecord] {
        let logger = logger
        return try await transaction("schedules") { connection in
            try await Self.schedules(connection, named: nil, logger: logger)
        }
    }

    public func scheduleListing() async throws -> ScheduleListing {
        let rows = try await statement(
            "schedules", "SELECT name, definition, next_tick, last_tick, paused FROM schedules ORDER BY name",
            readOnly: true)
        return ScheduleListing(
            rows: try rows.map { row in
                let (name, definition, next, last, paused) = try row.decode(
                    (String, String, Double?, Double?, Bool).self)
                return (name: name, definition: definition, nextTick: next, lastTick: last, paused: paused)
            })
    }

    public func setSchedule(named name: String, paused: Bool) async throws {
        // Pausing keeps the next tick and needs no definition: a schedule this program cannot read (one
        // written by a newer version) can be paused.
        if paused {
            let rows = try await statement(
                "schedule", "UPDATE schedules SET paused = true WHERE name = \(name) RETURNING name")
            guard !rows.isEmpty else { throw ScheduleErrors.unknown(name) }
            return
        }
        let logger = logger
        try await transaction("schedule") { connection in
            let now = Date(storeTime: try await self.serverTime(on: connection))
            guard let record = try await Self.schedules(connection, named: name, lock: true, logger: logger).first
            else {
                throw ScheduleErrors.unknown(name)
            }
            guard record.paused != paused else { return }
            let next = paused ? record.nextTick : try record.schedule.tick(after: now)
            try await connection.liveQuery(
                "UPDATE schedules SET paused = \(paused), next_tick = \(next?.storeTime) WHERE name = \(name)",
                logger: logger)
        }
    }

    public func removeSchedule(named name: String) async throws {
        let rows = try await statement("schedule", "DELETE FROM schedules WHERE name = \(name) RETURNING name")
        guard !rows.isEmpty else { throw ScheduleErrors.unknown(name) }
    }

    public func fireDueSchedules() async throws -> FiredSchedules {
        let asked = clock.now()
        // Most calls find nothing due: one read, and a transaction only when a tick is due.
        let rows = try await statement(
            "schedules",
            """
            SELECT min(next_tick) - coalesce(\(nowOverride)::float8, extract(epoch FROM now())::float8)
            FROM schedules WHERE NOT paused
            """, readOnly: true)
        guard let wait = try rows.first?.decode(Double?.self), wait <= 0 else {
            let wait = try rows.first?.decode(Double?.self)
            return FiredSchedules(runs: [], nextTick: wait.map { asked.addingTimeInterval($0) })
        }
        let logger = logger
        return try await transaction("schedules") { connection in
            let now = Date(storeTime: try await self.serverTime(on: connection))
            var runs: [(schedule: String, tick: Date, run: SubmittedRun)] = []
            var unfired: [String: String] = [:]
            // Locked, skipping those another process is firing (it moves them on).
            for row in try await connection.liveQuery(
                """
                SELECT name, definition, next_tick, last_tick FROM schedules
                WHERE NOT paused AND next_tick <= \(now.storeTime)
                ORDER BY name FOR UPDATE SKIP LOCKED
                """, logger: logger
            ).collect() {
                let (name, definition, next, last) = try row.decode((String, String, Double, Double?).self)
                guard
                    let (schedule, due, following) = Schedule.firing(
                        definition, name: name, next: next, now: now, &unfired)
                else { continue }
                var fire = due
                if schedule.overlap == .skip, !due.isEmpty {
                    var unfinished = false
                    if let last {
                        unfinished =
                            try await connection.liveQuery(
                                "SELECT finished IS NULL FROM runs WHERE unique_key = \(schedule.key(of: Date(storeTime: last)))",
                                logger: logger
                            ).collect().first?.decode(Bool.self) ?? false
                    }
                    fire = schedule.firing(due) { unfinished }
                }
                for tick in fire {
                    let run = try await self.submit(schedule.graph, uniqueKey: schedule.key(of: tick), on: connection)
                    runs.append((name, tick, run))
                }
                try await connection.liveQuery(
                    """
                    UPDATE schedules SET next_tick = \(following?.storeTime),
                        last_tick = COALESCE(\(fire.last?.storeTime), last_tick)
                    WHERE name = \(name)
                    """, logger: logger)
            }
            // The next tick of those this program can fire: one it cannot fire stays due, and must not
            // make the worker look again before the others' ticks.
            let skipped = Array(unfired.keys)
            let next = try await connection.liveQuery(
                "SELECT min(next_tick) FROM schedules WHERE NOT paused AND NOT (name = ANY(\(skipped)))",
                logger: logger
            ).collect().first?.decode(Double?.self)
            return FiredSchedules(
                runs: runs, nextTick: next.map { asked.addingTimeInterval($0 - now.storeTime) },
                unfired: unfired)
        }
    }

    static func schedules(
        _ connection: PostgresConnection, named name: String?, lock: Bool = false, logger: Logger
    ) async throws -> [ScheduleRecord] {
        let rows =
            if let name {
                try await connection.liveQuery(
                    PostgresQuery(
                        unsafeSQL:
                            "SELECT name, definition, next_tick, last_tick, paused FROM schedules WHERE name = $1"
                            + (lock ? " FOR UPDATE" : ""),
                        binds: {
                            var b = PostgresBindings(); b.append(name); return b
                        }()), logger: logger
                ).collect()
            } else {
                try await connection.liveQuery(
                    "SELECT name, definition, next_tick, last_tick, paused FROM schedules ORDER BY name", logger: logger
                ).collect()
            }
        return try rows.map { row in
            let (name, definition, next, last, paused) = try row.decode((String, String, Double?, Double?, Bool).self)
            return ScheduleRecord(
                schedule: try Schedule.stored(definition, name: name), paused: paused,
                nextTick: next.map(Date.init(storeTime:)), lastTick: last.map(Date.init(storeTime:)))
        }
    }
}
