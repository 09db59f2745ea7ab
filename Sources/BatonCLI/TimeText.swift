public import Foundation

/// Reading and writing times for people: `--since` and `--before` take an age (`30m`, `12h`, `7d`, `2w`)
/// or a date (`2026-11-01`, `2026-11-01T08:00:00Z`); tables show times in the tool's time zone and
/// durations in the largest units that matter.
public enum TimeText {
    /// The moment `text` means, `now` being now.
    ///
    /// - Throws: A usage ``BatonCLIError`` naming `option` and the accepted forms.
    public static func moment(
        _ text: String, now: Date, timeZone: TimeZone, option: String
    ) throws(BatonCLIError)
        -> Date
    {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let ageForms =
            "give an age (90s, 30m, 12h, 7d, 2w) or a date (2026-11-01, 2026-11-01 08:00, 2026-11-01T08:00:00Z)"
        // An age: a plain decimal number (no exponent, sign or hexadecimal: `1e10w` is not an age) and a
        // unit. `m` is minutes; `M` is refused, not read as minutes: elsewhere it means months, and
        // `prune --before 5M` would have deleted all but five minutes' runs.
        if let last = trimmed.last, trimmed.count > 1,
            trimmed.dropLast().allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") })
        {
            let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800]
            guard last != "M" else {
                throw .usage("\(option) '\(text)': M is not a unit here; say m for minutes, or days (180d) for months")
            }
            if let seconds = units[Character(last.lowercased())], let amount = Double(trimmed.dropLast()) {
                // At most 10,000 years back: a date beyond that cannot be shown.
                guard amount * seconds <= 10_000 * 365.25 * 86_400 else {
                    throw .usage("\(option) '\(text)': an age of more than 10,000 years")
                }
                return now.addingTimeInterval(-amount * seconds)
            }
        }
        let withTime = ISO8601DateFormatter()
        withTime.formatOptions = [.withInternetDateTime]
        if let date = withTime.date(from: trimmed) { return date }
        withTime.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = withTime.date(from: trimmed) { return date }
        let day = DateFormatter()
        day.locale = Locale(identifier: "en_US_POSIX")
        day.timeZone = timeZone
        for format in [
            "yyyy-MM-dd", "yyyy-MM-dd HH:mm", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd'T'HH:mm:ss",
        ] {
            day.dateFormat = format
            if let date = day.date(from: trimmed) { return date }
        }
        throw .usage("\(option) '\(text)': \(ageForms)")
    }

    /// `2026-11-28 11:02:03` in `timeZone`.
    public static func stamp(_ date: Date, timeZone: TimeZone) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = timeZone
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: date)
    }

    /// `850 ms`, `4.2 s`, `3 min 4 s`, `2 h 5 min`, `3 d 4 h`.
    public static func duration(_ seconds: TimeInterval) -> String {
        // A time the store holds far out of range (a hand edit, a worker's wrong clock) is shown capped,
        // not converted past `Int` (a trap that took the dashboard's server down with it).
        guard !seconds.isNaN else { return "unknown" }
        let seconds = max(0, seconds)
        if seconds >= 1e15 { return "over 10,000,000,000 d" }
        if seconds < 1 { return "\(Int((seconds * 1000).rounded())) ms" }
        if seconds < 60 { return String(format: "%.1f s", seconds) }
        let whole = Int(seconds.rounded())
        if whole < 3_600 { return "\(whole / 60) min \(whole % 60) s" }
        if whole < 86_400 { return "\(whole / 3_600) h \(whole % 3_600 / 60) min" }
        return "\(whole / 86_400) d \(whole % 86_400 / 3_600) h"
    }

    /// A user's text made safe for a terminal: control characters (escape sequences among them) are
    /// shown as `\u{1B}`, never sent; a line break as `\n`.
    public static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case _
            where scalar.properties.generalCategory == .control
                || scalar.properties.generalCategory == .format
                    && scalar.value != 0x200D:
                out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
