import Baton
import BatonTesting
import Testing

@testable import Baton

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite(.timeLimit(.minutes(1))) struct ExclusivityTests {
    enum Alert {}

    @Test func alertsNeverShowTwoAtOnceAcrossQueues() async {
        let scope = ExclusivityScope(name: "alerts")
        let queues = (0..<3).map { JobQueue(name: "q\($0)", exclusivityScope: scope) }
        let gauge = ConcurrencyGauge()
        let firstInside = Gate()
        let release = Gate()
        var jobs: [Job] = []
        for i in 0..<60 {
            let job = AsyncJob(name: "alert \(i)") { _ in
                gauge.enter()
                firstInside.open()
                await release.waitAsync()  // one alert stays up until the test lets it go
                gauge.leave()
            }
            job.addCondition(MutuallyExclusive<Alert>())
            jobs.append(job)
            queues[i % 3].add(job)
        }
        await firstInside.waitAsync()
        // Every other alert is ready, waiting for the category — not showing (executing) too.
        let all = jobs
        #expect(await eventually { all.filter { $0.state == .ready }.count == 59 })
        #expect(gauge.value == 1)
        release.open()
        for queue in queues { await queue.waitUntilAllJobsAreFinished() }
        #expect(gauge.highest == 1)
        #expect(jobs.allSatisfy { $0.outcomeIfDecided?.didSucceed == true })
    }

    @Test func aCountedCategoryAllowsUpToItsLimit() async {
        let scope = ExclusivityScope(name: "downloads")
        let queues = (0..<3).map { JobQueue(name: "q\($0)", exclusivityScope: scope) }
        let gauge = ConcurrencyGauge()
        let twoInside = Gate()
        for i in 0..<30 {
            let job = AsyncJob(name: "download \(i)") { _ in
                if gauge.enter() == 2 { twoInside.open() }
                await twoInside.waitAsync()  // the first one waits for a second: proves 2 run at once
                gauge.leave()
            }
            job.addCondition(MutuallyExclusive(category: "downloads", limit: 2))
            queues[i % 3].add(job)
        }
        for queue in queues { await queue.waitUntilAllJobsAreFinished() }
        #expect(gauge.highest == 2)
    }

    @Test func aCategoryIsClaimedOnlyWhenTheJobIsOtherwiseReady() async {
        let scope = ExclusivityScope(name: "late")
        let queue = JobQueue(exclusivityScope: scope)
        let never = BlockJob(name: "never enqueued") {}
        let waiting = BlockJob(name: "waiting") {}
        waiting.addDependency(never)
        waiting.addCondition(MutuallyExclusive(category: "db"))
        let other = BlockJob(name: "other") {}
        other.addCondition(MutuallyExclusive(category: "db"))
        queue.add([waiting, other])
        // `waiting` waits for a dependency and holds nothing, so `other` runs.
        #expect(await other.outcome.didSucceed)
        waiting.cancel()
    }

    /// Issue 30: a job its queue started, waiting for a category, is granted it while the queue is
    /// suspended. "Suspended: no job starts" holds for it, and a suspended queue's jobs hold no category:
    /// it gives the grant back (a job of another queue that needs the category runs meanwhile) and
    /// claims again when the queue resumes.
    @Test func aClaimGrantedWhileTheQueueIsSuspendedIsGivenBackUntilTheResume() async {
        let scope = ExclusivityScope(name: "suspend")
        let queue = JobQueue(name: "suspended", maxConcurrentJobs: 4, exclusivityScope: scope)
        let holderGo = Gate()
        let holder = BlockJob(name: "holder") { holderGo.wait() }
        holder.addCondition(MutuallyExclusive(category: "db"))
        let ran = Recorder<String>()
        let waiter = BlockJob(name: "waiter") { ran.record("waiter") }
        waiter.addCondition(MutuallyExclusive(category: "db"))
        let cancelled = BlockJob(name: "cancelled") { ran.record("cancelled") }
        cancelled.addCondition(MutuallyExclusive(category: "io"))
        let ioHolderGo = Gate()
        let ioHolder = BlockJob(name: "io holder") { ioHolderGo.wait() }
        ioHolder.addCondition(MutuallyExclusive(category: "io"))
        queue.add([holder, ioHolder])
        #expect(await eventually { holder.state == .executing && ioHolder.state == .executing })
        queue.add([waiter, cancelled])
        @Sendable func waitsForItsCategory(_ name: String) -> Bool {
            queue.diagnose().jobs.contains { job in
                job.jobName == name && job.blockers.contains { if case .exclusivity = $0 { true } else { false } }
            }
        }
        #expect(await eventually { waitsForItsCategory("waiter") && waitsForItsCategory("cancelled") })

        queue.isSuspended = true
        holderGo.open()
        ioHolderGo.open()
        // The holders hand their categories over before their waiters resume: both claims were granted,
        // and given back.
        _ = await holder.outcome
        _ = await ioHolder.outcome
        #expect(waiter.state == .ready && cancelled.state == .ready)
        #expect(ran.values.isEmpty, "no body runs in a suspended queue")
        #expect(scope.holders(of: "db").isEmpty && scope.holders(of: "io").isEmpty, "it holds no category")
        #expect(queue.diagnose().jobs.first { $0.jobName == "waiter" }?.blockers == [.suspendedQueue(queue.name)])
        #expect(queue.diagnose().runningJobs == 0, "the slots were given back")

        // A job of another queue that needs the category runs while the first queue stays suspended.
        let migrate = BlockJob(name: "migrate") { ran.record("migrate") }
        migrate.addCondition(MutuallyExclusive(category: "db"))
        JobQueue(name: "other", exclusivityScope: scope).add(migrate)
        #expect(await migrate.outcome.didSucceed)

        cancelled.cancel()
        #expect(await cancelled.outcome.isCancelled)
        queue.isSuspended = false
        #expect(await waiter.outcome.didSucceed)
        #expect(ran.values == ["migrate", "waiter"])
    }

    @Test func grantsAreFirstComeFirstServed() async {
        let scope = ExclusivityScope(name: "fifo")
        let queue = JobQueue(maxConcurrentJobs: 8, exclusivityScope: scope)
        queue.isSuspended = true
        let order = Recorder<Int>()
        let jobs = (0..<20).map { i in
            let job = BlockJob(name: "j\(i)") { order.record(i) }
            job.addCondition(MutuallyExclusive(category: "one"))
            return job
        }
        for job in jobs { queue.add(job) }
        await waitUntil { jobs.allSatisfy { $0.state == .ready } }
        queue.isSuspended = false
        await queue.waitUntilAllJobsAreFinished()
        #expect(order.values == Array(0..<20))
    }

    @Test func jobsWantingCategoriesInOppositeOrdersDoNotDeadlock() async throws {
        let scope = ExclusivityScope(name: "pairs")
        // Threads of its own: the claims and releases under test happen on the queue's worker loops,
        // and bodies on Swift concurrency's pool (one thread per core, shared with the whole suite)
        // waited there for turns long enough to miss the deadline without anything being wrong.
        let queue = JobQueue(maxConcurrentJobs: 8, exclusivityScope: scope, workerThreads: .dedicated)
        let gaugeX = ConcurrencyGauge()
        let gaugeY = ConcurrencyGauge()
        for i in 0..<200 {
            let job = BlockJob(name: "j\(i)") {
                gaugeX.enter()
                gaugeY.enter()
                sched_yield()  // let the other workers try their claims meanwhile
                gaugeX.leave()
                gaugeY.leave()
            }
            let categories: [String] = i % 2 == 0 ? ["x", "y"] : ["y", "x"]
            for category in categories { job.addCondition(MutuallyExclusive(category: category)) }
            queue.add(job)
        }
        try await withDeadline(
            .seconds(30), "200 jobs wanting x and y in opposite orders", report: { queue.diagnose().description }
        ) {
            await queue.waitUntilAllJobsAreFinished()
        }
        #expect(gaugeX.highest == 1)
    }

    @Test func cancellingAJobThatWaitsForACategoryLetsTheNextOneIn() async {
        let scope = ExclusivityScope(name: "cancel")
        let queue = JobQueue(exclusivityScope: scope)
        let holding = Gate()
        let release = Gate()
        let holder = AsyncJob(name: "holder") { _ in
            holding.open()
            await release.waitAsync()
        }
        let waiter = BlockJob(name: "waiter") {}
        let third = BlockJob(name: "third") {}
        for job in [holder, waiter, third] { job.addCondition(MutuallyExclusive(category: "c")) }
        queue.add(holder)
        await holding.waitAsync()
        queue.add([waiter, third])
        await waitUntil { scope.holders(of: "c").map(\.name) == ["holder"] && third.state == .ready }
        waiter.cancel()
        release.open()
        #expect(await third.outcome.didSucceed)
        #expect(await waiter.outcome.isCancelled)
        #expect(scope.holders(of: "c").isEmpty)
    }

    @Test func queuesWithTheirOwnScopesDoNotShareCategories() async {
        let a = JobQueue(exclusivityScope: ExclusivityScope(name: "a"))
        let b = JobQueue(exclusivityScope: ExclusivityScope(name: "b"))
        let both = Gate()
        let gauge = ConcurrencyGauge()
        let jobs = [a, b].map { queue in
            let job = AsyncJob { _ in
                if gauge.enter() == 2 { both.open() }
                await both.waitAsync()  // only finishes if both run at once
            }
            job.addCondition(MutuallyExclusive(category: "shared name"))
            queue.add(job)
            return job
        }
        for job in jobs { #expect(await job.outcome.didSucceed) }
    }

    @Test func categoryNames() {
        #expect(ExclusivityCategory.type(Alert.self).key.hasSuffix("ExclusivityTests.Alert"))
        let counted: ExclusivityCategory = ExclusivityCategory("downloads", limit: 2)
        #expect(counted.description == "downloads (at most 2)")
        let literal: ExclusivityCategory = "db"
        #expect(literal.limit == 1)
    }
}

/// The arbiter, driven without threads.
@Suite struct ExclusivityStateMachineTests {
    /// Tickets by number, each for a job of that name.
    final class Tickets {
        var made: [Int: ClaimTicket] = [:]
        var jobs: [Job] = []
        func callAsFunction(_ n: Int, _ categories: [ExclusivityCategory]) -> ClaimTicket {
            let job = BlockJob(name: "\(n)") {}
            jobs.append(job)
            let ticket = ClaimTicket(job: job, categories: categories)
            made[n] = ticket
            return ticket
        }
        subscript(_ n: Int) -> ClaimTicket { made[n]! }
    }

    func names(_ tickets: [ClaimTicket]) -> [String] { tickets.compactMap { $0.job?.name } }

    @Test func grantsInOrderAndReleasesToTheNext() {
        var m = ExclusivityStateMachine()
        let t = Tickets()
        do { let r = m.request(t(1, ["x"])); #expect(r == .granted) }
        do { let r = m.request(t(2, ["x"])); #expect(r == .waiting) }
        do { let r = m.request(t(3, ["x"])); #expect(r == .waiting) }
        #expect(names(m.release(t[1])) == ["2"])
        #expect(names(m.release(t[2])) == ["3"])
        #expect(names(m.release(t[3])) == [])
        #expect(m.holders(of: "x").isEmpty)
    }

    /// A line nobody holds or waits for is kept for the next claim of its category, as good as new: the
    /// smallest limit asked for applies only while it is in use. Idle lines are dropped once there are
    /// many of them.
    @Test func idleLinesAreKeptAsNewAndDroppedWhenMany() {
        var m = ExclusivityStateMachine()
        let t = Tickets()
        #expect(m.request(t(1, [ExclusivityCategory("x", limit: 1)])) == .granted)
        #expect(m.release(t[1]).isEmpty)
        #expect(m.limit(of: "x") == nil, "an idle line has no limit")
        #expect(m.request(t(2, [ExclusivityCategory("x", limit: 2)])) == .granted)
        #expect(m.request(t(3, [ExclusivityCategory("x", limit: 2)])) == .granted, "the earlier limit of 1 is gone")
        #expect(m.request(t(4, [ExclusivityCategory("x", limit: 2)])) == .waiting)
        #expect(names(m.release(t[2])) == ["4"])
        for n in 100..<300 {
            #expect(m.request(t(n, [ExclusivityCategory("idle \(n)")])) == .granted)
            #expect(m.release(t[n]).isEmpty)
        }
        #expect(m.lineCount <= 2 * ExclusivityStateMachine.parkedLinesKept + 2, "lines kept: \(m.lineCount)")
        #expect(m.holders(of: "x").count == 2)
    }

    @Test func allCategoriesAtOnceAndTheOldestWaiterIsNeverStarved() {
        var m = ExclusivityStateMachine()
        let t = Tickets()
        _ = m.request(t(1, ["x"]))
        do { let r = m.request(t(2, ["x", "y"])); #expect(r == .waiting) }
        // 3 only wants y, which is free, but 2 is ahead of it in y's line: first come, first served.
        do { let r = m.request(t(3, ["y"])); #expect(r == .waiting) }
        #expect(names(m.release(t[1])) == ["2"])
        #expect(names(m.holders(of: "y")) == ["2"])
        #expect(names(m.release(t[2])) == ["3"])
    }

    @Test func countedCategories() {
        var m = ExclusivityStateMachine()
        let t = Tickets()
        let two = ExclusivityCategory("d", limit: 2)
        do { let r = m.request(t(1, [two])); #expect(r == .granted) }
        do { let r = m.request(t(2, [two])); #expect(r == .granted) }
        do { let r = m.request(t(3, [two])); #expect(r == .waiting) }
        // A smaller limit asked for later applies.
        do { let r = m.request(t(4, [ExclusivityCategory("d", limit: 1)])); #expect(r == .waiting) }
        #expect(m.limit(of: "d") == 1)
        #expect(names(m.release(t[1])) == [])  // 2 still holds; the limit is now 1
        #expect(names(m.release(t[2])) == ["3"])
    }

    @Test func aReleaseBeforeTheRequestRefusesTheRequest() {
        var m = ExclusivityStateMachine()
        let t = Tickets()
        let early = t(9, ["x"])
        #expect(names(m.release(early)) == [])
        do { let r = m.request(early); #expect(r == .refused) }
        do { let r = m.request(t(10, ["x"])); #expect(r == .granted) }
        #expect(early.job == nil)  // a done ticket keeps no job alive
    }

    @Test func aWaiterThatGivesUpLeavesTheLine() {
        var m = ExclusivityStateMachine()
        let t = Tickets()
        _ = m.request(t(1, ["x"]))
        _ = m.request(t(2, ["x"]))
        _ = m.request(t(3, ["x"]))
        #expect(names(m.release(t[2])) == [])
        #expect(names(m.release(t[1])) == ["3"])
    }

    /// Giving up a waiting ticket costs nothing per waiter behind it: a thousand cancelled waiters
    /// leave as dead entries, dropped as they reach the front.
    @Test func manyWaitersGivingUpLeaveNoOneStuck() {
        var m = ExclusivityStateMachine()
        let t = Tickets()
        _ = m.request(t(0, ["x"]))
        for n in 1...1_000 { _ = m.request(t(n, ["x", "y"])) }
        for n in 1..<1_000 { #expect(names(m.release(t[n])) == []) }
        #expect(names(m.release(t[0])) == ["1000"])
        #expect(names(m.release(t[1_000])) == [])
        #expect(m.holders(of: "x").isEmpty && m.holders(of: "y").isEmpty)
    }
}

/// The arbiter's cost (issue 30): no step scans a line. `moves` counts every time a ticket came into or
/// left a line's window, the only loop a step has.
@Suite struct ExclusivityLineCostTests {
    typealias Tickets = ExclusivityStateMachineTests.Tickets

    /// A claim for {x (limit 3), y} waits at the front of x's line while y is held; 40,000 x-claims
    /// queue behind it and give up; then 40,000 x-only claims come and go. Dead entries were skipped one
    /// by one on every later claim (22.7 s); now they are gone at once.
    @Test func claimsThatGaveUpCostNothingLater() {
        var m = ExclusivityStateMachine()
        let t = Tickets()
        let x = ExclusivityCategory("x", limit: 3)
        #expect(m.request(t(0, ["y"])) == .granted)
        #expect(m.request(t(1, [x, "y"])) == .waiting)
        var granted = 0
        for n in 2..<40_002 where m.request(t(n, [x])) == .granted { granted += 1 }
        #expect(granted == 2, "two units of x are free behind the first claim: 2 and 3 hold them")
        // The 39,998 waiting behind them give up while 2 and 3 hold x; then 2 and 3 let go.
        #expect((4..<40_002).allSatisfy { m.release(t[$0]).isEmpty })
        #expect(m.release(t[2]).isEmpty && m.release(t[3]).isEmpty)
        var missed: [Int] = []  // (one #expect per claim would take longer than the claims)
        for n in 40_002..<80_002 where m.request(t(n, [x])) != .granted || !m.release(t[n]).isEmpty {
            missed.append(n)
        }
        #expect(missed.isEmpty)
        #expect(m.moves <= 4 * 80_000, "moves: \(m.moves)")
        #expect(names(m.release(t[0])) == ["1"])
    }

    /// 2,000 claims for {io, db} wait while db is held (io's limit above 2,000); then 10,000 io-only
    /// claims come and go. Each release rechecked every waiting claim (66 s); now it looks at none.
    @Test func manyWaitersInAWideLineCostNothingPerRelease() {
        var m = ExclusivityStateMachine()
        let t = Tickets()
        let io = ExclusivityCategory("io", limit: 3_000)
        #expect(m.request(t(0, ["db"])) == .granted)
        #expect((1...2_000).allSatisfy { m.request(t($0, [io, "db"])) == .waiting })
        var missed: [Int] = []
        for n in 2_001...12_000 where m.request(t(n, [io])) != .granted || !m.release(t[n]).isEmpty {
            missed.append(n)
        }
        #expect(missed.isEmpty)
        #expect(m.moves <= 4 * 12_000, "moves: \(m.moves)")
        // They are granted one at a time, in order, as db frees up.
        var next = t[0]
        var order: [String] = []
        for n in 1...2_000 {
            order += names(m.release(next))
            next = t[n]
        }
        #expect(order == (1...2_000).map { "\($0)" })
    }

    /// The arbiter against the rule it implements, written plainly: a waiting claim is granted when, in
    /// each of its lines, fewer waiting claims are ahead of it than the line has free units (repeated
    /// until nothing changes). Random claims, limits and releases; the same grants after every step.
    @Test(arguments: [1, 2, 3, 4] as [UInt64]) func grantsWhatThePlainRuleGrants(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var m = ExclusivityStateMachine()
        let t = Tickets()
        var model = PlainArbiter()
        var live: [Int] = []
        for n in 0..<2_000 {
            if live.isEmpty || Bool.random(using: &random) {
                let keys = ["a", "b", "c", "d"].shuffled(using: &random).prefix(Int.random(in: 1...3, using: &random))
                let categories = keys.map { ExclusivityCategory($0, limit: Int.random(in: 1...4, using: &random)) }
                let result = m.request(t(n, categories))
                let expected = model.request(n, categories.map { ($0.key, $0.limit) })
                #expect(result == (expected ? .granted : .waiting), "step \(n)")
                live.append(n)
            } else {
                let n = live.remove(at: Int.random(in: 0..<live.count, using: &random))
                let granted = Set(m.release(t[n]).compactMap { $0.job?.name })
                #expect(granted == Set(model.release(n).map(String.init)), "release of \(n)")
            }
            for key in ["a", "b", "c", "d"] {
                let holders = Set(m.holders(of: key).compactMap { $0.job?.name })
                #expect(holders == Set((model.holders[key] ?? []).map(String.init)), "holders of \(key) at \(n)")
                #expect(m.limit(of: key) == model.limits[key], "limit of \(key) at \(n)")
            }
        }
    }

    func names(_ tickets: [ClaimTicket]) -> [String] { tickets.compactMap { $0.job?.name } }
}

/// The exclusivity rule, with arrays and rescans: the reference for ``ExclusivityLineCostTests``.
struct PlainArbiter {
    var limits: [String: Int] = [:]
    var holders: [String: [Int]] = [:]
    var waiting: [String: [Int]] = [:]
    var wants: [Int: [String]] = [:]
    /// The waiting claims, oldest first.
    var queue: [Int] = []

    mutating func request(_ id: Int, _ categories: [(String, Int)]) -> Bool {
        for (key, limit) in categories { limits[key] = min(limits[key] ?? limit, limit) }
        wants[id] = categories.map(\.0)
        for (key, _) in categories { waiting[key, default: []].append(id) }
        queue.append(id)
        return grantAll().contains(id)
    }

    mutating func release(_ id: Int) -> [Int] {
        for key in wants[id] ?? [] {
            holders[key]?.removeAll { $0 == id }
            waiting[key]?.removeAll { $0 == id }
        }
        let keys = wants[id] ?? []
        wants[id] = nil
        queue.removeAll { $0 == id }
        let granted = grantAll()
        // A line nobody holds or waits for is forgotten, with the smallest limit it was asked for.
        for key in keys where holders[key, default: []].isEmpty && waiting[key, default: []].isEmpty {
            limits[key] = nil
        }
        return granted
    }

    private mutating func grantAll() -> [Int] {
        var granted: [Int] = []
        var changed = true
        while changed {
            changed = false
            for id in queue {
                let admitted = wants[id]!.allSatisfy { key in
                    let ahead = waiting[key]!.firstIndex(of: id)!
                    return ahead < limits[key]! - (holders[key]?.count ?? 0)
                }
                guard admitted else { continue }
                for key in wants[id]! {
                    waiting[key]!.removeAll { $0 == id }
                    holders[key, default: []].append(id)
                }
                queue.removeAll { $0 == id }
                granted.append(id)
                changed = true
            }
        }
        return granted
    }
}
