/// The work list that finishing jobs feeds instead of recursing: dependents whose dependency finished,
/// groups whose child finished, children whose group finished first, and jobs that became ready
/// (batched per queue, so a fan-out takes each queue's lock once).
///
/// Every entry point that can finish jobs makes one, passes it along, and runs it at the end.
struct Propagation {
    private var dependents: [Job] = []
    private var next = 0
    private var children: [(group: GroupJob, child: Job, outcome: JobOutcome)] = []
    /// Children whose group finished first, and groups whose finish waits for them (a stack: a group's
    /// entry lies under its orphans', so it is delivered once they finished).
    private var orphans: [Orphan] = []
    private enum Orphan {
        case abandon(Job, JobOutcome)
        /// Deliver the group's events (`claimed`: this work list is its deliverer).
        case deliver(Job, claimed: Bool)
    }
    private var cancels: [(job: Job, reason: any Error)] = []
    /// Ready jobs of `readyQueue`, the first one inline (the common case is one: no array).
    private var firstReady: JobQueue.ReadyJob?
    private var moreReady: [JobQueue.ReadyJob] = []
    private var readyQueue: JobQueue?
    /// The order in which jobs of one `add` call become ready on their queue (see ``orderReady(on:of:)``):
    /// the call's jobs, and their positions by identifier once a flush needed them.
    private var readyOrder: (queue: JobQueue, jobs: [Job], positions: [UInt64: Int]?)?

    /// The list of a worker loop's job whose body returned (`bodyCompleted`), not one that user code
    /// started while it ran: the jobs it makes ready last may be left to the loop's thread (see
    /// `JobQueue.jobsBecameReady(_:_:last:)`), since nothing else runs on that thread before the loop
    /// looks for work again.
    private var handsOffLast = false

    /// Makes a work list, lets `body` fill it, and runs it. `handsOffLast`: see the property.
    static func run(handsOffLast: Bool = false, _ body: (inout Propagation) -> Void) {
        var work = Propagation()
        work.handsOffLast = handsOffLast
        body(&work)
        work.run()
    }

    /// Each of `jobs` has one dependency fewer to wait for.
    mutating func release(_ jobs: [Job]) {
        dependents.append(contentsOf: jobs)
    }

    /// `group` must hear that `child` finished.
    mutating func tell(_ group: GroupJob, child: Job, finished outcome: JobOutcome) {
        children.append((group, child, outcome))
    }

    /// `job` will never run: finish it without a queue.
    mutating func abandon(_ job: Job, outcome: JobOutcome) {
        orphans.append(.abandon(job, outcome))
    }

    /// `group` finishes without running: deliver its finish after the orphans abandoned after this call
    /// finished. `claimed`: the caller was made its deliverer (otherwise another thread delivers).
    mutating func deliverLater(_ group: Job, claimed: Bool) {
        orphans.append(.deliver(group, claimed: claimed))
    }

    /// `job` must be asked to cancel.
    mutating func cancel(_ job: Job, reason: any Error) {
        cancels.append((job, reason))
    }

    mutating func enqueueReady(_ entry: JobQueue.ReadyJob, on queue: JobQueue) {
        if queue !== readyQueue {
            flushReady()
            readyQueue = queue
        }
        if firstReady == nil { firstReady = entry } else { moreReady.append(entry) }
    }

    /// Jobs of `queue` that become ready during this run are handed to it in the order of `jobs` (an
    /// `add` call's), those not in it last, each group in the order it became ready.
    mutating func orderReady(on queue: JobQueue, of jobs: [Job]) {
        readyOrder = (queue, jobs, nil)
    }

    private mutating func flushReady(last: Bool = false) {
        guard let queue = readyQueue, var first = firstReady else { return }
        if var order = readyOrder, order.queue === queue, !moreReady.isEmpty {
            // Made when first needed: a chain's batch, whose one job ready at once is alone, never needs it.
            let positions =
                order.positions ?? Dictionary(order.jobs.enumerated().map { ($1.id, $0) }) { first, _ in first }
            order.positions = positions
            readyOrder = order
            var all = [first] + moreReady
            let rank = all.enumerated().map { (positions[$0.element.id] ?? Int.max, $0.offset) }
            all = zip(rank, all).sorted { $0.0 < $1.0 }.map(\.1)
            first = all[0]
            moreReady = Array(all.dropFirst())
        }
        queue.jobsBecameReady(first, moreReady, last: last && handsOffLast)
        firstReady = nil
        moreReady.removeAll(keepingCapacity: true)
    }

    /// Works through the list until it is empty.
    mutating func run() {
        while true {
            if next < dependents.count {
                let job = dependents[next]
                next += 1
                if next >= 4096 {  // drop what was handled so a long release does not hold it all
                    dependents.removeFirst(next)
                    next = 0
                }
                job.dependenciesFinished(1, &self)
            } else if let (group, child, outcome) = children.popLast() {
                group.childFinished(child, outcome: outcome, &self)
            } else if let orphan = orphans.popLast() {
                switch orphan {
                case .abandon(let job, let outcome): job.abandon(&self, outcome: outcome)
                case .deliver(let group, let claimed): if claimed { group.deliver(&self) }
                }
            } else if let (job, reason) = cancels.popLast() {
                job.cancel(reason: reason, &self)
            } else {
                break
            }
        }
        flushReady(last: true)
    }
}
