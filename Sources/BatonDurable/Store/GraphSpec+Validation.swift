extension GraphSpec {
    /// Checks that names are unique, not empty and free of NUL characters, edges point into the graph,
    /// a job names each category with one limit, and there is no cycle.
    ///
    /// Stores call this before writing anything, so a bad graph leaves the store unchanged.
    /// - Throws: ``DurableError`` with code ``DurableError/Code/dependencyCycle`` (naming the cycle in
    ///   order) or ``DurableError/Code/invalidGraph``.
    public func validate() throws(DurableError) {
        var seen: [String: Int] = [:]
        if let problem = StoredText.problem(with: name, "graph name") {
            throw invalid("\(problem). Name the graph otherwise.", [])
        }
        for (index, job) in jobs.enumerated() {
            if !StoredText.isStorable(job.name) {
                throw invalid(
                    "job \(index) of graph '\(name)' has a NUL character (\\0) in its name \(StoredText.quoted(job.name)), which no store can keep. Remove it.",
                    [job.name])
            }
            for (what, value) in [("kind", job.kind)] + job.categories.map({ ("category", $0.name) }) {
                if let problem = StoredText.problem(with: value, what) {
                    throw invalid("job \(index) of graph '\(name)': its \(problem). Remove it.", [job.name])
                }
            }
            var limits: [String: Int] = [:]
            for category in job.categories {
                if let other = limits.updateValue(category.limit, forKey: category.name), other != category.limit {
                    throw invalid(
                        "job '\(job.name)' of graph '\(name)' names category '\(category.name)' twice, with limits \(other) and \(category.limit). Name each category once, with the limit you mean.",
                        [job.name])
                }
            }
            if job.name.isEmpty {
                throw invalid("job \(index) of graph '\(name)' has an empty name. Give every job a name.", [])
            }
            if job.kind.isEmpty {
                throw invalid(
                    "job '\(job.name)' of graph '\(name)' has an empty kind. Use the kind of a DurableJob.", [job.name])
            }
            if let input = job.input, input.count > StoredText.valueLimit {
                throw invalid(
                    "job '\(job.name)' of graph '\(name)' has an input of \(input.count) bytes, over the \(StoredText.valueLimit) a store keeps. Store the data elsewhere (a file, an object store) and pass its address.",
                    [job.name])
            }
            if let other = seen.updateValue(index, forKey: job.name) {
                throw invalid(
                    "graph '\(name)' has two jobs named '\(job.name)' (\(other) and \(index)). Names must be unique within a graph; pass name: to add(_:).",
                    [job.name])
            }
            for dependency in job.allDependencies where !jobs.indices.contains(dependency.index) {
                throw invalid(
                    "job '\(job.name)' depends on job \(dependency.index), which is not in graph '\(name)' (it has \(jobs.count) jobs).",
                    [job.name])
            }
            if job.input == nil && job.inputFrom == nil {
                throw invalid("job '\(job.name)' has no input: give input: or inputFrom:.", [job.name])
            }
            if job.input != nil, let source = job.inputFrom {
                throw invalid(
                    "job '\(job.name)' has both input: and inputFrom: '\(jobs[source].name)', and would take only one; give one of them.",
                    [job.name, jobs[source].name])
            }
            var edgeKinds: [Int: Bool] = [:]
            for dependency in job.dependencies {
                if let other = edgeKinds.updateValue(dependency.runRegardless, forKey: dependency.index),
                    other != dependency.runRegardless
                {
                    throw invalid(
                        "job '\(job.name)' depends on '\(jobs[dependency.index].name)' both with after: and with regardless:; list it once, in the one you mean.",
                        [job.name, jobs[dependency.index].name])
                }
            }
            if let source = job.inputFrom, edgeKinds[source] == true {
                throw invalid(
                    "job '\(job.name)' takes its input from '\(jobs[source].name)' and also runs regardless of it: when '\(jobs[source].name)' fails or is cancelled there is no input to run with. Drop it from regardless:.",
                    [job.name, jobs[source].name])
            }
            for category in job.categories where category.name.isEmpty {
                throw invalid("job '\(job.name)' names a category with an empty name.", [job.name])
            }
            // Stores keep these as 32-bit integers (PostgreSQL's integer): a value beyond is refused here,
            // the same way by every store, instead of trapping or being cut short.
            let int32 = Int(Int32.min)...Int(Int32.max)
            if !int32.contains(job.priority) {
                throw invalid(
                    "job '\(job.name)' has priority \(job.priority); a priority must be within \(int32) (JobPriority's raw values are 0...4).",
                    [job.name])
            }
            if !(1...Int(Int32.max)).contains(job.retry.maxAttempts) {
                throw invalid(
                    "job '\(job.name)' allows \(job.retry.maxAttempts) attempts; give 1...\(Int32.max) (1: no retry).",
                    [job.name])
            }
            for category in job.categories where !(1...Int(Int32.max)).contains(category.limit) {
                throw invalid(
                    "job '\(job.name)' names category \(category) with limit \(category.limit); a limit must be within 1...\(Int32.max).",
                    [job.name])
            }
            if case .exponential(_, let multiplier, _, let jitter) = job.retry.delay,
                !multiplier.isFinite || !jitter.isFinite || multiplier < 0 || !(0...1).contains(jitter)
            {
                throw invalid(
                    "job '\(job.name)' has a retry policy with multiplier \(multiplier) and jitter \(jitter); give a finite multiplier of 0 or more and a jitter within 0...1.",
                    [job.name])
            }
            // The seconds, not the date: describing a NaN date stops the program (FoundationEssentials traps).
            if let notBefore = job.notBefore, !notBefore.timeIntervalSince1970.isFinite {
                throw invalid(
                    "job '\(job.name)' has a notBefore of \(notBefore.timeIntervalSince1970) seconds since 1970; give a real date, or nil.",
                    [job.name])
            }
            if let timeout = job.timeout, timeout <= .zero {
                throw invalid(
                    "job '\(job.name)' has a timeout of \(timeout); give a positive duration, or nil for none.",
                    [job.name])
            }
            // A worker waits these out (a timeout is a sleep, a retry's wait a time stored in the job): a
            // duration beyond what a clock can count (`.seconds(Int64.max)` for "no limit") trapped every
            // worker that claimed the job, one after another.
            let longest = Schedule.longestInterval
            if let timeout = job.timeout, timeout > longest {
                throw invalid(
                    "job '\(job.name)' has a timeout of \(timeout); the longest is 100 years (36,500 days). Give nil for no timeout.",
                    [job.name])
            }
            let waits: [Duration] =
                switch job.retry.delay {
                case .immediate: []
                case .constant(let wait): [wait]
                case .exponential(let initial, _, let maximum, _): [initial, maximum]
                }
            if let wait = waits.first(where: { $0 < .zero }) {
                throw invalid(
                    "job '\(job.name)' has a retry policy that waits \(wait); a wait cannot be negative (give .zero, or .immediate, to retry at once).",
                    [job.name])
            }
            if let wait = waits.first(where: { $0 > longest }) {
                throw invalid(
                    "job '\(job.name)' has a retry policy that waits \(wait); the longest wait is 100 years (36,500 days).",
                    [job.name])
            }
        }
        if let cycle = findCycle() {
            let names = cycle.map { jobs[$0].name }
            throw DurableError(
                code: .dependencyCycle, jobs: names,
                message:
                    "graph '\(name)' has a dependency cycle: \((names + [names[0]]).map { "'\($0)'" }.joined(separator: " → ")). Remove one of these dependencies; nothing was submitted."
            )
        }
    }

    private func invalid(_ message: String, _ names: [String]) -> DurableError {
        DurableError(code: .invalidGraph, jobs: names, message: message + " Nothing was submitted.")
    }

    /// The first cycle found, as indices in dependency order, or `nil`. Iterative depth-first search.
    func findCycle() -> [Int]? {
        enum Mark { case unvisited, onPath, done }
        var marks = [Mark](repeating: .unvisited, count: jobs.count)
        let edges = jobs.map { $0.allDependencies.map(\.index) }
        for root in jobs.indices where marks[root] == .unvisited {
            // The path as (node, next edge position).
            var path: [(node: Int, next: Int)] = [(root, 0)]
            marks[root] = .onPath
            while let (node, next) = path.last {
                if next < edges[node].count {
                    path[path.count - 1].next += 1
                    let target = edges[node][next]
                    switch marks[target] {
                    case .unvisited:
                        marks[target] = .onPath
                        path.append((target, 0))
                    case .onPath:
                        let start = path.firstIndex { $0.node == target }!
                        // The path runs from dependents to dependencies; report dependencies first.
                        return path[start...].map(\.node).reversed()
                    case .done: break
                    }
                } else {
                    marks[node] = .done
                    path.removeLast()
                }
            }
        }
        return nil
    }
}
