import Testing

@testable import Baton

/// The queue scheduler, driven without threads.
@Suite struct QueueSchedulerTests {
    typealias Scheduler = QueueScheduler<String>

    @Test func startsNoMoreWorkersThanJobsThatCanRun() {
        var gone: [String] = []
        var s = Scheduler(maxConcurrent: 2, workerLimit: 8)
        for id in 1...5 as ClosedRange<UInt64> {
            s.insert(id, "job\(id)", readyWith: .normal)
        }
        do { let r = s.workersToStart(); #expect(r == 2) }
        do { let r = s.workersToStart(); #expect(r == 0) }  // those two are looking already
        do { let r = s.nextJob(after: .starting); #expect(r == "job1") }
        do { let r = s.nextJob(after: .starting); #expect(r == "job2") }
        #expect(s.running == 2)
        do { let r = s.workersToStart(); #expect(r == 0) }  // no free slot
        // job1 finishes inside its body: its worker picks the next one itself.
        do { let r = s.finished(1, heldSlot: true, departed: &gone); #expect(r == false) }
        do { let r = s.nextJob(after: .ran); #expect(r == "job3") }
    }

    @Test func higherPriorityFirstThenFIFO() {
        var gone: [String] = []
        var s = Scheduler(maxConcurrent: 1, workerLimit: 1)
        let plan: [(UInt64, JobPriority)] = [(1, .low), (2, .normal), (3, .veryHigh), (4, .normal), (5, .low)]
        for (id, priority) in plan {
            s.insert(id, "\(id)", readyWith: priority)
        }
        do { let r = s.workersToStart(); #expect(r == 1) }
        var order: [String] = []
        var report = Scheduler.WorkerReport.starting
        while let next = s.nextJob(after: report) {
            order.append(next)
            _ = s.finished(UInt64(next)!, heldSlot: true, departed: &gone)
            report = .ran
        }
        #expect(order == ["3", "2", "4", "1", "5"])
        #expect(s.workers == 0)
    }

    @Test func staleEntriesAreSkippedAndTheQueueHoldsNoFinishedMember() {
        var gone: [String] = []
        var s = Scheduler(maxConcurrent: 4, workerLimit: 4)
        for id in 1...3 as ClosedRange<UInt64> {
            s.insert(id, "\(id)", readyWith: .normal)
        }
        do { let r = s.finished(2, heldSlot: false, departed: &gone); #expect(r == false) }  // cancelled while ready
        #expect(s.members[2] == nil)
        #expect(gone == ["2"])  // handed to the owner, to let go of after unlocking
        _ = s.workersToStart()
        do { let r = s.nextJob(after: .starting); #expect(r == "1") }
        do { let r = s.nextJob(after: .starting); #expect(r == "3") }
        do { let r = s.nextJob(after: .starting); #expect(r == nil) }
    }

    @Test func suspendedQueuesStartNothing() {
        var s = Scheduler(maxConcurrent: 4, workerLimit: 4)
        s.isSuspended = true
        s.insert(1, "1", readyWith: .normal)
        do { let r = s.workersToStart(); #expect(r == 0) }
        s.isSuspended = false
        do { let r = s.workersToStart(); #expect(r == 1) }
    }

    @Test func aSkippedJobGivesItsSlotBack() {
        var s = Scheduler(maxConcurrent: 1, workerLimit: 1)
        for id in 1...2 as ClosedRange<UInt64> {
            s.insert(id, "\(id)", readyWith: .normal)
        }
        _ = s.workersToStart()
        do { let r = s.nextJob(after: .starting); #expect(r == "1") }
        #expect(s.running == 1)
        do { let r = s.nextJob(after: .skipped); #expect(r == "2") }
        #expect(s.running == 1)
    }

    /// A job joins its queue (under its own lock) before it becomes a member (under the queue's); a job
    /// cancelled in between finishes first, and must not become a member afterwards.
    @Test func aJobThatFinishedBeforeJoiningDoesNotBecomeAMember() {
        var gone: [String] = []
        var s = Scheduler(maxConcurrent: 1, workerLimit: 1)
        do { let r = s.finished(7, heldSlot: false, departed: &gone); #expect(r == false) }
        s.insert(7, "a", readyWith: .normal)
        #expect(s.members.isEmpty)
        do { let r = s.workersToStart(); #expect(r == 0) }
        s.insert(8, "b", readyWith: nil)  // the mark was used up: later jobs join normally
        #expect(s.members.count == 1)
    }

    /// A started job whose categories were granted holds its slot already: the next loop that looks
    /// runs it before any ready job, in a suspended queue too, and a loop is started for it when none
    /// is looking — even when the queue is over its (lowered) limit.
    @Test func grantedJobsRunFirstAndAlwaysGetALoop() {
        var s = Scheduler(maxConcurrent: 2, workerLimit: 8)
        s.insert(1, "ready", readyWith: .veryHigh)
        do { let r = s.workersToStart(); #expect(r == 1) }
        do { let r = s.next(after: .starting); #expect(r?.member == "ready") }
        s.insert(2, "granted", readyWith: nil)
        s.markGranted("granted", deliverFirst: true)
        // The only loop is inside "ready"'s body: it is not counted on.
        do { let r = s.workersToStart(); #expect(r == 1) }
        s.isSuspended = true
        s.maxConcurrent = 1
        s.insert(3, "waits", readyWith: .veryHigh)
        guard case .runGranted(let member, let deliverFirst)? = s.next(after: .starting) else {
            Issue.record("the granted job was not taken first")
            return
        }
        #expect(member == "granted" && deliverFirst)
        #expect(s.running == 1, "a granted job does not take a second slot")
        do { let r = s.next(after: .ran); #expect(r == nil, "suspended: the ready job waits") }
        s.markGranted("granted later", deliverFirst: false)
        do {
            let r = s.workersToStart(); #expect(r == 1, "over the limit and suspended, a granted job still gets a loop")
        }
    }

    /// Loops for granted jobs are started beyond the worker limit: the loops there are may all be inside
    /// bodies that wait for a granted job.
    @Test func grantedJobsGetLoopsBeyondTheWorkerLimit() {
        var s = Scheduler(maxConcurrent: 8, workerLimit: 2)
        for id in 1...3 as ClosedRange<UInt64> { s.insert(id, "\(id)", readyWith: .normal) }
        do { let r = s.workersToStart(); #expect(r == 2) }
        do { let r = s.next(after: .starting); #expect(r?.member == "1") }
        do { let r = s.next(after: .starting); #expect(r?.member == "2") }
        do { let r = s.workersToStart(); #expect(r == 0, "ready jobs wait for one of the two loops") }
        s.insert(9, "g1", readyWith: nil)
        s.insert(10, "g2", readyWith: nil)
        s.markGranted("g1", deliverFirst: false)
        s.markGranted("g2", deliverFirst: false)
        do { let r = s.workersToStart(); #expect(r == 2, "one loop for each granted job") }
        do { let r = s.workersToStart(); #expect(r == 0, "they are looking already") }
    }

    /// A loop started beyond the worker limit for a granted job ends once no granted job is left: it
    /// does not go on with ready jobs.
    @Test func aLoopBeyondTheLimitEndsWhenNoGrantedJobIsLeft() {
        var s = Scheduler(maxConcurrent: 8, workerLimit: 1)
        for id in 1...3 as ClosedRange<UInt64> { s.insert(id, "\(id)", readyWith: .normal) }
        do { let r = s.workersToStart(); #expect(r == 1) }
        do { let r = s.next(after: .starting); #expect(r?.member == "1") }
        s.insert(9, "g", readyWith: nil)
        s.markGranted("g", deliverFirst: false)
        do { let r = s.workersToStart(); #expect(r == 1) }
        do { let r = s.next(after: .starting); #expect(r?.member == "g") }
        do { let r = s.next(after: .ran); #expect(r == nil, "two loops for a limit of one: this one ends") }
        do { let r = s.next(after: .ran); #expect(r?.member == "2", "the loop within the limit goes on") }
    }
}
