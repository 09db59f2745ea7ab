extension Job {
    /// The jobs this job waits for, as added with ``addDependency(_:)-(Job)``. Empty once the job finished.
    ///
    /// Dependencies that the job's conditions generated are not listed here (see
    /// ``generatedDependencies``), though the job waits for them too.
    public var dependencies: [Job] { withCore { $0.dependencies } }

    /// The jobs the job's conditions generated (``JobCondition/dependencies(for:)``), which it waits for
    /// after its own dependencies. Empty once the job finished.
    public var generatedDependencies: [Job] { withCore { $0.extras?.generated ?? [] } }

    /// Makes this job wait until `dependency` finished, whatever its outcome.
    ///
    /// Dependencies may be in other queues. A dependency that never finishes (for example one never
    /// added to a queue) keeps this job waiting; ``JobQueue/diagnose()`` shows what it waits for.
    /// A dependency that closes a cycle is detected: every waiting job in the cycle finishes failed
    /// with a ``JobError`` whose code is ``JobError/Code/dependencyCycle`` and whose message names it.
    ///
    /// A dependency can be added until the job's body starts: a job that was already evaluating its
    /// conditions or ready to run goes back to waiting (giving up an exclusivity claim it made), and
    /// evaluates its conditions again once the new dependency finished. Whether a queued job has started
    /// depends on timing, so that case is a value, not a trap: the call returns `false` and changes
    /// nothing.
    ///
    /// - Returns: `true` if the job will wait for `dependency`; `false` if its body had already started
    ///   (or it finished).
    /// - Complexity: O(1) before the job is added to a queue. On a job already waiting in a queue,
    ///   the cycle check may visit the jobs connected to it.
    /// - Precondition: `dependency` is not the job itself (a bug in the calling code: it stops the
    ///   program with a message that names the job).
    @discardableResult
    public func addDependency(_ dependency: Job) -> Bool {
        if dependency === self { fatalError("Baton: job '\(name)' cannot depend on itself.") }
        var withdrawn: (scope: ExclusivityScope, ticket: ClaimTicket)?
        var slotOf: JobQueue?
        var abandonedEvaluation: Task<Void, Never>?
        var priority = JobPriority.normal
        let action: JobLifecycle.AddDependencyAction = withCore { core in
            let action = core.lifecycle.addDependency()
            switch action {
            case .record:
                core.dependencies.append(dependency)
            case .register(let withdrawClaim):
                core.dependencies.append(dependency)
                priority = core.countingPriority()
                if withdrawClaim {
                    // Its queue had started it: it gives back the slot it held while it waited for its claim.
                    slotOf = core.queue
                    if let scope = core.queue?.exclusivityScope, let ticket = core.extras?.claim {
                        withdrawn = (scope, ticket)
                        core.extras?.claim = nil
                    }
                }
                abandonedEvaluation = core.extras?.conditionTask
                core.extras?.conditionTask = nil
                core.extras?.evaluating = []
            case .tooLate:
                break
            }
            return action
        }
        switch action {
        case .record:
            return true
        case .tooLate:
            return false
        case .register:
            abandonedEvaluation?.cancel()
            slotOf?.slotReturned()
            var (counted, raised) = (false, false)
            let registration = dependency.registerDependent(
                self, batch: 0, index: 0, priority: priority, counted: &counted, raised: &raised)
            if counted { countedOn([dependency], at: priority) }
            if raised { Job.propagatePriority(from: [dependency]) }
            Propagation.run { work in
                if let (scope, ticket) = withdrawn {
                    for (granted, job) in scope.release(ticket) { job.claimGranted(granted, &work) }
                }
                switch registration {
                case .finished:
                    dependenciesFinished(1, &work)
                case .waits:
                    CycleDetector.failCycles(through: [self])
                case .waitsForAClaim:
                    CycleDetector.failCycles(through: [self])
                    CycleDetector.failCycles(through: [self], throughClaims: true)
                }
            }
            return true
        }
    }

    /// Adds several dependencies; see ``addDependency(_:)-(Job)``. Returns `false` if any came too late.
    @discardableResult
    public func addDependencies(_ dependencies: some Sequence<Job>) -> Bool {
        var all = true
        for dependency in dependencies where !addDependency(dependency) { all = false }
        return all
    }

    /// Adds a dependency that a condition generated: the job waits for it, but it is not listed in
    /// ``dependencies``. `made`: the condition made it (it joins the queue with this job), so it is
    /// cancelled if this job is cancelled before it runs.
    /// - Precondition: the job is not in a queue yet.
    /// `condition`: the name of the condition that generated it; `paths`: the paths of the conditions
    /// that generated it (see ``ConditionTree``).
    func addGeneratedDependency(_ dependency: Job, made: Bool, by condition: String, paths: [[Int]]) {
        withCore { core in
            let extras = core.extrasForWriting()
            extras.generated.append(dependency)
            extras.generatedBy.append(condition)
            extras.generatedPaths.append(paths)
            if made { extras.made.append(dependency) }
        }
    }

    /// Whether the job is a node of the wait-for graph that a cycle could pass through, and if so the
    /// jobs it waits for and the jobs waiting for it (see ``CycleDetector``). Reads this job, then its
    /// scope or group, one lock at a time.
    ///
    /// - A job pending in a queue waits for its dependencies; its dependents and its group wait for it.
    /// - A job ready but waiting for its exclusivity categories waits for their holders (only when
    ///   `throughClaims`: these edges are followed backward only).
    /// - A child that its group has not started yet waits for the group to start.
    /// - A group that is executing waits for its unfinished children.
    func cycleEdges(throughClaims: Bool = false) -> (waitsFor: [Job], waitedBy: [Job])? {
        enum Node {
            case edges(waitsFor: [Job], waitedBy: [Job])
            case claim(ClaimTicket, ExclusivityScope, waitedBy: [Job])
            case childOf(GroupJob, waitedBy: [Job])
        }
        let node: Node? = withCore { core in
            let parent = core.extras?.parent
            let dependentsAndGroup = core.dependents + (parent.map { [$0] } ?? [])
            switch core.lifecycle.state {
            case .pending:
                return .edges(
                    waitsFor: core.allDependencies, waitedBy: dependentsAndGroup + (core.extras?.group?.waiting ?? []))
            case .ready(.waiting) where throughClaims:
                guard let ticket = core.extras?.claim, let scope = core.queue?.exclusivityScope else { return nil }
                return .claim(ticket, scope, waitedBy: dependentsAndGroup)
            case .initialized:
                guard let parent else { return nil }
                return .childOf(parent, waitedBy: core.dependents + (core.extras?.group?.waiting ?? []))
            case .executing:
                guard let group = core.extras?.group, group.started else { return nil }
                return .edges(waitsFor: group.children, waitedBy: dependentsAndGroup)
            default:
                return nil
            }
        }
        switch node {
        case nil:
            return nil
        case .edges(let waitsFor, let waitedBy)?:
            return (waitsFor, waitedBy)
        case .claim(let ticket, let scope, let waitedBy)?:
            guard let blockers = scope.blockers(of: ticket) else { return nil }  // granted meanwhile
            return (blockers.flatMap(\.holders), waitedBy)
        case .childOf(let parent, let waitedBy)?:
            // Only while the group has not started it (the group lists it as waiting): a child the group
            // already handed to its queue is about to join it, and waits for nothing of the group's.
            let waiting = parent.withCore { $0.extras?.group?.waiting.contains { $0 === self } ?? false }
            return waiting ? ([parent], waitedBy) : nil
        }
    }
}
