extension Job {
    /// The jobs this job waits for, as added with ``addDependency(_:)``. Empty once the job finished.
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
    /// evaluates its conditions again once the new dependency finished.
    ///
    /// - Complexity: O(1) before the job is added to a queue. On a job already waiting in a queue,
    ///   the cycle check may visit the jobs connected to it.
    /// - Precondition: The job's body has not started and `dependency` is not the job itself. Breaking
    ///   these is a bug in the calling code, so it stops the program with a message that names both jobs.
    public func addDependency(_ dependency: Job) {
        if dependency === self { fatalError("Baton: job '\(name)' cannot depend on itself.") }
        var withdrawn: (scope: ExclusivityScope, ticket: ClaimTicket)?
        var abandonedEvaluation: Task<Void, Never>?
        let action: JobLifecycle.AddDependencyAction = withCore { core in
            let action = core.lifecycle.addDependency()
            switch action {
            case .record:
                core.dependencies.append(dependency)
            case .register(let withdrawClaim):
                core.dependencies.append(dependency)
                if withdrawClaim, let scope = core.queue?.exclusivityScope, let ticket = core.extras?.claim {
                    withdrawn = (scope, ticket)
                    core.extras?.claim = nil
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
            return
        case .tooLate(let state):
            fatalError(
                "Baton: cannot make job '\(name)' depend on '\(dependency.name)': it is already \(state). Add dependencies before the job starts."
            )
        case .register:
            abandonedEvaluation?.cancel()
            let waits = dependency.registerDependent(self, batch: 0, index: 0)
            Propagation.run { work in
                if let (scope, ticket) = withdrawn {
                    for granted in scope.release(ticket) { granted.job?.claimGranted(granted, &work) }
                }
                if waits {
                    CycleDetector.failCycles(through: [self])
                } else {
                    dependenciesFinished(1, &work)
                }
            }
        }
    }

    /// Adds several dependencies; see ``addDependency(_:)``.
    public func addDependencies(_ dependencies: some Sequence<Job>) {
        for dependency in dependencies { addDependency(dependency) }
    }

    /// Adds a dependency that a condition generated: the job waits for it, but it is not listed in
    /// ``dependencies``. - Precondition: the job is not in a queue yet.
    func addGeneratedDependency(_ dependency: Job) {
        withCore { $0.extrasForWriting().generated.append(dependency) }
    }

    /// Whether the job is a node of the wait-for graph that a cycle could pass through, and if so the
    /// jobs it waits for and the jobs waiting for it (see ``CycleDetector``).
    ///
    /// - A job pending in a queue waits for its dependencies; its dependents and its group wait for it.
    /// - A child that its group has not started yet waits for the group to start.
    /// - A group that is executing waits for its unfinished children.
    func cycleEdges() -> (waitsFor: [Job], waitedBy: [Job])? {
        withCore { core in
            let parent = core.extras?.parent
            switch core.lifecycle.state {
            case .pending:
                let waitedBy = core.dependents + (parent.map { [$0] } ?? []) + (core.extras?.group?.waiting ?? [])
                return (core.allDependencies, waitedBy)
            case .initialized where parent != nil:
                return (parent.map { [$0] } ?? [], core.dependents + (core.extras?.group?.waiting ?? []))
            case .executing:
                guard let group = core.extras?.group, group.started else { return nil }
                return (group.children, core.dependents + (parent.map { [$0] } ?? []))
            default:
                return nil
            }
        }
    }
}
