public import Foundation

/// Parses the `--since` option: a date, a date and time, or an age.
///
/// Accepted, and nothing else:
/// - `2018-06-14` (midnight UTC);
/// - `2018-06-14T09:00`, `2018-06-14 09:00`, with seconds (`09:00:30`) and a fraction
///   (`09:00:30.250`) if wanted — UTC unless a zone follows: `Z`, `+02:00`, `+0200`, `-07`;
/// - an age before now: `30min`, `24h`, `7d`, `2w`, `6mo` (a month is 30 days), `1y` (365 days);
///   decimals allowed (`1.5h`). `30m` is 30 minutes where it is accepted (`list --since`); `prune
///   --before` refuses it, since `6m` read as minutes deletes nearly everything (say `6min` or `6mo`).
///
/// ## Thread safety
/// Stateless.
public enum SinceParser {
    /// What the help and the errors show.
    public static let examples =
        "2018-06-14, 2018-06-14T09:00, \"2018-06-14 09:00:30\", 2018-06-14T09:00+02:00, 30min, 24h, 7d, 6mo, 1y"

    /// The moment `text` names, relative to `now` for ages.
    ///
    /// - Throws: ``CLIError`` (a usage error) that shows examples of the accepted forms.
    ///
    /// - Parameters:
    ///   - option: The option being read, for the message (`--since`, `--before`).
    ///   - bareMinutes: Whether `m` alone means minutes (`--since 30m`). When false (`prune --before`,
    ///     where reading a meant `6m` of months as minutes deletes nearly everything) it is a usage error
    ///     that asks for `min` or `mo`.
    public static func parse(
        _ text: String, now: Date, option: String = "--since", bareMinutes: Bool = true
    ) throws(CLIError) -> Date {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if !bareMinutes, let number = ageNumber(trimmed, unit: "m") {
            throw CLIError.usage(
                "\(option) \"\(text)\" is ambiguous: m could be minutes or months; say \(number)min for minutes or "
                    + "\(number)mo for months")
        }
        if let age = age(trimmed) {
            guard age <= longestAge else {
                throw CLIError.usage(
                    "\(option) \"\(text)\" reaches too far back: an age can be at most 3652500d (10,000 years); for example \(examples)"
                )
            }
            return now.addingTimeInterval(-age)
        }
        if let date = try moment(trimmed, original: text, option: option) { return date }
        throw CLIError.usage(
            "\(option) \"\(text)\" is not a date, a time or an age; for example \(examples) (times are UTC unless a zone is given)"
        )
    }

    /// The end of the time `text` names, for `--until`: events before it are kept. A date alone ends at the
    /// next midnight (UTC, or in its zone), so that its whole day is in (`--since 2019-07-04 --until
    /// 2019-07-06` is 4 to 6 July); a moment (a time, or an age) ends a millisecond after it, so that an
    /// event at that very moment is in too.
    ///
    /// - Throws: ``CLIError`` (a usage error), as ``parse(_:now:option:bareMinutes:)``.
    public static func parseEnd(_ text: String, now: Date, option: String = "--until") throws(CLIError) -> Date {
        let moment = try parse(text, now: now, option: option)
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let dateAlone =
            trimmed.utf8.count == 10
            && trimmed.utf8.enumerated().allSatisfy { index, byte in
                index == 4 || index == 7 ? byte == UInt8(ascii: "-") : (48...57).contains(byte)
            }
        return moment.addingTimeInterval(dateAlone ? 86_400 : 0.001)
    }

    /// The largest age accepted: 10,000 years (a time much further back, about 290 million years, cannot
    /// even be written as milliseconds since 1970).
    static let longestAge: TimeInterval = 3_652_500 * 86_400

    /// The seconds of each unit of an age. A month is 30 days and a year 365 (an age is a length of
    /// time, not a calendar date: for one, give the date).
    static let units: [String: TimeInterval] = [
        "m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400, "mo": 30 * 86_400, "y": 365 * 86_400,
    ]

    /// The number of an age written with `unit` (`6` of `6m`), or nil.
    private static func ageNumber(_ text: String, unit: String) -> Substring? {
        guard text.hasSuffix(unit) else { return nil }
        let number = text.dropLast(unit.count)
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            let count = Double(number), count.isFinite
        else { return nil }
        return number
    }

    private static func age(_ text: String) -> TimeInterval? {
        let unit = String(text.reversed().prefix { $0.isASCII && $0.isLetter }.reversed())
        guard let seconds = units[unit], let number = ageNumber(text, unit: unit) else { return nil }
        return Double(number)! * seconds
    }

    /// A date or date-time; nil when the text does not look like one; a usage error when it does
    /// but a field is out of range.
    private static func moment(_ text: String, original: String, option: String) throws(CLIError) -> Date? {
        var scanner = Scanner(Array(text.utf8))
        guard let year = scanner.digits(4), scanner.take("-"), let month = scanner.digits(2), scanner.take("-"),
            let day = scanner.digits(2)
        else { return nil }
        var hour = 0
        var minute = 0
        var second = 0
        var fraction = 0.0
        var offsetSeconds = 0
        if !scanner.atEnd {
            guard scanner.take("T") || scanner.take("t") || scanner.take(" ") else { return nil }
            guard let h = scanner.digits(2), scanner.take(":"), let m = scanner.digits(2) else { return nil }
            (hour, minute) = (h, m)
            if scanner.take(":") {
                guard let s = scanner.digits(2) else { return nil }
                second = s
                if scanner.take(".") {
                    guard let f = scanner.fraction() else { return nil }
                    fraction = f
                }
            }
            if !scanner.atEnd {
                guard let offset = scanner.zone() else { return nil }
                offsetSeconds = offset
            }
        }
        guard scanner.atEnd else { return nil }
        guard (1...12).contains(month), (1...CivilTime.daysIn(month: month, year: year)).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...59).contains(second)
        else {
            throw CLIError.usage(
                "\(option) \"\(original)\" is not a real date or time (month 1-12, day within the month, hour 0-23, minutes and seconds 0-59); for example \(examples)"
            )
        }
        let days = CivilTime.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// Reads ASCII bytes left to right.
    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }

        mutating func take(_ character: Character) -> Bool {
            guard !atEnd, let ascii = character.asciiValue, bytes[index] == ascii else { return false }
            index += 1
            return true
        }

        /// Exactly `count` decimal digits.
        mutating func digits(_ count: Int) -> Int? {
            guard index + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + count] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            index += count
            return value
        }

        /// One or more digits after a decimal point, as a fraction of one.
        mutating func fraction() -> Double? {
            var value = 0.0
            var scale = 1.0
            let start = index
            while !atEnd, (48...57).contains(bytes[index]) {
                scale /= 10
                value += Double(bytes[index] - 48) * scale
                index += 1
            }
            return index > start ? value : nil
        }

        /// `Z`, `+HH:MM`, `+HHMM` or `+HH` (or `-`): seconds east of UTC.
        mutating func zone() -> Int? {
            if take("Z") || take("z") { return 0 }
            let sign: Int
            if take("+") {
                sign = 1
            } else if take("-") {
                sign = -1
            } else {
                return nil
            }
            guard let hours = digits(2), hours <= 23 else { return nil }
            var minutes = 0
            if !atEnd {
                _ = take(":")
                guard let m = digits(2), m <= 59 else { return nil }
                minutes = m
            }
            return sign * (hours * 3600 + minutes * 60)
        }
    }
}
