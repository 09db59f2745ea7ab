import BatonDurable
import Foundation

/// The dependency graph of a run as inline SVG: each job a box coloured by its state, in columns by
/// depth (a job stands right of every job it waits for), with an arrow from each dependency. Above
/// ``limit`` jobs it is not drawn (a browser would freeze on the paths and nobody could read it); the
/// page shows a table of the jobs by depth and state instead (``summary(_:)``).
enum DependencyGraph {
    static let limit = 300

    static let boxWidth = 150.0
    static let boxHeight = 22.0
    static let columnGap = 50.0
    static let rowGap = 8.0

    /// Each job's depth: 0 for a job that waits for nothing, else one more than its deepest dependency,
    /// in one pass in topological order (Kahn's). A dependency that is not in the run (a damaged store)
    /// is ignored; jobs on a cycle (never in a stored run) keep depth 0.
    static func depths(_ jobs: [JobRecord]) -> [DurableJobID: Int] {
        let known = Set(jobs.map(\.id))
        var waiting: [DurableJobID: Int] = [:]
        var dependents: [DurableJobID: [DurableJobID]] = [:]
        for job in jobs {
            let inRun = job.dependencies.filter { known.contains($0.job) }
            waiting[job.id] = inRun.count
            for dependency in inRun { dependents[dependency.job, default: []].append(job.id) }
        }
        var depth: [DurableJobID: Int] = [:]
        var ready = jobs.filter { waiting[$0.id] == 0 }.map(\.id)
        while let job = ready.popLast() {
            let mine = depth[job] ?? 0
            for dependent in dependents[job] ?? [] {
                depth[dependent] = max(depth[dependent] ?? 0, mine + 1)
                waiting[dependent]! -= 1
                if waiting[dependent] == 0 { ready.append(dependent) }
            }
        }
        return depth
    }

    static func svg(_ jobs: [JobRecord]) -> String {
        let depth = depths(jobs)
        var rows: [Int: Int] = [:]
        var position: [DurableJobID: (x: Double, y: Double)] = [:]
        for job in jobs {
            let column = depth[job.id] ?? 0
            let row = rows[column, default: 0]
            rows[column] = row + 1
            position[job.id] = (
                x: 10 + Double(column) * (boxWidth + columnGap), y: 10 + Double(row) * (boxHeight + rowGap)
            )
        }
        let width = 20 + Double((rows.keys.max() ?? 0) + 1) * (boxWidth + columnGap) - columnGap
        let height = 20 + Double(rows.values.max() ?? 0) * (boxHeight + rowGap)
        var edges = ""
        var boxes = ""
        for job in jobs {
            guard let to = position[job.id] else { continue }
            for dependency in job.dependencies {
                guard let from = position[dependency.job] else { continue }
                let (x1, y1) = (from.x + boxWidth, from.y + boxHeight / 2)
                let (x2, y2) = (to.x, to.y + boxHeight / 2)
                let middle = (x1 + x2) / 2
                edges +=
                    "<path class=\"edge\(dependency.runRegardless ? " regardless" : "")\" d=\"M\(f(x1)),\(f(y1)) C\(f(middle)),\(f(y1)) \(f(middle)),\(f(y2)) \(f(x2 - 4)),\(f(y2))\" marker-end=\"url(#arrow)\"/>"
            }
            let label = job.name.count > 22 ? String(job.name.prefix(21)) + "…" : job.name
            boxes += """
                <a href="/jobs/\(job.id.rawValue)"><g class="node \(job.state.rawValue)"><title>\(HTML.escape(job.name)) [\(HTML.escape(job.kind))]: \(job.state.rawValue)</title>\
                <rect x="\(f(to.x))" y="\(f(to.y))" width="\(f(boxWidth))" height="\(f(boxHeight))" rx="4"/>\
                <text x="\(f(to.x + 6))" y="\(f(to.y + 15))">\(HTML.escape(label))</text></g></a>
                """
        }
        return """
            <svg class="graph" xmlns="http://www.w3.org/2000/svg" width="\(f(width))" height="\(f(height))" role="img" aria-label="dependency graph">\
            <defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#888"/></marker></defs>\
            \(edges)\(boxes)</svg>
            """
    }

    /// For a run too large to draw: how many jobs at each depth are in each state.
    static func summary(_ jobs: [JobRecord]) -> String {
        let depth = depths(jobs)
        var counts: [Int: [DurableJobState: Int]] = [:]
        for job in jobs { counts[depth[job.id] ?? 0, default: [:]][job.state, default: 0] += 1 }
        let states = DurableJobState.allCases
        var rows = ""
        for level in counts.keys.sorted() {
            let cells = states.map { "<td class=\"number\">\(counts[level]?[$0] ?? 0)</td>" }.joined()
            rows += "<tr><td class=\"number\">\(level)</td>\(cells)</tr>"
        }
        return """
            <p>The graph of \(jobs.count) jobs is not drawn (it is drawn up to \(limit)). Its jobs by depth (0: waits for nothing) and state:</p>
            <table><thead><tr><th>depth</th>\(states.map { "<th>\($0.rawValue)</th>" }.joined())</tr></thead><tbody>\(rows)</tbody></table>
            """
    }

    private static func f(_ value: Double) -> String { String(format: "%.1f", value) }
}
