public import BatonDurable
public import BatonObservability
public import Foundation
import GRDB

/// What the `baton` command does, apart from parsing its arguments: each command reads or repairs a job
/// store and writes what it found, for people (tables, one line per fact) or with `json` for programs.
/// Tests run it in-process with a captured output.
///
/// ## Thread safety
/// A `Sendable` value; `write` is called from the calling task only.
public struct BatonTool: Sendable {
    /// Writes to standard output.
    public var write: @Sendable (String) -> Void
    public var now: @Sendable () -> Date
    /// The time zone of the times shown and of dates given without one.
    public var timeZone: TimeZone

    public init(
        write: @escaping @Sendable (String) -> Void, now: @escaping @Sendable () -> Date = { Date() },
        timeZone: TimeZone = .current
    ) {
        self.write = write
        self.now = now
        self.timeZone = timeZone
    }

    // MARK: runs

    /// What `baton runs --json` prints.
    public struct RunsJSON: Codable, Sendable {
        public var counts: [String: Int]
        public var runs: [RunSummary]
        /// The `--before` of the next page, when there is one.
        public var next: Int64?
    }

    /// `baton runs`: the counts by state, then a page of runs, newest first.
    public func runs(_ store: any JobStore, filter: RunFilter, json: Bool) async throws {
        let page = try await store.runs(filter)
        let counts = try await store.runCounts()
        if json {
            let byName = Dictionary(uniqueKeysWithValues: RunState.allCases.map { ($0.rawValue, counts[$0] ?? 0) })
            return try emit(RunsJSON(counts: byName, runs: page.runs, next: page.next?.rawValue))
        }
        write(RunState.allCases.map { "\(counts[$0] ?? 0) \($0)" }.joined(separator: ", ") + "\n")
        guard !page.runs.isEmpty else {
            return write("No runs match.\n")
        }
        var table = TextTable(["RUN", "STATE", "NAME", "JOBS", "FAILED", "CREATED", "TOOK"])
        for run in page.runs {
            let took = run.finished.map { TimeText.duration($0.timeIntervalSince(run.created)) }
            table.add([
                "\(run.id.rawValue)", run.state.rawValue, TimeText.printable(run.name), "\(run.done)/\(run.jobs)",
                run.failed + run.cancelled > 0 ? "\(run.failed) failed, \(run.cancelled) cancelled" : "",
                TimeText.stamp(run.created, timeZone: timeZone),
                took ?? "running for \(TimeText.duration(now().timeIntervalSince(run.created)))",
            ])
        }
        write(table.text)
        if let next = page.next {
            write("More: add --before \(next.rawValue) for the next page.\n")
        }
    }

    // MARK: explain and job

    /// `baton explain RUN`: each job of the run, its state, attempt, what it waits for and its last error.
    public func explain(_ store: any JobStore, run: DurableRunID, json: Bool) async throws {
        let explanation = try await store.explain(run: run)
        if json { return try emit(explanation) }
        write(explanation.printable.description + "\n")
    }

    /// What `baton jobs --json` prints.
    public struct JobsJSON: Codable, Sendable {
        public var jobs: [JobSummary]
        /// The `--after` of the next page, when there is one.
        public var next: Int64?
    }

    /// `baton jobs RUN`: a page of the run's jobs in the order they were added.
    public func jobs(_ store: any JobStore, filter: JobFilter, json: Bool) async throws {
        let page = try await store.jobs(filter)
        if json { return try emit(JobsJSON(jobs: page.jobs, next: page.next?.rawValue)) }
        guard !page.jobs.isEmpty else { return write("No jobs match.\n") }
        var table = TextTable(["JOB", "STATE", "NAME", "KIND", "ATTEMPTS", "FINISHED", "ERROR"])
        for job in page.jobs {
            table.add([
                "\(job.id.rawValue)", job.state.rawValue, TimeText.printable(job.name), TimeText.printable(job.kind),
                "\(job.attempts)", job.finished.map { TimeText.stamp($0, timeZone: timeZone) } ?? "",
                TimeText.printable(job.lastError ?? ""),
            ])
        }
        write(table.text)
        if let next = page.next {
            write("More: add --after \(next.rawValue) for the next page.\n")
        }
    }

    /// What `baton job --json` prints.
    public struct JobJSON: Codable, Sendable {
        public var job: JobExplanation
        public var run: DurableRunID
        public var runName: String
        /// The job's output as stored (JSON text), once it succeeded.
        public var output: String?
        public var attempts: [AttemptRecord]
    }

    /// `baton job JOB`: the job's state, then every attempt with its worker (not kept for a success), end, outcome and error.
    public func job(_ store: any JobStore, job id: DurableJobID, json: Bool) async throws {
        let explanation = try await store.explain(job: id)
        let run = try await store.run(of: id)
        let record = try await store.record(of: run)
        let snapshot = try await store.snapshot(of: run)
        let output = snapshot.jobs.first { $0.id == id }?.output.map { String(decoding: $0, as: UTF8.self) }
        let attempts = try await store.attempts(of: id)
        if json {
            return try emit(
                JobJSON(job: explanation, run: run, runName: record.name, output: output, attempts: attempts))
        }
        write(
            "job \(id.rawValue) '\(TimeText.printable(explanation.name))' [\(TimeText.printable(explanation.kind))] "
                + "of run \(run.rawValue) '\(TimeText.printable(record.name))': \(explanation.state), attempt "
                + "\(explanation.attempts) of \(explanation.maxAttempts)\n")
        if !explanation.waitingFor.isEmpty {
            write("waiting for: " + explanation.printable.waitingFor.map(\.description).joined(separator: "; ") + "\n")
        }
        if let error = explanation.lastError {
            write("\(explanation.lastErrorLabel): \(TimeText.printable(error))\n")
        }
        if let output { write("output: \(TimeText.printable(output))\n") }
        guard !attempts.isEmpty else {
            // A job cancelled before it started has nothing to come.
            return write(
                explanation.state.isFinished
                    ? "It never ran: it was \(explanation.state) before it started.\n" : "No attempt has ended yet.\n")
        }
        var table = TextTable(["#", "OUTCOME", "ENDED", "WORKER", "THEN", "ERROR"])
        for attempt in attempts {
            table.add([
                "\(attempt.attempt)", attempt.outcome.rawValue, TimeText.stamp(attempt.ended, timeZone: timeZone),
                TimeText.printable(attempt.worker ?? ""), attempt.result.rawValue,
                TimeText.printable(attempt.error ?? ""),
            ])
        }
        write(table.text)
    }

    // MARK: timeline

    /// `baton timeline RUN -o FILE`: the Gantt page of the run's attempts (one bar per attempt that
    /// ended, on the store's clock), jobs that were added drawn under the job that added them. An
    /// attempt under way is drawn once it ends.
    ///
    /// - Returns: the page (the caller writes it).
    public func timeline(_ store: any JobStore, run: DurableRunID) async throws -> String {
        let snapshot = try await store.snapshot(of: run)
        let timeline = Self.timeline(of: snapshot, attempts: try await store.attempts(ofRun: run))
        return timeline.html(title: "run \(run.rawValue) '\(snapshot.run.name)'")
    }

    /// The timeline of a stored run: one entry per attempt that started and ended (``JobStore/attempts(ofRun:)``),
    /// on the store's clock; jobs that were added are in a section under the job that added them, and
    /// each attempt's dependencies point to its dependencies' last attempts.
    public static func timeline(
        of snapshot: RunSnapshot, attempts attemptsByJob: [DurableJobID: [AttemptRecord]]
    )
        -> JobTimeline
    {
        var recorded: [JobTimeline.RecordedJob] = []
        var lastEntry: [DurableJobID: UInt64] = [:]
        var pending: [(job: JobRecord, entry: UInt64)] = []
        for job in snapshot.jobs {
            let attempts = attemptsByJob[job.id] ?? []
            for attempt in attempts where attempt.started != nil {
                let entry = UInt64(recorded.count + 1)
                let outcome: JobTimeline.Outcome? =
                    switch attempt.outcome {
                    case .succeeded: .succeeded
                    case .failed, .lost: .failed
                    case .cancelled: .cancelled
                    case .snoozed: .snoozed
                    }
                recorded.append(
                    JobTimeline.RecordedJob(
                        id: entry, name: attempts.count > 1 ? "\(job.name) (attempt \(attempt.attempt))" : job.name,
                        queue: "", kind: job.kind, added: snapshot.run.created, started: attempt.started,
                        finished: attempt.ended, outcome: outcome))
                lastEntry[job.id] = entry
                pending.append((job, entry))
            }
        }
        // Rows: the run's own jobs, then each adder's additions under it; edges to the last attempts.
        let names = Dictionary(uniqueKeysWithValues: snapshot.jobs.map { ($0.id, $0.name) })
        for (job, entry) in pending {
            let index = Int(entry - 1)
            recorded[index].queue = job.addedBy.flatMap { names[$0] }.map { "added by \($0)" } ?? snapshot.run.name
            recorded[index].group = job.addedBy.flatMap { lastEntry[$0] }
            recorded[index].dependencies = job.dependencies.compactMap { lastEntry[$0.job] }
        }
        return JobTimeline.recorded(recorded, now: snapshot.now)
    }

    // MARK: repairs

    /// `baton cancel RUN` / `baton cancel --job JOB`.
    public func cancel(_ store: any JobStore, run: DurableRunID?, job: DurableJobID?, reason: String) async throws {
        if let job {
            let explanation = try await store.explain(job: job)
            guard !explanation.state.isFinished else {
                return write(
                    "Job \(job.rawValue) had already finished (\(explanation.state)); nothing was cancelled.\n")
            }
            // Asked already, and still running until its worker renews: asking again changes nothing.
            for case .cancelRequested(let asked) in explanation.waitingFor {
                return write(
                    "Job \(job.rawValue) '\(TimeText.printable(explanation.name))' was already asked to cancel (\(TimeText.printable(asked))); its worker stops it at its next lease renewal. Nothing changed.\n"
                )
            }
            try await store.cancel(job: job, reason: reason)
            return write(
                "Cancelled job \(job.rawValue) '\(TimeText.printable(explanation.name))'"
                    + (explanation.state == .running
                        ? " (it is running: its worker stops it at its next lease renewal)" : "")
                    + "; the jobs that need it are cancelled too.\n")
        }
        guard let run else { throw BatonCLIError.usage("give a run, or --job JOB") }
        let snapshot = try await store.snapshot(of: run)
        let unfinished = snapshot.jobs.filter { !$0.state.isFinished }
        guard !unfinished.isEmpty else {
            return write("Run \(run.rawValue) had already finished; nothing was cancelled.\n")
        }
        try await store.cancel(run: run, reason: reason)
        let running = unfinished.filter { $0.state == .running }.count
        write(
            "Cancelled run \(run.rawValue) '\(TimeText.printable(snapshot.run.name))': \(counted(unfinished.count, "unfinished job"))"
                + (running > 0 ? " (\(running) running: their workers stop them at their next lease renewal)" : "")
                + ".\n")
    }

    /// `baton retry RUN` / `baton retry --job JOB`.
    public func retry(_ store: any JobStore, run: DurableRunID?, job: DurableJobID?) async throws {
        if let job {
            let count = try await store.retry(job: job)
            return write(
                "Job \(job.rawValue) runs again, with \(counted(count - 1, "job")) that had been cancelled because of it.\n"
            )
        }
        guard let run else { throw BatonCLIError.usage("give a run, or --job JOB") }
        let count = try await store.retry(run: run)
        write(
            count == 0
                ? "Run \(run.rawValue) has no failed or cancelled job to retry.\n"
                : "Run \(run.rawValue): \(counted(count, "job")) run again.\n")
    }

    /// `baton prune --before AGE`: deletes the runs that finished before `date`.
    public func prune(_ store: any JobStore, finishedBefore date: Date, json: Bool) async throws {
        let count = try await store.prune(finishedBefore: date)
        if json { return try emit(["deleted": count]) }
        write("Deleted \(counted(count, "run")) that finished before \(TimeText.stamp(date, timeZone: timeZone)).\n")
    }

    // MARK: schedules

    /// `baton schedules`: every schedule, its timing, whether it is paused, and its next tick. A schedule
    /// this program cannot read (written by a newer version) is listed with its state and ticks, its
    /// timing as `unreadable`, and the reason after the table. In JSON, every element has the schedule's
    /// name at `schedule.name`, `paused`, `nextTick`, `lastTick` and `timing` (`{"every": seconds}` or
    /// `{"cron": text, "timeZone": name}`); one this program cannot read has
    /// only the name under `schedule`, and the reason at `unreadable`. Both list them by name.
    public func schedules(_ store: any JobStore, json: Bool) async throws {
        let listing = try await store.scheduleListing()
        if json {
            return try emit(
                listing.entries.map { entry -> ScheduleEntry in
                    switch entry {
                    case .readable(let record): .record(record)
                    case .unreadable(let schedule): .unreadable(UnreadableEntry(schedule))
                    }
                })
        }
        guard !listing.schedules.isEmpty || !listing.unreadable.isEmpty else { return write("No schedules.\n") }
        var table = TextTable(["NAME", "TIMING", "STATE", "NEXT", "LAST"])
        for entry in listing.entries {
            let (timing, paused, next, last): (String, Bool, Date?, Date?) =
                switch entry {
                case .readable(let record):
                    (
                        TimeText.printable(record.schedule.timing.description), record.paused, record.nextTick,
                        record.lastTick
                    )
                case .unreadable(let schedule): ("unreadable", schedule.paused, schedule.nextTick, schedule.lastTick)
                }
            table.add([
                TimeText.printable(entry.name), timing, paused ? "paused" : "active",
                next.map { TimeText.stamp($0, timeZone: timeZone) } ?? "",
                last.map { TimeText.stamp($0, timeZone: timeZone) } ?? "",
            ])
        }
        write(table.text)
        for schedule in listing.unreadable {
            write("\n\(TimeText.printable(schedule.reason))\n")
        }
        if !listing.unreadable.isEmpty {
            write(
                "A schedule this program cannot read can be paused here (`baton schedules pause NAME`); a program that can read it resumes and fires it, and storing it again replaces it.\n"
            )
        }
    }

    /// An element of `baton schedules --json`: a schedule as the store records it, or one this program
    /// cannot read.
    private enum ScheduleEntry: Encodable {
        case record(ScheduleRecord)
        case unreadable(UnreadableEntry)

        private enum Keys: String, CodingKey { case timing }

        /// The timing as people read it, beside the record's own (whose interval is a `Duration`'s pair
        /// of integers): `{"every": 300}` in seconds, or `{"cron": "0 3 * * *", "timeZone": "UTC"}`.
        private struct Timing: Encodable {
            var every: Double?
            var cron: String?
            var timeZone: String?
        }

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .record(let record):
                try record.encode(to: encoder)
                var container = encoder.container(keyedBy: Keys.self)
                switch record.schedule.timing {
                case .every(let interval):
                    let parts = interval.components
                    try container.encode(
                        Timing(every: Double(parts.seconds) + Double(parts.attoseconds) / 1e18), forKey: .timing)
                case .cron(let text, let zone):
                    try container.encode(Timing(cron: text, timeZone: zone), forKey: .timing)
                }
            case .unreadable(let entry):
                var container = encoder.singleValueContainer()
                try container.encode(entry)
            }
        }
    }

    /// A schedule this program cannot read, in `baton schedules --json`: shaped as a ``ScheduleRecord``
    /// (its name at `schedule.name`), with the reason at `unreadable`.
    private struct UnreadableEntry: Encodable {
        struct Name: Encodable { var name: String }
        var schedule: Name
        var paused: Bool
        var nextTick: Date?
        var lastTick: Date?
        var unreadable: String
        init(_ unreadable: UnreadableSchedule) {
            schedule = Name(name: unreadable.name)
            (paused, nextTick, lastTick, self.unreadable) = (
                unreadable.paused, unreadable.nextTick, unreadable.lastTick, unreadable.reason
            )
        }
    }

    /// `baton schedules pause|resume NAME`. The store finds the schedule by its name (a listing of every
    /// schedule would fail on any one this program cannot read, and that one too can be paused).
    public func setSchedule(_ store: any JobStore, named name: String, paused: Bool) async throws {
        do {
            try await store.setSchedule(named: name, paused: paused)
        } catch let error as DurableError where error.code == .misuse {
            throw BatonCLIError(
                "there is no schedule named '\(TimeText.printable(name))'; `baton schedules` lists them")
        }
        write("\(paused ? "Paused" : "Resumed") the schedule '\(TimeText.printable(name))'.\n")
    }

    // MARK: -

    private func emit(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        write(String(decoding: try encoder.encode(value), as: UTF8.self) + "\n")
    }

    private func counted(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
}

/// Columns padded to their widest cell, by the columns a terminal gives each character (an emoji or a
/// CJK character takes two, a combining mark none); a cell wider than 60 columns is cut with `…`.
///
/// Cells were padded with `padding(toLength:)`, which counts UTF-16 units and cuts a longer string: the
/// widest cell of a column lost its end when it held an emoji ("nightly 😀😀😀😀😀😀 backup" showed as
/// "nightly 😀😀😀😀😀😀").
struct TextTable {
    private var rows: [[String]]

    init(_ header: [String]) { rows = [header] }

    mutating func add(_ row: [String]) {
        rows.append(row.map { Self.clipped($0, to: 60) })
    }

    var text: String {
        let widths = rows[0].indices.map { column in rows.map { Self.columns($0[column]) }.max() ?? 0 }
        // Only the padding at the end of a line goes: a name's own leading spaces stay, so that what is
        // listed can be typed back (`baton schedules pause "  spaced"`).
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1
                    ? cell : cell + String(repeating: " ", count: max(0, widths[column] - Self.columns(cell)))
            }.joined(separator: "  ").droppingTrailingSpaces + "\n"
        }.joined()
    }

    /// `text` cut to at most `width` columns, ending with `…` when it was cut.
    static func clipped(_ text: String, to width: Int) -> String { TerminalColumns.clipped(text, to: width) }

    /// The columns a terminal gives `text` (``TerminalColumns``).
    static func columns(_ text: String) -> Int { TerminalColumns.of(text) }
}

extension RunExplanation {
    /// The explanation with every text that came from users (names, kinds, errors, reasons) made
    /// ``TimeText/printable(_:)``, so that its description's lines are the only line breaks.
    var printable: RunExplanation {
        var copy = self
        copy.run.name = TimeText.printable(run.name)
        copy.jobs = jobs.map(\.printable)
        return copy
    }
}

extension JobExplanation {
    /// See ``RunExplanation/printable``.
    var printable: JobExplanation {
        var copy = self
        copy.name = TimeText.printable(name)
        copy.kind = TimeText.printable(kind)
        copy.lastError = lastError.map(TimeText.printable)
        copy.waitingFor = waitingFor.map { reason in
            switch reason {
            case .dependency(let name, let state): .dependency(name: TimeText.printable(name), state: state)
            case .category(let name, let limit, let heldBy):
                .category(name: TimeText.printable(name), limit: limit, heldBy: heldBy.map(TimeText.printable))
            case .lease(let worker, let until): .lease(worker: TimeText.printable(worker), until: until)
            case .leaseExpired(let worker, let at): .leaseExpired(worker: TimeText.printable(worker), at: at)
            case .noWorker(let kind): .noWorker(kind: TimeText.printable(kind))
            case .cancelRequested(let reason): .cancelRequested(reason: TimeText.printable(reason))
            case .notBefore: reason
            }
        }
        return copy
    }
}

extension BatonTool {
    /// The one line to print for an error: its own message for the store's errors, not Swift's rendering.
    public static func message(for error: any Error) -> String {
        switch error {
        case let error as BatonCLIError: return error.message
        case let error as DurableError:
            // The store's advice for a lock held past its busy timeout ("open the store with a longer
            // busyTimeout") is a programmer's; this tool's user can only wait.
            if let database = error.underlying as? DatabaseError,
                database.resultCode == .SQLITE_BUSY || database.resultCode == .SQLITE_LOCKED
            {
                return
                    "the job store is in use: another program held its write lock for longer than \(Int(StoreAddress.busyTimeout)) s (a long transaction, or a prune of many runs); nothing was changed. Try again when it has finished."
            }
            return error.message
        default: return String(describing: error)
        }
    }
}

extension String {
    /// The text without the spaces at its end.
    fileprivate var droppingTrailingSpaces: String {
        var text = Substring(self)
        while text.last == " " { text.removeLast() }
        return String(text)
    }
}
