public import Foundation

/// A standard five-field cron expression — minute, hour, day of month, month, day of week — read in a
/// time zone.
///
/// Each field is `*`, a number, a range `a-b`, a list `a,b,c`, or any of these with a step (`*/15`,
/// `8-18/2`). Months may be named (`jan`…`dec`) and days of the week too (`sun`…`sat`; 0 and 7 are
/// Sunday). As in Vixie cron, when both the day of month and the day of week are restricted (neither
/// starts with `*`), a day matching either one matches; otherwise a day must match both (`0 0 */2 * *`
/// is the 1st, 3rd, 5th… of each month, `0 0 */2 * mon` the Mondays among those). `@hourly`, `@daily` (`@midnight`), `@weekly`, `@monthly` and
/// `@yearly` (`@annually`) are accepted too.
///
/// Times are wall-clock times in the zone. A time that a daylight-saving change skips (02:30 on the
/// night clocks go forward) fires when the clock reaches it after the jump (03:30); a time that
/// happens twice (01:30 on the night they go back) fires once, the first time.
public struct CronExpression: Hashable, Sendable, CustomStringConvertible {
    public let text: String
    public let timeZone: TimeZone
    let minutes: Set<Int>
    let hours: Set<Int>
    let days: Set<Int>
    let months: Set<Int>
    /// 0 = Sunday … 6 = Saturday.
    let weekdays: Set<Int>
    /// Whether the day-of-month / day-of-week field starts with `*` (`*`, `*/2`): Vixie cron's rule for
    /// matching one field or both.
    let daysStarred: Bool
    let weekdaysStarred: Bool

    /// - Throws: ``DurableError/Code/invalidGraph`` naming the field that is wrong and what it accepts.
    public init(_ text: String, timeZone: TimeZone = TimeZone(identifier: "UTC")!) throws {
        self.text = text
        self.timeZone = timeZone
        let macros = [
            "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
            "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
        ]
        // (Spaces, tabs and line ends separate fields: an expression read from a file ends in one.)
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        let expanded = macros[trimmed] ?? text
        // Other crons' extensions (`@every 5m`, `@reboot`) said only how many fields they have.
        if macros[trimmed] == nil, trimmed.hasPrefix("@") {
            let word = trimmed.prefix { !$0.isWhitespace }
            let instead =
                word == "@every"
                ? "; for a fixed interval, schedule with every: (schedule(name:every:graph:)) instead"
                : word == "@reboot"
                    ? "; a schedule fires on a clock, never at a start: submit the graph when your program starts" : ""
            throw Self.invalid(
                text,
                "uses '\(word)', which this cron does not have (it knows @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly)\(instead)"
            )
        }
        let fields = expanded.split(whereSeparator: \.isWhitespace).map(String.init)
        guard fields.count == 5 else {
            throw Self.invalid(
                text,
                "has \(fields.count) field\(fields.count == 1 ? "" : "s"); a cron expression has 5: minute hour day-of-month month day-of-week (for example '*/15 9-17 * * mon-fri')"
            )
        }
        let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        let weekdays = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
        minutes = try Self.field(fields[0], "minute", 0...59, names: [:], in: text)
        hours = try Self.field(fields[1], "hour", 0...23, names: [:], in: text)
        days = try Self.field(fields[2], "day-of-month", 1...31, names: [:], in: text)
        self.months = try Self.field(
            fields[3], "month", 1...12,
            names: Dictionary(uniqueKeysWithValues: months.enumerated().map { ($1, $0 + 1) }), in: text)
        let weekdaySet = try Self.field(
            fields[4], "day-of-week", 0...7,
            names: Dictionary(uniqueKeysWithValues: weekdays.enumerated().map { ($1, $0) }), in: text)
        self.weekdays = Set(weekdaySet.map { $0 % 7 })
        daysStarred = fields[2].hasPrefix("*")
        weekdaysStarred = fields[4].hasPrefix("*")
    }

    public var description: String { "\(text) (\(timeZone.identifier))" }

    private static func invalid(_ text: String, _ why: String) -> DurableError {
        DurableError(code: .invalidGraph, message: "cron expression '\(text)' \(why).")
    }

    private static func field(
        _ text: String, _ name: String, _ range: ClosedRange<Int>, names: [String: Int], in expression: String
    ) throws -> Set<Int> {
        func value(_ part: Substring) throws -> Int {
            // Digits only: Swift's `Int("+5")` is 5, which cron does not accept.
            if part.allSatisfy(\.isASCIIDigitCharacter), let number = Int(part), range.contains(number) {
                return number
            }
            if let named = names[part.lowercased()] { return named }
            throw invalid(
                expression,
                "has '\(part)' in its \(name) field, which takes \(range.lowerBound)-\(range.upperBound)\(names.isEmpty ? "" : " or names (\(names.sorted { $0.value < $1.value }.prefix(3).map(\.key).joined(separator: ", "))…)")"
            )
        }
        var result = Set<Int>()
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = item.split(separator: "/", omittingEmptySubsequences: false)
            guard (1...2).contains(pieces.count), !pieces[0].isEmpty else {
                throw invalid(expression, "has '\(item)' in its \(name) field, which is not a value, range or step")
            }
            var step = 1
            if pieces.count == 2 {
                guard pieces[1].allSatisfy(\.isASCIIDigitCharacter), let parsed = Int(pieces[1]), parsed > 0 else {
                    throw invalid(
                        expression, "has step '\(pieces[1])' in its \(name) field; a step is a positive number")
                }
                step = parsed
            }
            let bounds: ClosedRange<Int>
            if pieces[0] == "*" {
                bounds = range
            } else if let dash = pieces[0].firstIndex(of: "-") {
                guard dash != pieces[0].startIndex, dash != pieces[0].index(before: pieces[0].endIndex) else {
                    throw invalid(
                        expression, "has '\(item)' in its \(name) field, which is not a value, range or step")
                }
                let low = try value(pieces[0][..<dash])
                let high = try value(pieces[0][pieces[0].index(after: dash)...])
                guard low <= high else {
                    throw invalid(expression, "has the range '\(pieces[0])' in its \(name) field, which runs backwards")
                }
                bounds = low...high
            } else {
                let single = try value(pieces[0])
                bounds = single...(pieces.count == 2 ? range.upperBound : single)
            }
            result.formUnion(stride(from: bounds.lowerBound, through: bounds.upperBound, by: step))
        }
        return result
    }

    /// The first time strictly after `date` that the expression matches, or nil when none comes within
    /// five years (`0 0 30 2 *`: February never has a 30th).
    public func next(after date: Date) -> Date? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let sortedHours = hours.sorted()
        let sortedMinutes = minutes.sorted()
        var day = calendar.startOfDay(for: date)
        // On the first day, hours well before the date's own are not tried: catching up minute by minute
        // would otherwise retry a whole day each time. The margin covers a daylight-saving change's gap,
        // whose skipped times come out moved forward by it (the widest in use, Antarctica/Troll's, is two
        // hours: its 01:45 is 03:45 on the day of the change, which a one-hour margin never tried).
        let firstHour = calendar.component(.hour, from: date) - 3
        var isFirstDay = true
        for _ in 0..<(366 * 5) {
            let parts = calendar.dateComponents([.year, .month, .day, .weekday], from: day)
            guard let year = parts.year, let month = parts.month, let dayOfMonth = parts.day,
                let weekday = parts.weekday
            else { return nil }
            // (A field that starts with `*` was read as a set too: `*` is every day, `*/2` every other one.
            // Taking `*/2` as `*` fired every day.)
            let dayMatches =
                daysStarred || weekdaysStarred
                ? days.contains(dayOfMonth) && weekdays.contains(weekday - 1)
                : days.contains(dayOfMonth) || weekdays.contains(weekday - 1)
            if months.contains(month) && dayMatches {
                for hour in sortedHours where !isFirstDay || hour >= firstHour {
                    for minute in sortedMinutes {
                        let wanted = DateComponents(
                            year: year, month: month, day: dayOfMonth, hour: hour, minute: minute)
                        // A skipped time comes out moved forward by the gap; a repeated one as its first instant.
                        guard let candidate = calendar.date(from: wanted) else { continue }
                        if candidate > date { return candidate }
                    }
                }
            }
            isFirstDay = false
            guard let following = calendar.date(byAdding: .day, value: 1, to: day) else { return nil }
            day = calendar.startOfDay(for: following)
        }
        return nil
    }
}

extension Character {
    /// 0-9.
    fileprivate var isASCIIDigitCharacter: Bool { isASCII && isWholeNumber }
}
