/// Calendar arithmetic on the proleptic Gregorian calendar in UTC, without `Calendar`,
/// `DateFormatter` or `Locale`: `list` formats hundreds of thousands of times, and `--since`
/// must read exactly what was typed.
///
/// The day algorithms are Howard Hinnant's `days_from_civil` and `civil_from_days`.
///
/// ## Thread safety
/// Stateless.
enum CivilTime {
    /// Days from 1970-01-01 to the given date (negative before it).
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date of a day counted from 1970-01-01.
    static func date(days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// The number of days in a month.
    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Appends `yyyy-MM-dd HH:mm` (UTC) for milliseconds since 1970 to `text`, or
    /// `yyyy-MM-dd HH:mm:ss` when `seconds` is set.
    static func appendMinute(_ milliseconds: Int64, seconds: Bool = false, to text: inout String) {
        let totalSeconds = Int(milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000)
        let dayNumber = totalSeconds >= 0 ? totalSeconds / 86_400 : (totalSeconds - 86_399) / 86_400
        let secondOfDay = totalSeconds - dayNumber * 86_400
        let (year, month, day) = date(days: dayNumber)
        appendPadded(year, 4, to: &text)
        text.append("-")
        appendPadded(month, 2, to: &text)
        text.append("-")
        appendPadded(day, 2, to: &text)
        text.append(" ")
        appendPadded(secondOfDay / 3600, 2, to: &text)
        text.append(":")
        appendPadded(secondOfDay / 60 % 60, 2, to: &text)
        if seconds {
            text.append(":")
            appendPadded(secondOfDay % 60, 2, to: &text)
        }
    }

    /// `yyyy-MM-dd HH:mm` (UTC).
    static func minute(_ milliseconds: Int64) -> String {
        var text = ""
        appendMinute(milliseconds, to: &text)
        return text
    }

    /// `value` with at least `width` digits; a negative one (a year of ISO 8601's count, where 0 is 1 BC)
    /// with its sign before the padding: -44 → `-0044`, not `0-44`.
    private static func appendPadded(_ value: Int, _ width: Int, to text: inout String) {
        if value < 0 { text.append("-") }
        let digits = String(value.magnitude)
        if digits.count < width { text.append(String(repeating: "0", count: width - digits.count)) }
        text.append(digits)
    }
}
