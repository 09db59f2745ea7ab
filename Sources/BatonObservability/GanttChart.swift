/// Draws a ``JobTimeline``'s entries as an SVG Gantt chart (see ``JobTimeline/html(title:rowLimit:)``).
struct GanttChart {
    let entries: [JobTimeline.Entry]
    /// The last instant drawn, in nanoseconds.
    let end: UInt64
    /// Lanes per queue instead of a row per job.
    let packed: Bool

    static let labelWidth = 250.0
    static let chartWidth = 1000.0
    static let rowHeight = 14.0
    static let laneHeight = 11.0
    static let top = 62.0

    static let colors: [String: String] = [
        "succeeded": "#3a9d5d", "failed": "#d9534f", "cancelled": "#9e9e9e", "running": "#5b8def",
        "snoozed": "#e0a030",
    ]

    /// Where each job was drawn: the centre of its row, for the dependency arrows.
    private var rowCenter: [UInt64: Double] = [:]
    private var body = ""
    private var y = GanttChart.top

    /// When each job finished (or `end`), for the arrows that leave it.
    private let finishedAt: [UInt64: UInt64]

    init(entries: [JobTimeline.Entry], end: UInt64, packed: Bool) {
        self.entries = entries
        self.end = end
        self.packed = packed
        var finishedAt: [UInt64: UInt64] = [:]
        for entry in entries { finishedAt[entry.id] = entry.finished ?? end }
        self.finishedAt = finishedAt
    }

    func x(_ nanos: UInt64) -> Double { Self.labelWidth + 10 + Double(nanos) / Double(end) * Self.chartWidth }

    mutating func render() -> String {
        // Sections: queues in order of first use (packed: queues of the same name together).
        var order: [String] = []
        var sections: [String: [JobTimeline.Entry]] = [:]
        for entry in entries {
            let key = packed || entry.queueInstance == 1 ? entry.queue : "\(entry.queue) #\(entry.queueInstance)"
            if sections[key] == nil { order.append(key) }
            sections[key, default: []].append(entry)
        }
        // Rows first (they decide where each job is), then each job's arrows to its dependencies.
        var jobs: [(entry: JobTimeline.Entry, shapes: String)] = []
        for key in order {
            let members = sections[key]!
            sectionHeader(key, members)
            if packed { jobs += packedRows(members) } else { jobs += detailRows(members) }
            y += 6
        }
        for (entry, shapes) in jobs {
            body += "<g class=\"job\" data-id=\"\(entry.id)\">\(shapes)\(arrows(to: entry))</g>\n"
        }
        let height = y + 10
        let width = Self.labelWidth + Self.chartWidth + 40
        return """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(fmt(width))" height="\(fmt(height))" viewBox="0 0 \(fmt(width)) \(fmt(height))">
            <defs>
            <pattern id="wait" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f6e3b4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#d8b45e" stroke-width="2"/></pattern>
            <marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker>
            </defs>
            \(legend())
            \(axis(height: height))
            \(body)</svg>
            """
    }

    // MARK: Parts

    private func legend() -> String {
        var out = "<g class=\"legend\">"
        var x = 0.0
        func item(_ fill: String, _ text: String) {
            out +=
                "<rect x=\"\(fmt(x))\" y=\"4\" width=\"14\" height=\"10\" fill=\"\(fill)\"/><text x=\"\(fmt(x + 18))\" y=\"13\">\(escape(text))</text>"
            x += 30 + Double(text.count) * 5.6
        }
        item(Self.colors["succeeded"]!, "succeeded")
        item(Self.colors["failed"]!, "failed")
        item(Self.colors["cancelled"]!, "cancelled")
        // (Only durable attempts snooze: shown when one did.)
        if entries.contains(where: { $0.outcome == .snoozed }) { item(Self.colors["snoozed"]!, "snoozed") }
        item(Self.colors["running"]!, "still running")
        item("#e6e6e6", "waiting for dependencies or conditions")
        item("url(#wait)", "ready, waiting for a slot")
        out +=
            "<line x1=\"\(fmt(x))\" y1=\"3\" x2=\"\(fmt(x))\" y2=\"15\" stroke=\"#8e44ad\" stroke-width=\"2\"/><text x=\"\(fmt(x + 6))\" y=\"13\">mark (claimed, lease lost, retried)</text>"
        return out + "</g>"
    }

    private func axis(height: Double) -> String {
        // About ten ticks at 1, 2 or 5 times a power of ten.
        let raw = max(end / 10, 1)
        var magnitude: UInt64 = 1
        while magnitude * 10 <= raw { magnitude *= 10 }
        let step = [1, 2, 5, 10].map { $0 * magnitude }.first { $0 >= raw } ?? magnitude * 10
        var out = "<g class=\"axis\">"
        out +=
            "<line x1=\"\(fmt(x(0)))\" y1=\"44\" x2=\"\(fmt(x(end)))\" y2=\"44\" stroke=\"#333\"/><text x=\"0\" y=\"40\">time since the timeline began</text>"
        var tick: UInt64 = 0
        while tick <= end {
            let at = fmt(x(tick))
            out +=
                "<line x1=\"\(at)\" y1=\"40\" x2=\"\(at)\" y2=\"\(fmt(height - 6))\" stroke=\"#ececec\"/><line x1=\"\(at)\" y1=\"40\" x2=\"\(at)\" y2=\"48\" stroke=\"#333\"/><text x=\"\(at)\" y=\"36\" text-anchor=\"middle\">\(tick == 0 ? "0" : formatDuration(tick))</text>"
            tick += step
        }
        return out + "</g>"
    }

    private mutating func sectionHeader(_ name: String, _ members: [JobTimeline.Entry]) {
        let failed = members.filter { $0.outcome == .failed }.count
        let cancelled = members.filter { $0.outcome == .cancelled }.count
        var text = "queue \(name): \(members.count) job\(members.count == 1 ? "" : "s")"
        if failed > 0 { text += ", \(failed) failed" }
        if cancelled > 0 { text += ", \(cancelled) cancelled" }
        body +=
            "<rect x=\"0\" y=\"\(fmt(y))\" width=\"\(fmt(Self.labelWidth + Self.chartWidth + 20))\" height=\"16\" fill=\"#f4f6f8\"/><text class=\"section\" x=\"4\" y=\"\(fmt(y + 12))\">\(escape(text))</text>\n"
        y += 18
    }

    /// One row per job: label, the waits, the run, marks.
    private mutating func detailRows(_ members: [JobTimeline.Entry]) -> [(JobTimeline.Entry, String)] {
        var rows: [(JobTimeline.Entry, String)] = []
        for entry in members {
            let top = y
            let mid = top + Self.rowHeight / 2
            rowCenter[entry.id] = mid
            let label = entry.name.count > 40 ? String(entry.name.prefix(39)) + "…" : entry.name
            var shapes = "<title>\(escape(tooltip(entry)))</title>"
            shapes +=
                "<text class=\"label\" x=\"\(entry.group == nil ? 8 : 18)\" y=\"\(fmt(top + 11))\">\(escape(label))</text>"
            let barTop = fmt(top + 2)
            let barHeight = fmt(Self.rowHeight - 4)
            let finished = entry.finished ?? end
            let waitEnd = entry.ready ?? entry.started ?? finished
            if waitEnd > entry.added {
                shapes += rect(entry.added, waitEnd, barTop, barHeight, fill: "#e6e6e6")
            }
            if let ready = entry.ready, (entry.started ?? finished) > ready {
                shapes += rect(ready, entry.started ?? finished, barTop, barHeight, fill: "url(#wait)")
            }
            shapes += runShape(entry, top: top, height: Self.rowHeight)
            rows.append((entry, shapes))
            y += Self.rowHeight
        }
        return rows
    }

    /// Lanes: a plot of the ready jobs, then each job on the first lane free when it started.
    private mutating func packedRows(_ members: [JobTimeline.Entry]) -> [(JobTimeline.Entry, String)] {
        var rows: [(JobTimeline.Entry, String)] = []
        // How many jobs were ready but not started, over time: a step plot.
        var changes: [(UInt64, Int)] = []
        for entry in members {
            guard let ready = entry.ready else { continue }
            changes.append((ready, 1))
            changes.append((entry.started ?? entry.finished ?? end, -1))
        }
        changes.sort { $0.0 < $1.0 || ($0.0 == $1.0 && $0.1 < $1.1) }
        var count = 0
        var highest = 0
        var points: [(UInt64, Int)] = [(0, 0)]
        for (at, change) in changes {
            count += change
            highest = max(highest, count)
            points.append((at, count))
        }
        let plotHeight = 26.0
        let base = y + plotHeight
        if highest > 0 {
            var path = "M\(fmt(x(0))),\(fmt(base))"
            var last = 0
            for (at, value) in points {
                path += " L\(fmt(x(at))),\(fmt(base - Double(last) / Double(highest) * (plotHeight - 2)))"
                path += " L\(fmt(x(at))),\(fmt(base - Double(value) / Double(highest) * (plotHeight - 2)))"
                last = value
            }
            path += " L\(fmt(x(end))),\(fmt(base)) Z"
            body +=
                "<path d=\"\(path)\" fill=\"#f6e3b4\" stroke=\"#d8b45e\"/><text x=\"8\" y=\"\(fmt(y + 17))\">ready, waiting for a slot (max \(highest))</text>\n"
            y += plotHeight + 2
        }
        // Lanes by first fit over the runs, in start order.
        let ran = members.filter { $0.started != nil }.sorted { $0.started! < $1.started! }
        var laneEnds: [UInt64] = []
        var lanes: [UInt64: Int] = [:]
        for entry in ran {
            let finished = entry.finished ?? end
            if let free = laneEnds.firstIndex(where: { $0 <= entry.started! }) {
                laneEnds[free] = finished
                lanes[entry.id] = free
            } else {
                laneEnds.append(finished)
                lanes[entry.id] = laneEnds.count - 1
            }
        }
        let lanesTop = y
        for lane in laneEnds.indices {
            body +=
                "<text x=\"8\" y=\"\(fmt(lanesTop + Double(lane) * Self.laneHeight + 9))\">lane \(lane)</text>\n"
        }
        for entry in ran {
            let top = lanesTop + Double(lanes[entry.id]!) * Self.laneHeight
            rowCenter[entry.id] = top + Self.laneHeight / 2
            rows.append(
                (entry, "<title>\(escape(tooltip(entry)))</title>" + runShape(entry, top: top, height: Self.laneHeight))
            )
        }
        y = lanesTop + Double(laneEnds.count) * Self.laneHeight
        let unrun = members.filter { $0.started == nil }
        if !unrun.isEmpty {
            body += "<text x=\"8\" y=\"\(fmt(y + 9))\">not run (\(unrun.count))</text>\n"
            for entry in unrun {
                rowCenter[entry.id] = y + Self.laneHeight / 2
                rows.append(
                    (
                        entry,
                        "<title>\(escape(tooltip(entry)))</title>" + runShape(entry, top: y, height: Self.laneHeight)
                    ))
            }
            y += Self.laneHeight
        }
        return rows
    }

    /// The run's bar (or, for a job that never ran, a tick where it finished) and the marks.
    private func runShape(_ entry: JobTimeline.Entry, top: Double, height: Double) -> String {
        let color = Self.colors[entry.outcome?.rawValue ?? "running"]!
        var out = ""
        if let started = entry.started {
            out += rect(
                started, entry.finished ?? end, fmt(top + 1), fmt(height - 2), fill: color, classes: "run")
        } else {
            let at = fmt(x(entry.finished ?? end))
            out +=
                "<rect class=\"run\" x=\"\(at)\" y=\"\(fmt(top + 1))\" width=\"3\" height=\"\(fmt(height - 2))\" fill=\"\(color)\"/>"
        }
        for mark in entry.marks {
            let at = fmt(x(mark.at))
            out +=
                "<line x1=\"\(at)\" y1=\"\(fmt(top))\" x2=\"\(at)\" y2=\"\(fmt(top + height))\" stroke=\"#8e44ad\" stroke-width=\"2\"><title>\(escape(mark.kind.rawValue))</title></line>"
        }
        return out
    }

    private func rect(
        _ from: UInt64, _ to: UInt64, _ top: String, _ height: String, fill: String, classes: String? = nil
    ) -> String {
        // At least a pixel wide, growing leftwards at the chart's right edge (a job that started as the
        // picture was made), never past it.
        let right = x(to)
        let left = min(x(from), x(end) - 1)
        let width = max(right - left, 1)
        let cls = classes.map { " class=\"\($0)\"" } ?? ""
        return
            "<rect\(cls) x=\"\(fmt(left))\" y=\"\(top)\" width=\"\(fmt(width))\" height=\"\(height)\" fill=\"\(fill)\"/>"
    }

    /// Arrows from the end of each dependency drawn to where this job began to run (or stopped waiting).
    private func arrows(to entry: JobTimeline.Entry) -> String {
        guard let toY = rowCenter[entry.id] else { return "" }
        let toX = x(entry.started ?? entry.ready ?? entry.finished ?? end)
        var paths = ""
        for dependency in entry.dependencies {
            guard let fromY = rowCenter[dependency], let from = finishedAt[dependency] else { continue }
            let fromX = x(from)
            let bend = max(abs(toX - fromX) / 2, 12)
            paths +=
                "<path d=\"M\(fmt(fromX)),\(fmt(fromY)) C\(fmt(fromX + bend)),\(fmt(fromY)) \(fmt(toX - bend)),\(fmt(toY)) \(fmt(toX)),\(fmt(toY))\" fill=\"none\" stroke=\"#333\" stroke-width=\"1.2\" marker-end=\"url(#arrow)\"/>"
        }
        return paths.isEmpty ? "" : "<g class=\"deps\">\(paths)</g>"
    }

    private func tooltip(_ entry: JobTimeline.Entry) -> String {
        var lines = ["\(entry.name) (\(entry.kind) #\(entry.id))", "queue \(entry.queue)"]
        lines.append("outcome: \(entry.outcome?.rawValue ?? "still running")")
        lines.append("added at \(formatDuration(entry.added))")
        if let ready = entry.ready { lines.append("ready at \(formatDuration(ready))") }
        if let started = entry.started {
            lines.append("started at \(formatDuration(started)) on slot \(entry.slot ?? 0)")
            if let ready = entry.ready, started >= ready {
                lines.append("waited for a slot \(formatDuration(started - ready))")
            }
        }
        if let finished = entry.finished {
            lines.append("finished at \(formatDuration(finished))")
            if let started = entry.started { lines.append("ran \(formatDuration(finished - started))") }
        }
        if !entry.dependencies.isEmpty { lines.append("waited for \(entry.dependencies.count) job(s)") }
        for mark in entry.marks { lines.append("\(mark.kind.rawValue) at \(formatDuration(mark.at))") }
        return lines.joined(separator: "\n")
    }
}

/// A coordinate with at most one decimal.
func fmt(_ value: Double) -> String {
    let rounded = (value * 10).rounded() / 10
    return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
}
