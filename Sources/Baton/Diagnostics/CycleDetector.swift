/// Finds dependency cycles among jobs waiting in queues.
///
/// The graph is "waits for" (see ``Job/cycleEdges()``): a pending job waits for its dependencies, a
/// child its group has not started waits for the group, and an executing group waits for its
/// children. A new cycle must pass through a job that was just added to a queue or just given a
/// dependency (the *roots*).
///
/// **Which added jobs are roots.** An `add` call registers all its jobs with their dependencies first.
/// A job of the call is a root only if something other than a *later* job of the same call waits for
/// it (a job enqueued before, a job of another call, or an earlier job of this call). Why that is
/// enough: in any cycle, take its member with the highest index in the call that added it last; the
/// job waiting for it is outside that call or earlier in it, so that member is a root, and the call's
/// search starts after every edge of the cycle was registered. Graphs built in the usual order
/// (dependencies before dependents) therefore have no roots at all: no search, no cost.
///
/// **The search.** Two depth-first searches start from the roots, one following dependencies and one
/// following dependents, and advance one step each in turn. A search that runs out without meeting a
/// cycle proves there is none through the roots, so the check costs about twice the *smaller* of the
/// two reachable regions (adding a dependency to a waiting job that nothing depends on costs one step).
///
/// Each job is read under its own lock, one at a time. A cycle that two threads close at the same
/// moment is seen by the one whose search starts last, because each registers its edges before it
/// looks for roots.
///
/// **Through exclusivity.** A job whose claim waits for a category waits for the category's holders —
/// and a holder that is a running group waits for its children, which may wait for the job: a deadlock
/// that no dependency shows. Those edges have no cheap reverse (a category's waiting line can be long),
/// so they are searched backward only, from a job whose claim waits behind a group, or whose new
/// dependency's claim waits (`throughClaims`).
enum CycleDetector {
    /// Fails every pending job of every cycle that passes through `roots`.
    static func failCycles(through roots: [Job], throughClaims: Bool = false) {
        guard !roots.isEmpty else { return }
        var unbreakable = 0
        while let cycle = findCycle(through: roots, throughClaims: throughClaims) {
            if fail(cycle, with: JobError.dependencyCycle(cycle.map(\.name))) { continue }
            // No member could be failed (none is pending: it moved on meanwhile). Looking again finds the
            // same cycle; it is not one any more once its members moved on, so stop after a few looks.
            unbreakable += 1
            if unbreakable == 3 { return }
        }
    }

    /// Fails the pending members of a cycle (which breaks it: a group in it then finishes once its
    /// failed child did, and a child its group never started is finished with the group).
    ///
    /// All members move to `finishing` before any of them completes: completing one releases its
    /// dependents, and a member released that way must not become ready and run.
    /// Returns `false` if no member could be failed (none was pending any more).
    private static func fail(_ members: [Job], with error: JobError) -> Bool {
        var steps = members.map { job in job.step { $0.lifecycle.failPending(error) } }
        var failedAny = false
        Propagation.run { work in
            for (index, job) in members.enumerated() {
                if case .none = steps[index].action, steps[index].completion == nil { continue }
                failedAny = true
                job.perform(inPlace: &steps[index], &work)
            }
        }
        return failedAny
    }

    /// A cycle reachable from `roots`, listed so that each job waits for the next, or `nil`.
    static func findCycle(through roots: [Job], throughClaims: Bool = false) -> [Job]? {
        var backward = Search(roots: roots, followDependencies: true, throughClaims: throughClaims)
        if throughClaims {
            while true {
                switch backward.step() {
                case .exhausted: return nil
                case .cycle(let jobs): return jobs
                case .progress: break
                }
            }
        }
        var forward = Search(roots: roots, followDependencies: false, throughClaims: false)
        while true {
            switch backward.step() {
            case .exhausted: return nil
            case .cycle(let jobs): return jobs
            case .progress: break
            }
            switch forward.step() {
            case .exhausted: return nil
            case .cycle(let jobs): return jobs.reversed()  // found along "is waited for by" edges
            case .progress: break
            }
        }
    }

    /// An iterative depth-first search that can be advanced one step at a time.
    struct Search {
        private struct Frame {
            let job: Job
            let neighbours: [Job]
            var next = 0
        }

        enum Step {
            case progress
            case exhausted
            case cycle([Job])
        }

        private let roots: [Job]
        private let followDependencies: Bool
        private let throughClaims: Bool
        private var nextRoot = 0
        private var stack: [Frame] = []
        private var onStack: Set<ObjectIdentifier> = []
        private var done: Set<ObjectIdentifier> = []

        init(roots: [Job], followDependencies: Bool, throughClaims: Bool) {
            self.roots = roots
            self.followDependencies = followDependencies
            self.throughClaims = throughClaims
        }

        mutating func step() -> Step {
            guard let top = stack.indices.last else {
                while nextRoot < roots.count {
                    let root = roots[nextRoot]
                    nextRoot += 1
                    if !done.contains(ObjectIdentifier(root)), push(root) { return .progress }
                }
                return .exhausted
            }
            if stack[top].next < stack[top].neighbours.count {
                let job = stack[top].neighbours[stack[top].next]
                stack[top].next += 1
                let key = ObjectIdentifier(job)
                if onStack.contains(key) {
                    let start = stack.firstIndex { $0.job === job }!
                    return .cycle(stack[start...].map(\.job))
                }
                if !done.contains(key), !push(job) { done.insert(key) }
                return .progress
            }
            let finished = stack.removeLast().job
            onStack.remove(ObjectIdentifier(finished))
            done.insert(ObjectIdentifier(finished))
            return .progress
        }

        /// Enters `job` if it waits for something; returns `false` if it cannot be part of a cycle.
        private mutating func push(_ job: Job) -> Bool {
            guard let edges = job.cycleEdges(throughClaims: throughClaims) else { return false }
            let neighbours = followDependencies ? edges.waitsFor : edges.waitedBy
            stack.append(Frame(job: job, neighbours: neighbours))
            onStack.insert(ObjectIdentifier(job))
            return true
        }
    }
}
