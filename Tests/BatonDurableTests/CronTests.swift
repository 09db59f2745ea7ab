import Foundation
import Testing

@testable import BatonDurable

/// Cron expressions and schedules' ticks, computed without a store.
@Suite("Cron expressions and ticks")
struct CronTests {
    static let utc = TimeZone(identifier: "UTC")!
    static let newYork = TimeZone(identifier: "America/New_York")!

    /// `text` (`yyyy-MM-dd HH:mm`) in `zone`.
    static func date(_ text: String, _ zone: TimeZone = utc) -> Date {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = zone
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.date(from: text)!
    }

    static func ticks(_ cron: String, _ zone: TimeZone = utc, after start: String, count: Int) throws -> [Date] {
        let expression = try CronExpression(cron, timeZone: zone)
        var result: [Date] = []
        var at = date(start, zone)
        for _ in 0..<count {
            guard let next = expression.next(after: at) else { break }
            result.append(next)
            at = next
        }
        return result
    }

    @Test("steps, ranges, lists and names")
    func fields() throws {
        #expect(
            try Self.ticks("*/20 9-10 * * mon-fri", after: "2026-11-27 08:00", count: 7)  // a Friday
                == ["09:00", "09:20", "09:40", "10:00", "10:20", "10:40"].map { Self.date("2026-11-27 \($0)") }
                + [Self.date("2026-11-30 09:00")])  // Monday
        #expect(
            try Self.ticks("0 0 1 jan,jul *", after: "2026-02-01 00:00", count: 2)
                == [Self.date("2026-07-01 00:00"), Self.date("2027-01-01 00:00")])
        #expect(try Self.ticks("@hourly", after: "2026-11-27 08:10", count: 1) == [Self.date("2026-11-27 09:00")])
        // Other crons' extensions are named, with what to do instead.
        for (text, words) in [
            ("@every 5m", "uses '@every', which this cron does not have"),
            ("@reboot", "submit the graph when your program starts"),
            ("@fortnightly", "it knows @yearly"),
            // Signs are not cron (Swift's `Int("+5")` read 5; a probe, 7 December 2026).
            ("+5 * * * *", "has '+5' in its minute field"),
            ("*/+5 * * * *", "has step '+5' in its minute field"),
            ("0 -1 * * *", "which is not a value, range or step"),
        ] {
            let error = #expect(throws: DurableError.self) { _ = try CronExpression(text) }
            #expect(error?.message.contains(words) == true, "\(String(describing: error?.message))")
        }
        #expect(try Self.ticks("0 12 * * 7", after: "2026-11-27 00:00", count: 1) == [Self.date("2026-11-29 12:00")])
    }

    @Test("a day of month and a day of week both restricted: either matches, as in Vixie cron")
    func dayOrWeekday() throws {
        // The 1st, or any Monday.
        #expect(
            try Self.ticks("0 0 1 * mon", after: "2026-11-27 00:00", count: 3)
                == [Self.date("2026-11-30 00:00"), Self.date("2026-12-01 00:00"), Self.date("2026-12-07 00:00")])
    }

    /// A step in a day field was ignored (the field starting with `*` counted as unrestricted): every
    /// other day fired every day. As in Vixie cron, a starred field is still a set, and a day must match
    /// both fields when either is starred.
    @Test("a step in the day-of-month or day-of-week field: every other day, not every day")
    func stepsInDayFields() throws {
        #expect(
            try Self.ticks("0 0 */2 * *", after: "2026-01-01 00:00", count: 3)
                == ["2026-01-03", "2026-01-05", "2026-01-07"].map { Self.date("\($0) 00:00") })
        // The 31st, then the 1st: the step starts again each month.
        #expect(
            try Self.ticks("0 0 */2 * *", after: "2026-01-30 00:00", count: 2)
                == ["2026-01-31", "2026-02-01"].map { Self.date("\($0) 00:00") })
        // Sunday, Tuesday, Thursday, Saturday (0, 2, 4, 6); 2026-11-30 is a Monday.
        #expect(
            try Self.ticks("0 0 * * */2", after: "2026-11-30 00:00", count: 3)
                == ["2026-12-01", "2026-12-03", "2026-12-05"].map { Self.date("\($0) 00:00") })
        // Mondays that fall on an odd day of the month.
        #expect(
            try Self.ticks("0 0 */2 * mon", after: "2026-11-27 00:00", count: 3)
                == ["2026-12-07", "2026-12-21", "2027-01-11"].map { Self.date("\($0) 00:00") })
        // 10-20/5 restricts the day of month: either field matches.
        #expect(
            try Self.ticks("0 0 10-20/5 * mon", after: "2026-11-30 00:00", count: 3)
                == ["2026-12-07", "2026-12-10", "2026-12-14"].map { Self.date("\($0) 00:00") })
    }

    @Test("a schedule stored before overlap existed reads as allowing overlaps; a new one keeps its setting")
    func overlapIsReadFromOlderDefinitions() throws {
        var schedule = Schedule(
            name: "s", timing: .every(.seconds(60)),
            graph: GraphSpec(name: "g", jobs: [JobSpec(name: "a", kind: "k", input: Data("1".utf8))]))
        schedule.overlap = .skip
        let stored = try schedule.stored()
        #expect(try Schedule.stored(stored, name: "s").overlap == .skip)
        var old = try #require(try JSONSerialization.jsonObject(with: Data(stored.utf8)) as? [String: Any])
        old["overlap"] = nil
        let older = String(decoding: try JSONSerialization.data(withJSONObject: old), as: UTF8.self)
        #expect(try Schedule.stored(older, name: "s").overlap == .allow)
        #expect(try Schedule.stored(older, name: "s").timing == schedule.timing)
    }

    @Test("the 31st runs only in months that have one; the 30th of February never")
    func monthsWithoutTheDay() throws {
        #expect(
            try Self.ticks("0 6 31 * *", after: "2026-01-31 07:00", count: 3)
                == [Self.date("2026-03-31 06:00"), Self.date("2026-05-31 06:00"), Self.date("2026-07-31 06:00")])
        #expect(try CronExpression("0 0 30 2 *").next(after: Self.date("2026-01-01 00:00")) == nil)
    }

    @Test("daylight saving: a skipped time fires after the jump, a repeated one once")
    func daylightSaving() throws {
        // New York: clocks go forward at 02:00 on 2026-03-08, back at 02:00 on 2026-11-01.
        let spring = try Self.ticks("30 2 * * *", Self.newYork, after: "2026-03-07 00:00", count: 3)
        #expect(spring[0] == Self.date("2026-03-07 02:30", Self.newYork))
        #expect(spring[1] == Self.date("2026-03-08 03:30", Self.newYork), "02:30 does not exist: 03:30")
        #expect(spring[2] == Self.date("2026-03-09 02:30", Self.newYork))
        let fall = try Self.ticks("30 1 * * *", Self.newYork, after: "2026-10-31 12:00", count: 2)
        #expect(fall[1].timeIntervalSince(fall[0]) == 25 * 3600, "01:30 on 2026-11-01 fires once (the first)")
        let hourly = try Self.ticks("30 * * * *", Self.newYork, after: "2026-11-01 00:00", count: 3)
        #expect(
            hourly.map { $0.timeIntervalSince(hourly[0]) } == [0, 3600, 3 * 3600],
            "00:30, 01:30 (first), then 02:30: the repeated 01:30 is not fired a second time")
    }

    /// Antarctica/Troll moves from UTC+0 to UTC+2 at 01:00 UTC on 2025-03-30: its 01:45 that day is
    /// 03:45, two hours past the margin a one-hour gap needed, and was skipped to the next day.
    @Test("daylight saving: a time skipped by a two-hour gap fires after the jump")
    func twoHourGap() throws {
        let troll = try #require(TimeZone(identifier: "Antarctica/Troll"))
        let expression = try CronExpression("45 1 * * *", timeZone: troll)
        let afterJump = Self.date("2025-03-30 01:00", Self.utc).addingTimeInterval(41)  // 03:00:41 there
        #expect(expression.next(after: afterJump) == Self.date("2025-03-30 03:45", troll))
        let ticks = try Self.ticks("45 1 * * *", troll, after: "2025-03-29 00:00", count: 3)
        #expect(
            ticks == [
                Self.date("2025-03-29 01:45", troll), Self.date("2025-03-30 03:45", troll),
                Self.date("2025-03-31 01:45", troll),
            ])
    }

    @Test("an expression read from a file, with its line end, is read as written")
    func lineEnd() throws {
        #expect(
            try CronExpression("0 0 * * *\n").next(after: Self.date("2026-01-01 12:00"))
                == Self.date("2026-01-02 00:00"))
        #expect(
            try CronExpression(" @daily\r\n").next(after: Self.date("2026-01-01 12:00"))
                == Self.date("2026-01-02 00:00"))
    }

    @Test("a bad expression is refused, naming the field and what it takes")
    func errors() throws {
        for (text, words) in [
            ("* * * *", "has 4 fields"), ("61 * * * *", "minute field"), ("* 24 * * *", "hour field"),
            ("* * 0 * *", "day-of-month field"), ("* * * foo *", "month field"), ("* * * * 8", "day-of-week field"),
            ("*/0 * * * *", "step '0'"), ("5-1 * * * *", "runs backwards"), ("1,,2 * * * *", "minute field"),
        ] {
            let error = #expect(throws: DurableError.self, "\(text)") { try CronExpression(text) }
            #expect(error?.message.contains(words) == true, "\(text): \(error?.message ?? "")")
        }
        let zone = #expect(throws: DurableError.self) {
            try Schedule(
                name: "s", timing: .cron("* * * * *", timeZone: "Mars/Olympus"), graph: GraphSpec(name: "g", jobs: [])
            ).validate()
        }
        #expect(zone?.message.contains("Mars/Olympus") == true)
        let graph = GraphSpec(name: "g", jobs: [])
        let empty = #expect(throws: DurableError.self) {
            try Schedule(name: "", timing: .every(.seconds(60)), graph: graph).validate()
        }
        #expect(empty?.message.contains("its name is empty") == true, "\(empty?.message ?? "")")
        let long = #expect(throws: DurableError.self) {
            try Schedule(name: String(repeating: "s", count: 1_000), timing: .every(.seconds(60)), graph: graph)
                .validate()
        }
        #expect(long?.message.contains("use a shorter name") == true, "\(long?.message ?? "")")
        #expect(throws: Never.self) {
            try Schedule(name: String(repeating: "s", count: 980), timing: .every(.seconds(60)), graph: graph)
                .validate()
        }
    }

    @Test("catching up: skip drops missed ticks, once runs the latest, all runs each")
    func catchUp() throws {
        let graph = GraphSpec(name: "g", jobs: [])
        func due(_ catchUp: Schedule.CatchUp, late: Double) throws -> [Date] {
            let schedule = Schedule(name: "s", timing: .every(.seconds(120)), graph: graph, catchUp: catchUp)
            let first = Date(timeIntervalSince1970: 1_200_000)
            return try schedule.due(next: first, now: first.addingTimeInterval(9 * 120 + late)).fire
        }
        #expect(try due(.skip, late: 90).isEmpty)
        #expect(try due(.skip, late: 30).count == 1)
        #expect(try due(.once, late: 90) == [Date(timeIntervalSince1970: 1_200_000 + 9 * 120)])
        #expect(try due(.all, late: 90).count == 10)
        // A week of one-second ticks missed: counted without walking them all.
        let fast = Schedule(name: "s", timing: .every(.seconds(1)), graph: graph, catchUp: .once)
        let start = Date(timeIntervalSince1970: 1_000_000)
        let (fire, next) = try fast.due(next: start, now: start.addingTimeInterval(7 * 86_400 + 0.5))
        #expect(fire == [start.addingTimeInterval(7 * 86_400)])
        #expect(next == start.addingTimeInterval(7 * 86_400 + 1))
        // `.all` fires 1,000 at most, and goes on from the 1,001st next time.
        let all = Schedule(name: "s", timing: .every(.seconds(1)), graph: graph, catchUp: .all)
        let (many, after) = try all.due(next: start, now: start.addingTimeInterval(5_000))
        #expect(many.count == 1_000 && many.last == start.addingTimeInterval(999))
        #expect(after == start.addingTimeInterval(1_000))
    }

    @Test("an interval that is not whole seconds still moves on at every tick")
    func fractionalInterval() throws {
        let schedule = Schedule(
            name: "s", timing: .every(.milliseconds(1_100)), graph: GraphSpec(name: "g", jobs: []))
        var tick = try #require(try schedule.tick(after: Date(timeIntervalSince1970: 1_000_000)))
        for _ in 0..<1_000 {
            let next = try #require(try schedule.tick(after: tick))
            #expect(next > tick)
            #expect(abs(next.timeIntervalSince(tick) - 1.1) < 1e-3, "one interval apart")
            tick = next
        }
    }
}
