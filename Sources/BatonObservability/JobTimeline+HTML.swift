extension JobTimeline {
    /// A self-contained HTML page (inline SVG and CSS; no script, no network) with a Gantt chart of
    /// the run.
    ///
    /// Jobs are grouped by queue (a group's children are on the queue `"<group>.children"`, right
    /// after it). A job's bar is coloured by its outcome; before it, the time it waited for its
    /// dependencies and conditions is light grey and the time it was ready but waited for a slot is
    /// shaded. Hovering over a job shows its details and arrows from the jobs it depended on. A legend
    /// and the time axis are at the top.
    ///
    /// With at most `rowLimit` jobs, each job has its own row. With more, each queue's jobs are
    /// packed into lanes (a job goes on the first lane free when it starts, so there are as many lanes
    /// as jobs ran at once), under a row that plots how many jobs were ready and waiting for a slot;
    /// jobs that never ran are ticks on a row of their own. That keeps 10,000 jobs readable.
    ///
    /// As in ``chromeTraceJSON()``, a job still running when this is called ends at the call; the time
    /// axis reaches the last instant recorded (a mark after a job finished included).
    public func html(title: String = "Baton timeline", rowLimit: Int = 400) -> String {
        let chart = chart(rowLimit: rowLimit)
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <title>\(escape(title))</title>
            <style>
            body { font: 13px -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 16px; color: #222; }
            h1 { font-size: 18px; margin: 0 0 4px; }
            p.summary { margin: 0 0 12px; color: #555; }
            \(Self.chartStyle)
            </style>
            </head>
            <body>
            <h1>\(escape(title))</h1>
            <p class="summary">\(escape(chart.summary)). Hover over a job for details and the jobs it waited for.</p>
            \(chart.svg)
            </body>
            </html>

            """
    }

    /// The chart of ``html(title:rowLimit:)`` alone, for a page of another's: its SVG element (to be
    /// styled by ``chartStyle``) and a one-line summary ("12 jobs (10 succeeded, 2 failed) in 3.1 s"),
    /// plain text to escape where it is shown.
    public func chart(rowLimit: Int = 400) -> (svg: String, summary: String) {
        let entries = entries
        let now = elapsed
        let end = max(entries.map { Self.lastInstant(of: $0, now: now) }.max() ?? 0, 1)
        var chart = GanttChart(entries: entries, end: end, packed: entries.count > rowLimit)
        let svg = chart.render()
        let counts = Dictionary(grouping: entries, by: { $0.outcome?.rawValue ?? "running" }).mapValues(\.count)
        let summary = ["succeeded", "failed", "cancelled", "snoozed", "running"].compactMap { key in
            counts[key].map { "\($0) \(key)" }
        }.joined(separator: ", ")
        return (svg, "\(entries.count) jobs (\(summary)) in \(formatDuration(end))")
    }

    /// The CSS rules the chart's SVG needs (its text, and the arrows and highlight shown on hover).
    public static let chartStyle = """
        svg text { font: 11px -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; fill: #333; }
        svg text.section { font-weight: bold; }
        svg .deps { visibility: hidden; pointer-events: none; }
        svg .job:hover .deps { visibility: visible; }
        svg .job:hover .run { stroke: #000; stroke-width: 1; }
        svg .job:hover .label { font-weight: bold; }
        """
}

extension JobTimeline {
    /// The last instant of `entry` to draw: its finish (`now` while it runs), or a later mark.
    static func lastInstant(of entry: Entry, now: UInt64) -> UInt64 {
        var last = max(entry.finished ?? now, entry.added, entry.ready ?? 0, entry.started ?? 0)
        for mark in entry.marks { last = max(last, mark.at) }
        return last
    }
}

extension JobTimeline {
    /// Text made safe for HTML and XML, in an element or a quoted attribute, as the page escapes every
    /// name: `&<>"'` as entities, control characters (which XML does not allow) as `\u{1B}`.
    public static func htmlEscaped(_ text: String) -> String { escape(text) }
}

/// Escapes text for HTML and XML. Control characters, which XML does not allow (a terminal's escape
/// sequences in a job's name), are written out as `\u{1B}`; so are the C1 controls and the invisible
/// characters that change how text around them reads — direction marks and overrides (a job named
/// `\u{202E}txt.exe` showed as `exe.txt`, and pulled the next badge into a run's name) and the zero-width
/// space and word joiners. Tabs, line breaks and the zero-width joiner and non-joiner stay: emoji
/// sequences (👩‍💻) and Persian and Indic spelling need them.
func escape(_ text: String) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for scalar in text.unicodeScalars {
        switch scalar {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        case "'": out += "&#39;"
        case "\u{0}"..."\u{8}", "\u{B}", "\u{C}", "\u{E}"..."\u{1F}", "\u{7F}"..."\u{9F}", "\u{61C}",
            "\u{200B}", "\u{200E}", "\u{200F}", "\u{202A}"..."\u{202E}", "\u{2060}"..."\u{2069}", "\u{FEFF}":
            out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// `1.5 ms`, `2.25 s`, `840 µs`.
func formatDuration(_ nanos: UInt64) -> String {
    let value = Double(nanos)
    func trimmed(_ number: Double, _ unit: String) -> String {
        let rounded = (number * 100).rounded() / 100
        let text = rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
        return text + " " + unit
    }
    if value >= 1e9 { return trimmed(value / 1e9, "s") }
    if value >= 1e6 { return trimmed(value / 1e6, "ms") }
    if value >= 1e3 { return trimmed(value / 1e3, "µs") }
    return "\(nanos) ns"
}
