import Baton
import BatonTesting
import Testing

@Suite(.timeLimit(.minutes(1))) struct GroupJobTests {
    @Test func finishesAfterAllChildrenAndReportsWhichFailed() async throws {
        let ran = Recorder<String>()
        let a = BlockJob(name: "a") { ran.record("a") }
        let b = BlockJob(name: "b") { throw Boom(tag: 1) }
        let c = BlockJob(name: "c") { ran.record("c") }
        c.addDependency(a)
        let group = GroupJob(name: "group", children: [a, b, c])
        JobQueue().add(group)
        let error = try #require(await group.outcome.error as? GroupJobError)
        #expect(error.failures.map(\.childName) == ["b"])
        #expect(error.description.contains("'b' failed"))
        #expect(Set(ran.values) == ["a", "c"])
        #expect(c.isFinished && a.isFinished && b.isFinished)
    }

    /// A group that never runs leaves its children free to go, to a queue as to another group.
    @Test func theChildOfAGroupThatNeverRunsMayBeAddedToAQueue() async {
        let ran = Recorder<String>()
        let child = BlockJob(name: "child") { ran.record("child") }
        let group = GroupJob(name: "never run", children: [child])
        JobQueue(name: "q").add(child)
        #expect(await child.outcome.didSucceed)
        #expect(ran.values == ["child"])
        #expect(group.state == .initialized)
    }

    /// The WWDC paged fetch: each page job adds the next page to the group until there is none.
    @Test func aPagedFetchGrowsTheGroupWhileItRuns() async {
        let pages = Recorder<Int>()
        let group = GroupJob(name: "paged fetch", maxConcurrentChildren: 2)
        @Sendable func page(_ n: Int) -> Job {
            BlockJob(name: "page \(n)") {
                pages.record(n)
                if n < 5 { group.addChild(page(n + 1)) }
            }
        }
        group.addChild(page(1))
        let produced = Recorder<String>()
        group.onProduce { _, child in produced.record(child.name) }
        JobQueue().add(group)
        #expect(await group.outcome.didSucceed)
        #expect(pages.values == [1, 2, 3, 4, 5])
        #expect(produced.values == ["page 2", "page 3", "page 4", "page 5"])
    }

    /// Observers hear of a child added while the group runs before that child can start, so the
    /// reports follow cause and effect: a page is always reported before the page it adds (reporting
    /// after the child joined let the next page's report overtake it now and then; 100 rounds).
    @Test func childrenAddedWhileTheGroupRunsAreReportedInTheOrderTheyWereAdded() async {
        for round in 0..<100 {
            let group = GroupJob(name: "paged fetch \(round)", maxConcurrentChildren: 4)
            @Sendable func page(_ n: Int) -> Job {
                BlockJob(name: "page \(n)") { if n < 12 { group.addChild(page(n + 1)) } }
            }
            group.addChild(page(1))
            let produced = Recorder<String>()
            group.onProduce { _, child in produced.record(child.name) }
            JobQueue().add(group)
            #expect(await group.outcome.didSucceed)
            let expected = (2...12).map { "page \($0)" }
            #expect(produced.values == expected, "round \(round)")
            if produced.values != expected { break }
        }
    }

    final class Counting: GroupJob, @unchecked Sendable {
        let seen = Recorder<String>()
        override func childDidFinish(_ child: Job, outcome: JobOutcome) {
            seen.record(child.name)
            if child.name == "first" { addChild(BlockJob(name: "added by the hook") {}) }
        }
    }

    @Test func aSubclassReactsToEachChildAndCanAddMore() async {
        let group = Counting(name: "counting", children: [BlockJob(name: "first") {}])
        JobQueue().add(group)
        #expect(await group.outcome.didSucceed)
        #expect(group.seen.values == ["first", "added by the hook"])
    }

    @Test func aChildsProduceLandsInTheGroup() async {
        let produced = BlockJob(name: "produced") {}
        let box = JobBox()
        let producer = BlockJob(name: "producer") { box.job!.produce(produced) }
        box.job = producer
        let group = GroupJob(name: "g", children: [producer])
        JobQueue().add(group)
        #expect(await group.outcome.didSucceed)
        #expect(produced.isFinished)  // the group waited for it
    }

    @Test func cancellingTheGroupCancelsItsChildren() async {
        let inside = Gate()
        let child = AsyncJob(name: "child") { _ in
            inside.open()
            await Gate().waitAsyncUnlessCancelled()
            try Task.checkCancellation()
        }
        let waiting = BlockJob(name: "waiting") {}
        waiting.addDependency(child)
        let group = GroupJob(name: "g", children: [child, waiting])
        JobQueue().add(group)
        await inside.waitAsync()
        group.cancel()
        #expect(await group.outcome.isCancelled)
        #expect(await child.outcome.isCancelled)
        #expect(await waiting.outcome.isCancelled)
    }

    @Test func childrenOfAGroupCancelledBeforeItRanStillFinish() async {
        let child = BlockJob(name: "child") {}
        let group = GroupJob(name: "g", children: [child])
        group.cancel()
        JobQueue().add(group)
        #expect(await group.outcome.isCancelled)
        #expect(await child.outcome.isCancelled)
    }

    @Test func childrenMayDependOnJobsOutsideTheGroup() async {
        let order = Recorder<String>()
        let outside = BlockJob(name: "outside") { order.record("outside") }
        let child = BlockJob(name: "child") { order.record("child") }
        child.addDependency(outside)
        let group = GroupJob(name: "g", children: [child])
        let queue = JobQueue()
        queue.add(group)
        queue.add(outside)
        #expect(await group.outcome.didSucceed)
        #expect(order.values == ["outside", "child"])
    }

    @Test func aGroupAndItsChildSharingACategoryDoNotDeadlock() async {
        let scope = ExclusivityScope(name: "shared")
        let queue = JobQueue(exclusivityScope: scope)
        let child = BlockJob(name: "child") {}
        child.addCondition(MutuallyExclusive(category: "import"))
        let group = GroupJob(name: "group", children: [child])
        group.addCondition(MutuallyExclusive(category: "import"))
        // Another job of the category waits for the group as a whole.
        let other = BlockJob(name: "other") {}
        other.addCondition(MutuallyExclusive(category: "import"))
        queue.add([group, other])
        #expect(await group.outcome.didSucceed)
        #expect(await other.outcome.didSucceed)
        #expect(scope.holders(of: "import").isEmpty)
    }

    /// A group with categories claims its children's up front, all at once, and lends them.
    @Test func aGroupClaimsItsChildrensCategoriesUpFront() async {
        let scope = ExclusivityScope(name: "outer")
        let queue = JobQueue(exclusivityScope: scope)
        let inside = Gate()
        let release = Gate()
        let child = AsyncJob(name: "child") { _ in
            inside.open()
            await release.waitAsync()
        }
        child.addCondition(MutuallyExclusive(category: "import"))  // the group's: lent
        child.addCondition(MutuallyExclusive(category: "network"))  // claimed by the group for it
        let plain = BlockJob(name: "plain child") {}
        plain.addCondition(MutuallyExclusive(category: "import"))
        let group = GroupJob(name: "group", children: [child, plain])
        group.addCondition(MutuallyExclusive(category: "import"))
        let outsider = BlockJob(name: "outsider") {}
        outsider.addCondition(MutuallyExclusive(category: "network"))
        queue.add(group)
        await inside.waitAsync()
        queue.add(outsider)
        #expect(scope.holders(of: "network").map(\.name) == ["group"])
        #expect(scope.holders(of: "import").map(\.name) == ["group"])
        // The queue starts the outsider, which then claims "network" (on a worker) and waits for it.
        #expect(
            await eventually {
                queue.diagnose().jobs.first { $0.jobName == "outsider" }?.blockers.first?.description.contains(
                    "held by 'group'") == true
            })
        release.open()
        #expect(await group.outcome.didSucceed)
        #expect(await outsider.outcome.didSucceed)
        #expect(scope.holders(of: "network").isEmpty)
        #expect(scope.holders(of: "import").isEmpty)
    }

    @Test func progressIsTheWeightedMeanOfTheChildren() async {
        let gate = Gate()
        let light = BlockJob(name: "light") {}
        let heavy = AsynchronousHeavy(gate: gate)
        let group = GroupJob(name: "g")
        group.addChild(light, weight: 1)
        group.addChild(heavy, weight: 3)
        let reports = Recorder<Double>()
        group.onProgress { reports.record($0) }
        JobQueue().add(group)
        await heavy.halfway.waitAsync()
        await waitUntil { reports.values.contains(0.25 + 0.375) }
        gate.open()
        #expect(await group.outcome.didSucceed)
        #expect(group.progress == 1)
        #expect(reports.values.last == 1)
    }

    final class AsynchronousHeavy: AsyncJob, @unchecked Sendable {
        let gate: Gate
        let halfway = Gate()
        init(gate: Gate) {
            self.gate = gate
            super.init(name: "heavy")
        }
        override func perform() async throws {
            reportProgress(0.5)
            halfway.open()
            await gate.waitAsync()
        }
    }
}
