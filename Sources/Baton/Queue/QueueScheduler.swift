import DequeModule

/// The scheduling state of one ``JobQueue`` as a plain value, generic over what it schedules so it
/// can be tested without jobs or threads. ``JobQueue`` keeps it behind the queue's lock.
///
/// Ready jobs wait in one FIFO per priority, as identifiers; the members table maps identifiers to
/// jobs. A job that finished without running (cancelled while ready) leaves a stale identifier
/// behind, which is skipped when it reaches the front. The queue therefore holds no finished job.
///
/// Workers are loops that take jobs one after another — started jobs whose exclusivity categories were
/// granted first, then ready ones; the scheduler decides how many loops should exist: no more than the
/// jobs that could run now, minus the loops already looking (a loop inside a job's body, or its
/// finish, is never counted on: its code may wait for the very job it would take next).
struct QueueScheduler<Member> {
    /// Unfinished jobs of the queue, by identifier.
    private(set) var members: [UInt64: Member] = [:]
    /// Jobs that finished before they joined (see `insert(_:_:readyWith:claims:)`); each is removed
    /// when it joins.
    private var finishedBeforeJoining: Set<UInt64> = []
    /// Jobs raised (see `raise(_:to:claims:)`) between joining and becoming members: the priority to
    /// put them on the ready list with.
    private var raisedBeforeJoining: [UInt64: JobPriority] = [:]
    private var ready: [Deque<UInt64>] = Array(repeating: [], count: JobPriority.allCases.count)
    /// Started jobs whose exclusivity categories were granted, in the order they were granted: each holds
    /// its slot already, and runs on the next worker loop that looks, before any ready job (and in a
    /// suspended queue too: it had started). `deliverFirst`: its start must be delivered to its
    /// observers before its body runs.
    private var granted: Deque<(member: Member, deliverFirst: Bool)> = []
    /// Identifiers in the ready lists, including stale ones.
    private(set) var readyCount = 0
    /// At most this many jobs execute at once.
    var maxConcurrent: Int
    /// Jobs executing (holding a slot).
    private(set) var running = 0
    /// Worker loops alive.
    private(set) var workers = 0
    /// Worker loops that took a job and have not looked for the next one yet: inside its body or its
    /// finish, or submitting its claim.
    private(set) var busyWorkers = 0
    var isSuspended = false
    /// Counts additions, starts and finishes, so a watchdog can tell whether anything happened.
    private(set) var progress: UInt64 = 0
    /// The most worker loops at once (a synchronous body occupies a thread).
    let workerLimit: Int

    init(maxConcurrent: Int, workerLimit: Int) {
        self.maxConcurrent = maxConcurrent
        self.workerLimit = workerLimit
    }

    /// Adds a member, on the ready list too if `priority` is given. A job joins its queue (under its
    /// own lock) before it becomes a member (under the queue's): one that finished in between (it was
    /// cancelled) does not become a member.
    mutating func insert(_ id: UInt64, _ member: Member, readyWith priority: JobPriority?, claims: Bool = false) {
        if !finishedBeforeJoining.isEmpty, finishedBeforeJoining.remove(id) != nil {
            if !raisedBeforeJoining.isEmpty { raisedBeforeJoining[id] = nil }
            return
        }
        progress &+= 1
        members[id] = member
        var priority = priority
        if !raisedBeforeJoining.isEmpty, let raised = raisedBeforeJoining.removeValue(forKey: id), let ready = priority
        {
            priority = max(ready, raised)
        }
        if let priority { markReady(id, priority: priority, claims: claims) }
    }

    /// A ready job's effective priority rose: it goes on that priority's ready list too (the entry that
    /// comes up first starts it, the other is skipped as stale). A job that has not become a member yet
    /// is put on it when it does.
    mutating func raise(_ id: UInt64, to priority: JobPriority, claims: Bool) {
        if members[id] != nil {
            markReady(id, priority: priority, claims: claims)
        } else {
            raisedBeforeJoining[id] = max(priority, raisedBeforeJoining[id] ?? priority)
        }
    }

    /// Marks on a ready list's entry that its job claims exclusivity categories when started
    /// (identifiers never reach this bit).
    private static var claimsBit: UInt64 { 1 << 63 }

    /// Puts a member on the ready list of `priority`; `claims`: it claims exclusivity categories when
    /// it is started (see `next(after:)`).
    mutating func markReady(_ id: UInt64, priority: JobPriority, claims: Bool = false) {
        ready[priority.rawValue].append(claims ? id | Self.claimsBit : id)
        readyCount += 1
    }

    /// A job that a worker was given (it counts as running) went back to waiting, or had finished: its
    /// slot is free again.
    mutating func slotReturned() {
        running -= 1
        progress &+= 1
    }

    /// A started job's categories were granted: the next loop that looks runs it.
    mutating func markGranted(_ member: Member, deliverFirst: Bool) {
        granted.append((member, deliverFirst))
        progress &+= 1
    }

    /// How many worker loops to start now; counts them as started.
    mutating func workersToStart() -> Int {
        // (`running` exceeds `maxConcurrent` for a while after the limit was lowered.)
        let startable = granted.count + (isSuspended ? 0 : max(0, min(readyCount, maxConcurrent - running)))
        guard startable > 0 else { return 0 }
        let looking = workers - busyWorkers
        // Granted jobs get their loops beyond `workerLimit`: each holds a slot already, and the loops that
        // are busy may all be waiting for one of them.
        let needed = min(startable - looking, max(workerLimit - workers, granted.count - looking))
        guard needed > 0 else { return 0 }
        workers += needed
        return needed
    }

    enum WorkerReport {
        /// The loop just started.
        case starting
        /// The body of the job it took returned (the job may still be executing, if asynchronous).
        case ran
        /// The job it took had been cancelled meanwhile; its slot is free again.
        case skipped
    }

    /// What a worker loop does next.
    enum Next {
        /// Start the job: run its body.
        case run(Member)
        /// Start the job: it claims its exclusivity categories, holding its slot, and runs once granted.
        case claim(Member)
        /// Run the body of a started job whose categories were granted (see `markGranted`).
        case runGranted(Member, deliverFirst: Bool)

        var member: Member {
            switch self {
            case .run(let member), .claim(let member), .runGranted(let member, _): member
            }
        }
    }

    /// A worker loop asks for its next job. `nil` means the loop must end (it is no longer counted).
    mutating func nextJob(after report: WorkerReport) -> Member? {
        next(after: report)?.member
    }

    /// What a worker loop does next: a granted job first, then the ready jobs by priority. `nil` means the
    /// loop must end (it is no longer counted).
    mutating func next(after report: WorkerReport) -> Next? {
        account(report)
        if let (member, deliverFirst) = granted.popFirst() {
            busyWorkers += 1
            return .runGranted(member, deliverFirst: deliverFirst)
        }
        // A loop started beyond the limit for a granted job (see `workersToStart`) ends once none is left.
        if !isSuspended && running < maxConcurrent && workers <= workerLimit {
            while let entry = popReady() {
                guard let member = members[entry & ~Self.claimsBit] else { continue }  // stale: finished
                running += 1
                busyWorkers += 1
                progress &+= 1
                return entry & Self.claimsBit != 0 ? .claim(member) : .run(member)
            }
        }
        workers -= 1
        return nil
    }

    /// A worker loop hands over to a fresh one (to let other work on its thread run); it stays counted.
    mutating func handOver(after report: WorkerReport) {
        account(report)
    }

    /// What a worker loop's last job means for the counts.
    private mutating func account(_ report: WorkerReport) {
        switch report {
        case .starting: break
        case .ran: busyWorkers -= 1
        case .skipped:
            busyWorkers -= 1
            running -= 1
        }
    }

    private mutating func popReady() -> UInt64? {
        guard readyCount > 0 else { return nil }
        for priority in ready.indices.reversed() where !ready[priority].isEmpty {
            readyCount -= 1
            return ready[priority].removeFirst()
        }
        return nil
    }

    /// A member finished. Returns whether the queue is now empty. The member is handed to `departed` (see
    /// `finished(_:heldSlot:)`).
    mutating func finished(_ id: UInt64, heldSlot: Bool, departed: inout [Member]) -> Bool {
        let (member, isEmpty) = finished(id, heldSlot: heldSlot)
        if let member { departed.append(member) }
        return isEmpty
    }

    /// A member finished. Returns the member it lets go of (`nil`: it had not joined yet), which the owner
    /// releases after unlocking (releasing a job can run its `deinit`, which must not happen under a
    /// lock), and whether the queue is now empty.
    mutating func finished(_ id: UInt64, heldSlot: Bool) -> (departed: Member?, isEmpty: Bool) {
        guard let member = members.removeValue(forKey: id) else {
            // A job that finished between moving to ready and joining (see `insert`).
            finishedBeforeJoining.insert(id)
            return (nil, false)
        }
        if heldSlot { running -= 1 }
        progress &+= 1
        if members.isEmpty {
            // Only stale identifiers can be left: drop them.
            for index in ready.indices { ready[index].removeAll() }
            readyCount = 0
        }
        return (member, members.isEmpty)
    }

}
