import Baton
import BatonTesting
import Dispatch
import Testing

/// Issue 9: groups as the peers expect them — they finish after their children, never strand a child,
/// never race a late child, never deadlock through exclusivity, and detect cycles through themselves.
@Suite(.timeLimit(.minutes(2))) struct GroupSemanticsTests {
    /// Item 4: when a group's observers or awaiting callers hear of its finish, every child finished.
    @Test func aGroupFinishesAfterEveryChildFinished() async {
        let queue = JobQueue(name: "groups")
        for iteration in 0..<200 {
            let children = (0..<3).map { BlockJob(name: "child \($0)") {} }
            let produced = BlockJob(name: "produced") {}
            let box = JobBox()
            let producer = BlockJob(name: "producer") { box.job!.produce(produced) }
            box.job = producer
            let all: [Job] = children + [producer, produced]
            let group = GroupJob(name: "group \(iteration)", children: children + [producer])
            let seenByObserver = Recorder<[String]>()
            group.onFinish { _ in seenByObserver.record(all.filter { !$0.isFinished }.map(\.name)) }
            queue.add(group)
            #expect(await group.outcome.didSucceed)
            #expect(all.filter { !$0.isFinished }.map(\.name) == [], "iteration \(iteration)")
            #expect(seenByObserver.values == [[]], "iteration \(iteration)")
        }
    }

    /// Item 14: every child of a group that finished without running finishes too, even one whose
    /// dependency is outside and unfinished, or that depends on a sibling.
    @Test func childrenOfAGroupCancelledBeforeItRanFinishWhateverTheyWaitFor() async throws {
        let outside = BlockJob(name: "outside") {}  // never added to a queue
        let child = BlockJob(name: "child") {}
        child.addDependency(outside)
        let sibling = BlockJob(name: "sibling") {}
        sibling.addDependency(child)
        let group = GroupJob(name: "group", children: [child, sibling])
        group.cancel()
        JobQueue().add(group)
        try await withDeadline(.seconds(10), "the children of a cancelled group finishing") {
            #expect(await group.outcome.isCancelled)
            let outcome = await child.outcome
            #expect(outcome.isCancelled)
            #expect((outcome.error as? JobError)?.code == .groupFinished)
            #expect(await sibling.outcome.isCancelled)
        }
    }

    /// Item 15: a child added from outside while the last child finishes either runs before the
    /// group finishes, or does not run at all (finished cancelled, `groupFinished`) — never after.
    @Test func aChildAddedWhileTheLastChildFinishesNeverRunsAfterTheGroupFinished() async throws {
        let queue = JobQueue(name: "race")
        var ranInside = 0
        var refused = 0
        for iteration in 0..<300 {
            let group = GroupJob(name: "group \(iteration)", children: [BlockJob(name: "last") {}])
            let ranAfterGroup = Recorder<Bool>()
            let late = BlockJob(name: "late") { ranAfterGroup.record(group.isFinished) }
            let groupSawLate = Recorder<Bool>()
            group.onFinish { _ in groupSawLate.record(late.isFinished) }
            queue.add(group)
            DispatchQueue.global().async { group.addChild(late) }
            let lateOutcome = await late.outcome
            _ = await group.outcome
            if ranAfterGroup.count == 1 {
                ranInside += 1
                #expect(ranAfterGroup.values == [false], "iteration \(iteration)")
                #expect(groupSawLate.values == [true], "iteration \(iteration)")
            } else {
                refused += 1
                #expect((lateOutcome.error as? JobError)?.code == .groupFinished, "iteration \(iteration)")
            }
        }
        #expect(ranInside + refused == 300)
    }

    /// Item 16: a child that depends on its own group, and a group that depends on its own child,
    /// are dependency cycles: they fail, naming the jobs, instead of hanging.
    @Test func aChildDependingOnItsGroupIsACycle() async throws {
        let child = BlockJob(name: "child") {}
        let group = GroupJob(name: "group", children: [child])
        child.addDependency(group)
        JobQueue().add(group)
        try await withDeadline(.seconds(10), "a group whose child depends on it") {
            let error = try #require(await child.outcome.error as? JobError)
            #expect(error.code == .dependencyCycle)
            #expect(Set(error.jobs) == ["child", "group"])
            #expect(await group.outcome.didFail)
        }
    }

    @Test func aGroupDependingOnItsOwnChildIsACycle() async throws {
        let child = BlockJob(name: "child") {}
        let group = GroupJob(name: "group", children: [child])
        group.addDependency(child)
        JobQueue().add(group)
        try await withDeadline(.seconds(10), "a group that depends on its child") {
            let error = try #require(await group.outcome.error as? JobError)
            #expect(error.code == .dependencyCycle)
            #expect(Set(error.jobs) == ["child", "group"])
            #expect(await child.outcome.isCancelled)  // it never ran: its group finished first
        }
    }

    /// Item 17: groups nested twenty thousand deep run, finish and are freed without recursion.
    @Test func deeplyNestedGroupsFinishAndAreFreedIteratively() async throws {
        let depth = TestSize.nesting
        // The nestings are made and freed off Swift concurrency's pool: on a loaded machine they hold a
        // thread for seconds, and the pool has one per core.
        let inner = await offThePool { () -> Job in
            var inner: Job = BlockJob(name: "leaf") {}
            for level in 0..<depth { inner = GroupJob(name: "level \(level)", children: [inner]) }
            return inner
        }
        let queue = JobQueue(name: "nested")
        queue.add(inner)
        let root = inner
        try await withDeadline(.seconds(120), "\(depth) nested groups finishing") {
            #expect(await root.outcome.didSucceed)
        }
        let (heldWhileReferenced, freed) = await offThePool { () -> (Bool, Bool) in
            weak var leaf: Job?
            var held = false
            do {
                var never: Job = BlockJob(name: "leaf") {}
                leaf = never
                for level in 0..<depth { never = GroupJob(name: "never \(level)", children: [never]) }
                held = leaf != nil
            }
            return (held, leaf == nil)
        }
        #expect(heldWhileReferenced)
        #expect(freed)  // released level by level, not recursively
    }
}

/// Issue 9, items 3 and 11: exclusivity through groups.
@Suite(.timeLimit(.minutes(1))) struct GroupExclusivityTests {
    /// Item 3: children that ask for their group's category exclude each other; outsiders wait for the
    /// whole group.
    @Test func childrenAskingForTheGroupsCategoryExcludeEachOther() async throws {
        let scope = ExclusivityScope(name: "lending")
        let queue = JobQueue(name: "q", exclusivityScope: scope)
        let gauge = ConcurrencyGauge()
        let firstInside = Gate()
        let release = Gate()
        let children = (0..<4).map { index in
            let child = AsyncJob(name: "child \(index)") { _ in
                _ = gauge.enter()
                firstInside.open()
                await release.waitAsync()
                gauge.leave()
            }
            child.addCondition(MutuallyExclusive(category: "db"))
            return child
        }
        let group = GroupJob(name: "group", children: children)
        group.addCondition(MutuallyExclusive(category: "db"))
        let outsiderSaw = Recorder<Bool>()
        let outsider = BlockJob(name: "outsider") { outsiderSaw.record(group.isFinished) }
        outsider.addCondition(MutuallyExclusive(category: "db"))
        queue.add(group)
        await firstInside.waitAsync()
        queue.add(outsider)
        // The other children wait for the one inside: the group lends its claim to one at a time.
        let waiting = await eventually {
            let report = queue.diagnose().description
            return report.components(separatedBy: "waits for exclusivity category 'db' held by 'child").count == 4
        }
        #expect(waiting, "\(queue.diagnose())")
        #expect(gauge.highest == 1)
        release.open()
        #expect(await group.outcome.didSucceed)
        #expect(await outsider.outcome.didSucceed)
        #expect(gauge.highest == 1)
        #expect(outsiderSaw.values == [true])
    }

    /// Item 11: two groups each holding one category whose child needs the other's — claimed up front,
    /// all at once, so neither waits while holding.
    @Test func groupsWhoseChildrenNeedEachOthersCategoriesDoNotDeadlock() async throws {
        let scope = ExclusivityScope(name: "cross")
        let queue = JobQueue(name: "q", exclusivityScope: scope)
        let importChild = BlockJob(name: "import child") {}
        importChild.addCondition(MutuallyExclusive(category: "network"))
        let importGroup = GroupJob(name: "import", children: [importChild])
        importGroup.addCondition(MutuallyExclusive(category: "db"))
        let syncChild = BlockJob(name: "sync child") {}
        syncChild.addCondition(MutuallyExclusive(category: "db"))
        let syncGroup = GroupJob(name: "sync", children: [syncChild])
        syncGroup.addCondition(MutuallyExclusive(category: "network"))
        queue.add([importGroup, syncGroup])
        try await withDeadline(
            .seconds(10), "two groups needing each other's categories", report: { queue.diagnose().description }
        ) {
            #expect(await importGroup.outcome.didSucceed)
            #expect(await syncGroup.outcome.didSucceed)
        }
        #expect(scope.holders(of: "db").isEmpty && scope.holders(of: "network").isEmpty)
    }

    /// Item 11: a child added while its group runs that asks for a category the group does not hold is
    /// refused with an error (waiting for it while the group holds another could deadlock with an
    /// outsider that wants both).
    @Test func aLateChildAskingForACategoryItsGroupDoesNotHoldIsRefused() async throws {
        let scope = ExclusivityScope(name: "late")
        let queue = JobQueue(name: "q", exclusivityScope: scope)
        let late = BlockJob(name: "late") {}
        late.addCondition(MutuallyExclusive(category: "B"))
        let outsiderQueued = Gate()
        let group = GroupJob(name: "group")
        let first = AsyncJob(name: "first") { _ in
            await outsiderQueued.waitAsync()
            group.addChild(late)
        }
        group.addChild(first)
        group.addCondition(MutuallyExclusive(category: "A"))
        let outsider = BlockJob(name: "outsider") {}
        outsider.addCondition(MutuallyExclusive(category: "A"))
        outsider.addCondition(MutuallyExclusive(category: "B"))
        queue.add(group)
        #expect(await eventually { group.state == .executing })
        queue.add(outsider)
        outsiderQueued.open()
        try await withDeadline(
            .seconds(10), "a group, its late child and an outsider", report: { queue.diagnose().description }
        ) {
            let error = try #require(await late.outcome.error as? JobError)
            #expect(error.code == .categoryNotHeldByGroup)
            #expect(error.message.contains("'B'") && error.message.contains("group 'group'"))
            #expect(await group.outcome.didFail)
            #expect(await outsider.outcome.didSucceed)
        }
    }

    /// Issue 30: a child added while its group waits for its categories (started by its queue, not yet
    /// running) is what the refusal's message asks for — "give the group the child before it starts" —
    /// so it works: the group claims anew, with the child's categories.
    @Test func aChildAddedWhileItsGroupWaitsForItsCategoriesIsClaimedWithIt() async throws {
        let scope = ExclusivityScope(name: "waiting group")
        let queue = JobQueue(name: "q", maxConcurrentJobs: 2, exclusivityScope: scope)
        let holderGo = Gate()
        let holder = BlockJob(name: "holder") { holderGo.wait() }
        holder.addCondition(MutuallyExclusive(category: "A"))
        queue.add(holder)
        #expect(await eventually { holder.state == .executing })

        let group = GroupJob(name: "group")
        group.addChild(BlockJob(name: "first") {})
        group.addCondition(MutuallyExclusive(category: "A"))
        queue.add(group)
        @Sendable func waitsForItsClaim() -> Bool {
            queue.diagnose().jobs.contains { job in
                job.jobName == "group" && job.blockers.contains { if case .exclusivity = $0 { true } else { false } }
            }
        }
        #expect(await eventually { waitsForItsClaim() })

        let holdsB = Recorder<[String]>()
        let late = BlockJob(name: "late") { holdsB.record(scope.holders(of: "B").map(\.name)) }
        late.addCondition(MutuallyExclusive(category: "B"))
        group.addChild(late)
        holderGo.open()
        try await withDeadline(
            .seconds(10), "a group given a child while it waits", report: { queue.diagnose().description }
        ) {
            let outcome = await late.outcome
            #expect(outcome.didSucceed, "\(outcome)")
            #expect(await group.outcome.didSucceed)
        }
        #expect(holdsB.values == [["group"]], "the group holds B and lends it to the child")
        await queue.waitUntilAllJobsAreFinished()
        #expect(queue.diagnose().runningJobs == 0, "every slot given back once")
        let after = BlockJob(name: "after") {}
        queue.add(after)
        #expect(await after.outcome.didSucceed)
    }

    /// Item 11: the diagnosis sees inside groups.
    @Test func diagnoseShowsWhatAGroupsChildrenWaitFor() async throws {
        let queue = JobQueue(name: "outer")
        let release = Gate()
        let running = Gate()
        let blocker = AsyncJob(name: "blocker") { _ in
            running.open()
            await release.waitAsync()
        }
        let waiter = BlockJob(name: "waiter") {}
        waiter.addDependency(blocker)
        let group = GroupJob(name: "import", children: [blocker, waiter])
        queue.add(group)
        await running.waitAsync()  // the report below says the blocker runs: it must have started
        let shown = await eventually {
            queue.diagnose().description.contains("'waiter' (pending) waits for dependencies 'blocker'")
        }
        let report = queue.diagnose().description
        #expect(shown, "\(report)")
        #expect(report.contains("'import' (executing) waits for its children:"))
        #expect(report.contains("    - 'blocker' (executing) is running"))
        release.open()
        #expect(await group.outcome.didSucceed)
    }
}
