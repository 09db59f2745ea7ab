import BatonCLI
import BatonDurable
import BatonObservability
import Foundation

/// Text made safe to put into HTML, in an element or in a quoted attribute. Every value the dashboard
/// shows that came from a store (names, kinds, errors, inputs, outputs, worker ids) goes through it.
enum HTML {
    static func escape(_ text: String) -> String { JobTimeline.htmlEscaped(text) }

    /// Text cut to `limit` characters with `…`, then escaped; the whole text is the element's tooltip.
    static func short(_ text: String, _ limit: Int = 80) -> String {
        guard text.count > limit else { return escape(text) }
        return "<span title=\"\(escape(String(text.prefix(2_000))))\">\(escape(String(text.prefix(limit - 1))))…</span>"
    }

    /// A query string from parameters whose values are present, percent-encoded.
    static func query(_ items: [(String, String?)]) -> String {
        var components = URLComponents()
        components.queryItems = items.compactMap { name, value in value.map { URLQueryItem(name: name, value: $0) } }
        guard let query = components.percentEncodedQuery, !query.isEmpty else { return "" }
        // `+` is a space in forms: encoded, so that a name with a plus sign comes back as it was.
        return "?" + query.replacingOccurrences(of: "+", with: "%2B")
    }

    /// Text as the hexadecimal digits of its UTF-8 bytes: a form field that no browser rewrites.
    static func hex(_ text: String) -> String {
        text.utf8.map { String($0 >> 4, radix: 16) + String($0 & 15, radix: 16) }.joined()
    }

    /// The text of ``hex(_:)``'s digits; nil for anything else.
    static func unhex(_ digits: String) -> String? {
        let values = digits.utf8.map { byte -> UInt8? in
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        guard values.count % 2 == 0, !values.contains(nil) else { return nil }
        let bytes = stride(from: 0, to: values.count, by: 2).map { values[$0]! << 4 | values[$0 + 1]! }
        return String(bytes: bytes, encoding: .utf8)
    }

    /// A coloured label for a state.
    static func badge(_ state: String) -> String {
        "<span class=\"badge \(escape(state))\">\(escape(state))</span>"
    }
}

/// How the dashboard writes times: in one time zone, to the second, with the age beside.
struct Clock: Sendable {
    var timeZone: TimeZone
    var now: @Sendable () -> Date

    func stamp(_ date: Date?) -> String {
        guard let date else { return "" }
        return
            "<time datetime=\"\(date.formatted(.iso8601))\">\(HTML.escape(TimeText.stamp(date, timeZone: timeZone)))</time>"
    }

    func duration(from start: Date, to end: Date?) -> String {
        guard let end else { return "running for " + TimeText.duration(now().timeIntervalSince(start)) }
        return TimeText.duration(end.timeIntervalSince(start))
    }
}

/// The page around each view: navigation, the store, whether actions are on, and the live-update script.
struct Layout: Sendable {
    var storeName: String
    var actions: Bool
    var timeZone: TimeZone

    func page(title: String, section: String, body: String, status: String = "") -> String {
        func link(_ path: String, _ name: String) -> String {
            "<a href=\"\(path)\"\(name == section ? " class=\"here\" aria-current=\"page\"" : "")>\(name)</a>"
        }
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(HTML.escape(title)) · Baton</title>
            <link rel="stylesheet" href="/assets/dashboard.css">
            <script src="/assets/live.js" defer></script>
            </head>
            <body>
            <header>
            <nav><strong>Baton</strong> \(link("/", "Runs")) \(link("/workers", "Workers")) \(link("/schedules", "Schedules"))</nav>
            <p class="store">\(HTML.escape(storeName)) · \(actions ? "actions on" : "read-only") · times in \(HTML.escape(timeZone.identifier))</p>
            </header>
            <main>
            \(status)
            \(body)
            </main>
            </body>
            </html>

            """
    }
}
