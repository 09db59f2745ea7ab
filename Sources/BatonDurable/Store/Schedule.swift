public import Foundation

/// A graph submitted again and again on a timetable: at each tick, one run, whose unique key is the
/// tick — so any number of workers on any number of machines submit it once, also across restarts.
///
/// ```swift
/// let refresh = try GraphSpec(name: "refresh", jobs: [JobSpec(name: "fetch", kind: "feed.fetch", input: Data("{}".utf8))])
/// try await store.schedule(Schedule(name: "refresh", timing: .every(.seconds(300)), graph: refresh))
/// ```
///
/// Every ``DurableWorker`` that runs without end (``DurableWorker/run()``) fires the store's due
/// schedules; a store's ``JobStore/fireDueSchedules()`` does it by hand.
public struct Schedule: Hashable, Codable, Sendable {
    /// When the ticks are.
    public enum Timing: Hashable, Codable, Sendable, CustomStringConvertible {
        /// Every `interval`, counted from 1970-01-01 00:00 UTC (every 5 minutes: at :00, :05, …), in whole
        /// milliseconds (a part below a millisecond is dropped: 1.0005 s ticks every second).
        case every(Duration)
        /// The times a five-field cron expression matches in a time zone (an IANA name, such as
        /// `Europe/Paris`): see ``CronExpression``.
        case cron(String, timeZone: String)

        public var description: String {
            switch self {
            case .every(let interval): "every \(interval)"
            case .cron(let text, let zone): "cron '\(text)' in \(zone)"
            }
        }
    }

    /// What happens to ticks that passed while no worker fired them (all stopped, or the store was
    /// unreachable).
    public enum CatchUp: String, Hashable, Codable, Sendable, CaseIterable {
        /// Missed ticks are dropped; only a tick that is due now (less than a minute late) runs.
        case skip
        /// The latest missed tick runs once; the earlier ones are dropped.
        case once
        /// Every missed tick runs, each as its own run (1,000 a call at most: the next call goes on). With
        /// ``Overlap/skip``, only the latest missed tick runs (the others would overlap it).
        case all
    }

    /// What a tick does while the run of the schedule's previous tick is still unfinished.
    public enum Overlap: String, Hashable, Codable, Sendable, CaseIterable {
        /// It submits its run all the same: runs of several ticks may run at once.
        case allow
        /// It is skipped (no run); the first tick after that run finished fires as usual. At most one run
        /// of the schedule is unfinished at a time, however long one takes: a check every 5 seconds whose
        /// run is held up by a slow server does not pile up runs behind it. (A run pruned or deleted
        /// counts as finished.)
        case skip
    }

    /// Unique in the store; a schedule stored under a name that is taken replaces it.
    public var name: String
    public var timing: Timing
    /// The graph each tick submits (its run is named after the graph).
    public var graph: GraphSpec
    public var catchUp: CatchUp
    /// ``Overlap/allow`` unless said otherwise.
    public var overlap: Overlap

    public init(name: String, timing: Timing, graph: GraphSpec, catchUp: CatchUp = .skip, overlap: Overlap = .allow) {
        self.name = name
        self.timing = timing
        self.graph = graph
        self.catchUp = catchUp
        self.overlap = overlap
    }

    private enum CodingKeys: String, CodingKey { case name, timing, graph, catchUp, overlap }

    /// A definition stored before ``overlap`` existed allows overlaps.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        timing = try container.decode(Timing.self, forKey: .timing)
        graph = try container.decode(GraphSpec.self, forKey: .graph)
        catchUp = try container.decode(CatchUp.self, forKey: .catchUp)
        overlap = try container.decodeIfPresent(Overlap.self, forKey: .overlap) ?? .allow
    }

    /// The ticks of `fire` that a store submits runs for, `previousUnfinished` telling whether the run of
    /// the schedule's last fired tick is unfinished: all of them, or with ``Overlap/skip`` none while
    /// that run is unfinished and else only the latest (several at once would overlap each other).
    package func firing(_ fire: [Date], previousUnfinished: () throws -> Bool) rethrows -> [Date] {
        guard overlap == .skip, !fire.isEmpty else { return fire }
        return try previousUnfinished() ? [] : Array(fire.suffix(1))
    }

    /// The longest interval of an ``Timing/every(_:)`` timing: 36,500 days (about 100 years).
    public static let longestInterval: Duration = .seconds(36_500 * 86_400)

    /// How late a tick may be fired and still count as due now (for ``CatchUp/skip``).
    public static let lateness: Duration = .seconds(60)

    /// Checks the name, the timing and the graph.
    /// - Throws: ``DurableError/Code/invalidGraph`` saying what is wrong.
    public func validate() throws {
        guard !name.isEmpty else {
            throw DurableError(code: .invalidGraph, message: "a schedule needs a name; its name is empty.")
        }
        // (Its runs' unique keys hold the name and a time of 24 bytes.)
        if let problem = StoredText.problem(
            with: "schedule/\(name)/" + String(repeating: "0", count: 24), "schedule's run key")
        {
            throw DurableError(
                code: .invalidGraph,
                message:
                    "schedule name \(StoredText.quoted(String(name.prefix(40)))) cannot be kept: its \(problem); use a shorter name."
            )
        }
        switch timing {
        case .every(let interval):
            guard interval >= .seconds(1) else {
                throw DurableError(
                    code: .invalidGraph,
                    message: "schedule '\(name)' runs every \(interval); the shortest interval is 1 second.")
            }
            guard interval <= Self.longestInterval else {
                throw DurableError(
                    code: .invalidGraph,
                    message:
                        "schedule '\(name)' runs every \(interval); the longest interval is 100 years (36,500 days). To stop a schedule, pause or remove it."
                )
            }
        case .cron(let text, let zone):
            guard try cron()?.next(after: Date()) != nil else {
                throw DurableError(
                    code: .invalidGraph,
                    message:
                        "schedule '\(name)': the cron expression '\(text)' matches no time in the next five years in \(zone) (a day that no month has, such as the 30th of February?), so it would never run. Check its day and month fields."
                )
            }
        }
        try graph.validate()
    }

    /// The cron expression of a cron timing.
    func cron() throws -> CronExpression? {
        guard case .cron(let text, let zone) = timing else { return nil }
        guard let timeZone = TimeZone(identifier: zone) else {
            throw DurableError(
                code: .invalidGraph,
                message:
                    "schedule '\(name)' names the time zone '\(zone)', which this system does not know; use an IANA name such as 'Europe/Paris' or 'UTC'."
            )
        }
        return try CronExpression(text, timeZone: timeZone)
    }

    /// The first tick strictly after `date`, or nil when there is none (a cron expression that never matches).
    public func tick(after date: Date) throws -> Date? {
        switch timing {
        case .every(let interval):
            // In whole milliseconds, so that every machine computes the same ticks (and a tick is never
            // computed as itself, as floating-point division can for an interval such as 1.1 s).
            let step = max(
                1, interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000)
            let now = Int64((date.timeIntervalSince1970 * 1000).rounded())
            var tick = (now / step) * step
            // Compared as dates: a date keeps its time from 2001, and the conversion can move it by a bit.
            while Date(timeIntervalSince1970: Double(tick) / 1000) <= date { tick += step }
            return Date(timeIntervalSince1970: Double(tick) / 1000)
        case .cron:
            return try cron()?.next(after: date)
        }
    }

    /// The ticks to fire at `now` when the next unfired tick is `next`, by ``catchUp``, and the next
    /// tick after them.
    package func due(next: Date, now: Date) throws -> (fire: [Date], next: Date?) {
        guard next <= now else { return ([], next) }
        let late = Double(Self.lateness.components.seconds)
        // Where to start counting: ticks older than any that can fire are not walked through one by one
        // (every second for a week is 600,000 of them).
        var from = next
        // `.all` with `Overlap.skip` fires only the latest tick of the backlog (`firing`), so it looks for
        // it as `.once` does, and is not cut into batches of 1,000 (each batch's last tick fired: a
        // one-hour outage of a schedule every second made four runs, the first for a tick 43 minutes old).
        let latestOnly = catchUp == .all && overlap == .skip
        switch catchUp {
        case .skip:
            if let recent = try tick(after: now.addingTimeInterval(-late)) { from = max(next, recent) }
        case .once, .all:
            guard catchUp == .once || latestOnly else { break }
            // The latest tick: one of the last minute if there is one (a tick every millisecond is 60,000
            // of them), else of the last day.
            for window in [late, 86_400] {
                if let recent = try tick(after: now.addingTimeInterval(-window)), recent <= now {
                    from = max(next, recent)
                    break
                }
            }
        }
        var passed: [Date] = []
        var tick: Date? = from
        var steps = 0
        while let current = tick, current <= now, steps < 100_000 {
            // `.all` fires at most 1,000 ticks a call; the next call goes on from the 1,001st.
            if catchUp == .all && !latestOnly && passed.count == 1_000 { break }
            passed.append(current)
            tick = try self.tick(after: current)
            steps += 1
        }
        if steps == 100_000 { tick = try self.tick(after: now) }
        let fire: [Date]
        switch catchUp {
        case .all: fire = passed
        case .once: fire = passed.suffix(1)
        case .skip: fire = passed.suffix(1).filter { now.timeIntervalSince($0) < late }
        }
        return (fire, tick)
    }

    /// The next tick to store when this schedule replaces `stored` (its stored definition and next
    /// tick), `fresh` being its first tick after now. With the same timing, the earlier of the two: an
    /// application that stores its schedules at every start must not drop a tick that is due, or
    /// missed while it was down (``catchUp`` decides what fires), and a tick left in the future by a
    /// clock that jumped ahead and was set back is brought back. Otherwise (a new schedule, a new
    /// timing, a stored definition this program cannot read) `fresh`.
    package func keptTick(_ stored: (definition: String, nextTick: Double?)?, name: String, fresh: Double?) -> Double? {
        guard let stored, let tick = stored.nextTick,
            let old = try? Schedule.stored(stored.definition, name: name), old.timing == timing
        else { return fresh }
        return fresh.map { min($0, tick) } ?? tick
    }

    /// A due schedule as a store fires it: the schedule read from its stored `definition`, the ticks to
    /// fire at `now` (its next unfired tick being `next`, in store time) and the tick after them. Nil,
    /// with the reason in `unfired`, for one this program cannot fire — a definition a newer version
    /// wrote, a time zone this system lacks, a graph this version's rules refuse (checked before
    /// anything is written) — which is left due for processes that can; the others still fire.
    package static func firing(
        _ definition: String, name: String, next: Double, now: Date, _ unfired: inout [String: String]
    ) -> (schedule: Schedule, fire: [Date], next: Date?)? {
        do {
            let schedule = try Schedule.stored(definition, name: name)
            let (fire, following) = try schedule.due(next: Date(storeTime: next), now: now)
            try schedule.graph.validate()
            return (schedule, fire, following)
        } catch {
            unfired[name] = "\(error)"
            return nil
        }
    }

    /// The schedule as stores keep it (JSON text).
    package func stored() throws -> String {
        String(decoding: try JSONEncoder().encode(self), as: UTF8.self)
    }

    /// A schedule as stores keep it; a form this program cannot read is said to be so.
    package static func stored(_ text: String, name: String) throws -> Schedule {
        do {
            return try JSONDecoder().decode(Schedule.self, from: Data(text.utf8))
        } catch {
            throw DurableError(
                code: .decoding,
                message:
                    "schedule '\(name)' is stored in a form this program cannot read (\(error)); store it again with schedule(_:)."
            )
        }
    }

    /// The unique key of the run of `tick`.
    package func key(of tick: Date) -> String {
        "schedule/\(name)/" + tick.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true))
    }
}

/// A schedule as stored, with where it is.
public struct ScheduleRecord: Hashable, Codable, Sendable {
    public var schedule: Schedule
    public var paused: Bool
    /// The next tick to fire (on the clock that decides the store's times), or nil when there is none.
    public var nextTick: Date?
    /// The last tick fired, if any.
    public var lastTick: Date?

    public init(schedule: Schedule, paused: Bool, nextTick: Date?, lastTick: Date?) {
        self.schedule = schedule
        self.paused = paused
        self.nextTick = nextTick
        self.lastTick = lastTick
    }
}

/// A stored schedule that this program cannot read: one written by a newer version (a timing or
/// catch-up rule this one does not know), or a damaged definition. Its state and ticks are still
/// known; it can be paused (``JobStore/setSchedule(named:paused:)``) or removed
/// (``JobStore/removeSchedule(named:)``) here, and resumed or fired by a program that can read it, or
/// once it is stored again with ``JobStore/schedule(_:)``.
public struct UnreadableSchedule: Hashable, Codable, Sendable {
    /// The schedule's name.
    public var name: String
    /// Whether its ticks are not fired.
    public var paused: Bool
    /// The next tick to fire, or nil when there is none.
    public var nextTick: Date?
    /// The last tick fired, if any.
    public var lastTick: Date?
    /// What is wrong with the definition, and what to do.
    public var reason: String

    public init(name: String, paused: Bool, nextTick: Date?, lastTick: Date?, reason: String) {
        self.name = name
        self.paused = paused
        self.nextTick = nextTick
        self.lastTick = lastTick
        self.reason = reason
    }
}

/// Every stored schedule, by name: those this program can read, and those it cannot.
public struct ScheduleListing: Hashable, Codable, Sendable {
    /// The schedules this program can read, by name.
    public var schedules: [ScheduleRecord]
    /// The schedules stored in a form this program cannot read, by name.
    public var unreadable: [UnreadableSchedule]

    public init(schedules: [ScheduleRecord], unreadable: [UnreadableSchedule] = []) {
        self.schedules = schedules
        self.unreadable = unreadable
    }

    /// A stored schedule, readable or not.
    public enum Entry: Hashable, Sendable {
        case readable(ScheduleRecord)
        case unreadable(UnreadableSchedule)

        public var name: String {
            switch self {
            case .readable(let record): record.schedule.name
            case .unreadable(let schedule): schedule.name
            }
        }
    }

    /// Every schedule in one list, by name (in Swift's order of strings), the unreadable ones among the
    /// others: what a listing shows.
    public var entries: [Entry] {
        (schedules.map(Entry.readable) + unreadable.map(Entry.unreadable)).sorted { $0.name < $1.name }
    }

    /// A store's rows, each definition read on its own: one this program cannot read is listed as such
    /// instead of failing the listing.
    package init(rows: [(name: String, definition: String, nextTick: Double?, lastTick: Double?, paused: Bool)]) {
        self.init(schedules: [])
        for row in rows {
            let next = row.nextTick.map(Date.init(timeIntervalSince1970:))
            let last = row.lastTick.map(Date.init(timeIntervalSince1970:))
            do {
                let schedule = try Schedule.stored(row.definition, name: row.name)
                schedules.append(ScheduleRecord(schedule: schedule, paused: row.paused, nextTick: next, lastTick: last))
            } catch {
                unreadable.append(
                    UnreadableSchedule(
                        name: row.name, paused: row.paused, nextTick: next, lastTick: last,
                        reason: (error as? DurableError)?.message ?? "\(error)"))
            }
        }
    }
}

/// What ``JobStore/fireDueSchedules()`` did.
public struct FiredSchedules: Hashable, Sendable {
    /// The runs submitted, one per tick, with their schedule's name and tick.
    public var runs: [(schedule: String, tick: Date, run: SubmittedRun)]
    /// The earliest next tick of the unpaused schedules, on this process's clock (the store's
    /// ``JobStore/clock``, to wait on), or nil when no schedule has one. It can be past: a schedule
    /// that another process is firing, or one in ``unfired``.
    public var nextTick: Date?
    /// Due schedules this program could not fire, by name, with the reason: a definition written by a
    /// newer version (a timing or catch-up rule this one does not know), a time zone this system's
    /// time-zone data lacks, or a graph this version refuses. They are left due (for processes that can
    /// fire them, or until the schedule is stored again); the others fire.
    public var unfired: [String: String]

    public init(
        runs: [(schedule: String, tick: Date, run: SubmittedRun)], nextTick: Date?, unfired: [String: String] = [:]
    ) {
        self.runs = runs
        self.nextTick = nextTick
        self.unfired = unfired
    }

    public static func == (lhs: FiredSchedules, rhs: FiredSchedules) -> Bool {
        lhs.nextTick == rhs.nextTick && lhs.runs.map(\.schedule) == rhs.runs.map(\.schedule)
            && lhs.runs.map(\.tick) == rhs.runs.map(\.tick) && lhs.runs.map(\.run) == rhs.runs.map(\.run)
            && lhs.unfired == rhs.unfired
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(nextTick)
        hasher.combine(runs.map(\.schedule))
    }
}

package enum ScheduleErrors {
    package static func unknown(_ name: String) -> DurableError {
        DurableError(
            code: .misuse, message: "there is no schedule named '\(name)' in the store; `schedules()` lists them.")
    }
}
