import BatonDurable
import Foundation
import PostgresNIO

/// Reads the store and the side log after a chaos run and checks the guarantees: nothing lost, one
/// accepted completion per job, no attempt before its dependencies completed, no category over its
/// limit at any instant, nothing left claimed. Prints the figures.
struct ChaosChecker {
    let side: SideLog
    let jobs: Int
    let categories: [DurableCategory]
    /// The directory of the workers' ``WorkJournal``s.
    let journal: String

    struct Attempt {
        var job: Int64
        var attempt: Int
        var pid: Int
        var started: Double
        var ended: Double?
        var accepted: Bool?
        var refused: Bool?
        /// Whether the attempt's work began (false: its process was killed before; it held nothing).
        var worked = true
    }

    /// The name of the harness's schedule, and of its runs.
    static let beatSchedule = "chaos-beat"

    func check(
        kills: Int, workerRestarts: Int, serverRestarts: Int, crash: Bool, elapsed: Duration, seed: UInt64,
        workers: Int,
        lease: Duration
    ) async throws -> Bool {
        var failures: [String] = []
        func int(_ sql: PostgresQuery) async throws -> Int { try await side.query(sql)[0].decode(Int.self) }

        // The harness's runs (unique keys `chaos-…`), and the side runs the workers submitted (`side-…`).
        let total = try await int(
            "SELECT count(*)::int FROM jobs j JOIN runs r ON r.id = j.run WHERE r.unique_key LIKE 'chaos-%'")
        let lost = try await int("SELECT count(*)::int FROM jobs WHERE state <> 'succeeded'")
        if total != jobs { failures.append("the store holds \(total) jobs, \(jobs) were submitted") }
        if lost != 0 { failures.append("\(lost) jobs did not succeed") }
        let sideRuns = try await int("SELECT count(*)::int FROM chaos_side_runs")
        let sideLost = try await int(
            "SELECT count(*)::int FROM chaos_side_runs s LEFT JOIN runs r ON r.id = s.run WHERE r.id IS NULL")
        if sideLost != 0 { failures.append("\(sideLost) side runs were submitted and are not in the store") }
        let sideJobs = try await int(
            "SELECT count(*)::int FROM jobs j JOIN runs r ON r.id = j.run WHERE r.unique_key LIKE 'side-%'")
        // Side jobs whose first attempt ran in the process that submitted them: handed over in the insert
        // (no NOTIFY goes out for those), or claimed by that process first.
        let sideLocal = try await int(
            """
            SELECT count(*)::int FROM chaos_side_runs s JOIN jobs j ON j.run = s.run
            JOIN chaos_attempts a ON a.job = j.id AND a.attempt = 1 WHERE a.pid = s.pid
            """)
        // Exactly-once effects: each odd job of the graph counted itself once, in its completion's transaction.
        let effects = try await int("SELECT count(*)::int FROM chaos_effects")
        let effectsOff = try await int("SELECT count(*)::int FROM chaos_effects WHERE count <> 1")
        if effects != jobs / 2 { failures.append("\(effects) jobs counted their effect, \(jobs / 2) should have") }
        if effectsOff != 0 { failures.append("\(effectsOff) effects were counted more than once") }
        // The schedule: one run per tick, none missing from the first tick to the last.
        let style = Date.ISO8601FormatStyle().year().month().day().time(includingFractionalSeconds: true)
        let prefix = "schedule/\(Self.beatSchedule)/"
        var ticks: [Date] = []
        for row in try await side.query("SELECT unique_key FROM runs WHERE name = \(Self.beatSchedule)") {
            let key = try row.decode(String.self)
            guard key.hasPrefix(prefix), let tick = try? style.parse(String(key.dropFirst(prefix.count))) else {
                failures.append("a run of the schedule has the unique key '\(key)', which names no tick")
                continue
            }
            ticks.append(tick)
        }
        ticks.sort()
        let gaps = zip(ticks, ticks.dropFirst()).filter { abs($1.timeIntervalSince($0) - 1) > 0.001 }
        if ticks.count < 2 {
            failures.append("the schedule fired \(ticks.count) ticks; the run lasted longer than that")
        }
        if !gaps.isEmpty { failures.append("the schedule's ticks are not one run per second: \(gaps.prefix(3))") }
        say("chaos: schedule: \(ticks.count) ticks, one run each\(gaps.isEmpty ? ", none missing" : "")")
        let leftClaimed = try await int("SELECT count(*)::int FROM jobs WHERE state = 'running'")
        let leftHolders = try await int("SELECT count(*)::int FROM holders")
        if leftClaimed + leftHolders != 0 {
            failures.append("left claimed: \(leftClaimed) running jobs, \(leftHolders) category holders")
        }
        let duplicates = try await int(
            "SELECT count(*)::int FROM (SELECT job FROM chaos_attempts WHERE accepted GROUP BY job HAVING count(*) > 1) d"
        )
        if duplicates != 0 { failures.append("\(duplicates) jobs have more than one accepted completion") }
        // The accepted completion is the one the store kept: its output names that attempt.
        let mismatched = try await int(
            """
            SELECT count(*)::int FROM chaos_attempts a JOIN jobs j ON j.id = a.job
            WHERE a.accepted AND convert_from(j.output, 'UTF8')::json->>'attempt' <> a.attempt::text
            """)
        if mismatched != 0 { failures.append("\(mismatched) accepted completions differ from the stored output") }
        if duplicates != 0 || mismatched != 0 {
            try await explain(
                """
                SELECT job FROM chaos_attempts WHERE accepted GROUP BY job HAVING count(*) > 1
                UNION SELECT a.job FROM chaos_attempts a JOIN jobs j ON j.id = a.job
                WHERE a.accepted AND convert_from(j.output, 'UTF8')::json->>'attempt' <> a.attempt::text
                ORDER BY 1 LIMIT 5
                """)
        }
        let early = try await int(
            """
            SELECT count(*)::int FROM chaos_attempts a JOIN edges e ON e.job = a.job JOIN jobs d ON d.id = e.dependency
            WHERE d.finished IS NULL OR a.started < d.finished
            """)
        if early != 0 {
            failures.append("\(early) attempts started before a dependency had completed")
            try await explain(
                """
                SELECT DISTINCT a.job FROM chaos_attempts a JOIN edges e ON e.job = a.job
                JOIN jobs d ON d.id = e.dependency WHERE d.finished IS NULL OR a.started < d.finished ORDER BY 1 LIMIT 5
                """)
        }
        // Each claim has an attempt number of its own: a claim lost in a server crash, or rolled back by
        // a connection cut after its rows were sent, must not have let its job start under a number that
        // the next claim hands out again.
        let reused = try await int(
            """
            SELECT count(*)::int FROM (SELECT job, attempt FROM chaos_attempts GROUP BY job, attempt
                HAVING count(DISTINCT token) > 1) r
            """)
        if reused != 0 {
            failures.append("\(reused) attempt numbers were started under two different claims")
            try await explain(
                """
                SELECT job FROM chaos_attempts GROUP BY job, attempt HAVING count(DISTINCT token) > 1 ORDER BY 1 LIMIT 5
                """)
        }

        // Attempts: those of killed processes end at the kill.
        var kills: [Int: Double] = [:]
        for (pid, at) in try await side.query("SELECT pid, at FROM chaos_kills").map({
            try $0.decode((Int, Double).self)
        }) {
            kills[pid] = at
        }
        var attempts: [Attempt] = []
        // Where the side log lacks an attempt's end, its process was killed before the write got through
        // (it may have waited for the server): the workers' journals say whether its work began at all,
        // and when it ended.
        let journaled = try WorkJournal.read(directory: journal)
        var fromJournal = 0
        var neverBegan = 0
        var unjournaled: [Int64] = []
        // One row per lease: the side log's start is retry-safe (`SideLog.started`), so a start sent
        // again after a reply lost in a server restart is not a second holder that never ends.
        for (job, attempt, token, pid, logged, loggedEnd, accepted, refused) in try await side.query(
            "SELECT job, attempt, token, pid, started, ended, accepted, refused FROM chaos_attempts ORDER BY job, attempt"
        ).map({ try $0.decode((Int64, Int, Int64, Int, Double, Double?, Bool?, Bool?).self) }) {
            var (started, ended) = (logged, loggedEnd)
            // Every attempt whose logged work took time is in its worker's journal (written first).
            if let loggedEnd, loggedEnd > logged, journaled[.init(job: job, token: token)] == nil {
                unjournaled.append(job)
            }
            if ended == nil {
                if let work = journaled[.init(job: job, token: token)] {
                    (started, ended) = work
                    if ended != nil { fromJournal += 1 }
                } else {
                    neverBegan += 1
                }
            }
            attempts.append(
                Attempt(
                    job: job, attempt: attempt, pid: pid, started: started, ended: ended, accepted: accepted,
                    refused: refused, worked: ended != nil || journaled[.init(job: job, token: token)] != nil))
        }
        if !unjournaled.isEmpty {
            failures.append(
                "\(unjournaled.count) attempts that worked are missing from the workers' journals (jobs \(unjournaled.prefix(5).map(String.init).joined(separator: ", "))): the journals cannot be trusted"
            )
        }
        if fromJournal + neverBegan > 0 {
            say(
                "chaos: from the workers' journals, where the side log lacks an attempt's end: \(fromJournal) ends of work; \(neverBegan) attempts whose work never began"
            )
        }
        var categoryOf: [Int64: String] = [:]
        for (job, category) in try await side.query("SELECT job, category FROM job_categories").map({
            try $0.decode((Int64, String).self)
        }) {
            categoryOf[job] = category
        }
        // Category limits: a sweep over the attempts' intervals.
        for category in categories {
            // (time, +1 start / -1 end, index in attempts); ends sort before starts at the same instant.
            var events: [(Double, Int, Int)] = []
            for (index, attempt) in attempts.enumerated()
            where categoryOf[attempt.job] == category.name && attempt.worked {
                let end = attempt.ended ?? kills[attempt.pid] ?? .infinity
                // An attempt that did no work (its lease too short to start, ended as it started) holds
                // nothing; its end would sort before its own start and leave it counted forever.
                if end <= attempt.started { continue }
                events.append((attempt.started, 1, index))
                events.append((end, -1, index))
            }
            events.sort { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            var running = Set<Int>()
            var most = 0
            var over: [Int] = []
            for (_, delta, index) in events {
                if delta > 0 { running.insert(index) } else { running.remove(index) }
                most = max(most, running.count)
                if over.isEmpty, running.count > category.limit { over = running.sorted() }
            }
            say("chaos: category \(category): at most \(most) at once")
            if most > category.limit {
                failures.append("category \(category) had \(most) holders at once")
                for index in over {
                    let attempt = attempts[index]
                    say(
                        "chaos: detail: over the limit: job \(attempt.job) attempt \(attempt.attempt) pid \(attempt.pid) "
                            + String(
                                format: "from %.3f to %@%@", attempt.started,
                                attempt.ended.map { String(format: "%.3f", $0) } ?? "-",
                                kills[attempt.pid].map { String(format: " (killed at %.3f)", $0) } ?? ""))
                }
                try await explain(
                    PostgresQuery(
                        unsafeSQL:
                            "SELECT DISTINCT job FROM chaos_attempts WHERE job IN (\(over.map { String(attempts[$0].job) }.joined(separator: ", "))) ORDER BY 1"
                    ))
            }
        }
        // Orphans: attempts cut by a kill, and how long until their job was claimed again.
        var orphans = 0
        var worstReclaim = 0.0
        var byJob: [Int64: [Attempt]] = [:]
        for attempt in attempts { byJob[attempt.job, default: []].append(attempt) }
        for attempt in attempts where attempt.ended == nil {
            guard let killedAt = kills[attempt.pid] else { continue }
            orphans += 1
            if let next = byJob[attempt.job]?.first(where: { $0.attempt > attempt.attempt }) {
                worstReclaim = max(worstReclaim, next.started - killedAt)
            }
        }
        let reclaimed = attempts.filter { $0.attempt > 1 }.count
        // Reports the store refused: the attempt's lease had ended (expired, or its claim was lost in a
        // crash). Planned failures that the store accepted, to retry the job, are not among them.
        let rejected = attempts.filter { $0.refused == true }.count
        let retried = attempts.filter { $0.accepted == false && $0.refused == false }.count
        let seconds = elapsed / .seconds(1)
        let summary: [String: Any] = [
            "harness": "postgres-chaos", "seed": seed, "jobs": jobs, "workers": workers, "lost": lost,
            "duplicate_completions": duplicates, "early_starts": early, "left_claimed": leftClaimed + leftHolders,
            "kills": kills.count, "worker_restarts": workerRestarts, "server_restarts": serverRestarts,
            "server_restart_mode": crash ? "immediate" : "fast", "rejected_reports": rejected,
            "failures_accepted_for_retry": retried,
            "attempts": attempts.count, "reclaimed_attempts": reclaimed, "orphaned_attempts": orphans,
            "worst_reclaim_s": (worstReclaim * 1000).rounded() / 1000,
            "lease_s": Double(lease.components.seconds), "seconds": (seconds * 10).rounded() / 10,
            "side_runs": sideRuns, "side_jobs": sideJobs, "side_first_attempt_by_submitter": sideLocal,
            "side_runs_lost": sideLost, "effects_counted": effects, "effects_counted_twice": effectsOff,
            "schedule_ticks": ticks.count, "schedule_gaps": gaps.count,
            "passed": failures.isEmpty,
        ]
        let json = try JSONSerialization.data(withJSONObject: summary, options: [.sortedKeys])
        say(String(decoding: json, as: UTF8.self))
        say(
            """
            chaos: \(jobs) jobs, \(workers) workers, \(String(format: "%.1f", seconds)) s: \(kills.count) SIGKILLs, \
            \(workerRestarts) worker restarts, \(serverRestarts) PostgreSQL \(crash ? "crash(es)" : "restart(s)"); \
            \(attempts.count) attempts, \(reclaimed) re-claimed (planned failures included), \(retried) planned \
            failures accepted for a retry, \(rejected) reports refused, \(orphans) orphaned by kills, worst re-claim \
            \(String(format: "%.2f", worstReclaim)) s (lease \(lease)); lost \(lost), duplicate completions \
            \(duplicates), early starts \(early), left claimed \(leftClaimed + leftHolders); \(sideRuns) side runs \
            submitted by workers (\(sideJobs) jobs; \(sideLocal) first attempts in the submitting process, \
            \(sideLost) lost); \(effects) effects committed with their completions, \(effectsOff) counted twice
            """)
        for failure in failures { say("chaos: FAILED: \(failure)") }
        if failures.isEmpty { say("chaos: passed") }
        return failures.isEmpty
    }

    /// Prints what the store and the side log hold about the jobs `selection` names (at most a few), so
    /// that a failed run can be understood without its database, which is gone once the server stops.
    func explain(_ selection: PostgresQuery) async throws {
        let restarts = try await side.query("SELECT began, ended FROM chaos_server_restarts").map {
            try $0.decode((Double, Double).self)
        }
        for (began, ended) in restarts {
            say(String(format: "chaos: detail: PostgreSQL restart from %.3f to %.3f", began, ended))
        }
        for row in try await side.query(selection) {
            let job = try row.decode(Int64.self)
            let (state, attempts, finished, output, error) = try await side.query(
                """
                SELECT state, attempts, finished, convert_from(output, 'UTF8'), last_error FROM jobs WHERE id = \(job)
                """
            )[0].decode((String, Int, Double?, String?, String?).self)
            say(
                "chaos: detail: job \(job): \(state) after \(attempts) attempts, finished \(finished.map { String(format: "%.3f", $0) } ?? "-"), output \(output ?? "-"), last error \(error ?? "-")"
            )
            for attempt in try await side.query(
                """
                SELECT a.attempt, a.token, a.worker, a.pid, a.started, a.ended, a.reporting, a.reported, a.accepted, k.at
                FROM chaos_attempts a LEFT JOIN chaos_kills k ON k.pid = a.pid WHERE a.job = \(job) ORDER BY a.id
                """
            ) {
                let (number, token, worker, pid, started, ended, reporting, reported, accepted, killed) =
                    try attempt.decode(
                        (Int, Int64, String, Int, Double, Double?, Double?, Double?, Bool?, Double?).self)
                func time(_ value: Double?) -> String { value.map { String(format: "%.3f", $0) } ?? "-" }
                say(
                    "chaos: detail:   attempt \(number) token \(token) by \(worker) (pid \(pid)\(killed.map { ", killed at \(time($0))" } ?? "")): started \(time(started)), ended \(time(ended)), reported \(time(reporting))→\(time(reported)), accepted \(accepted.map(String.init) ?? "-")"
                )
            }
        }
    }
}
