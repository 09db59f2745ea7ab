/// The path of a job from its queue to finished, carried out step by step: each step runs one
/// ``JobLifecycle`` event under the job's lock, then performs the action it returned with no lock held.
///
/// The steps, in order (``JobQueue/add(_:)-([Job])`` starts it, `JobLifecycle.swift` decides each move):
/// 1. ``join(_:batch:index:)``: the job joins a queue; without dependencies it moves on at once.
/// 2. ``registerDependent(_:batch:index:)`` with each unfinished dependency, then the registration
///    hold is dropped (``dependenciesFinished(_:_:)``).
/// 3. ``evaluateConditions(round:_:)``: synchronously where every condition can answer at once,
///    otherwise in one `Task`.
/// 4. The queue's ready list.
/// 5. `runFromQueue(_:)`: a worker of the queue runs the body — or, for a job with exclusivity
///    categories, `claimFromQueue(_:)`: the job holds the slot it was given while it claims them
///    (`claim(round:_:)`), and runs once they are granted.
/// 6. ``bodyCompleted(error:)``: the outcome is decided; ``deliver(_:)`` tells the observers in order,
///    then ``complete(_:_:)`` hands over: categories, the queue's slot, waiters, dependents, the group.
///
/// Anything that finishes jobs passes a ``Propagation`` along: finishing one job never calls into the
/// next, it adds it to the work list, so chains and nested groups of any length finish in constant
/// stack space.
extension Job {
    // MARK: 1. Joining a queue

    /// How a job joined its queue.
    enum Joined {
        /// It went straight to the ready list (no dependencies, conditions or categories).
        case ready(JobQueue.ReadyJob)
        /// It waits for these jobs: register with each (counting itself at `priority`, see
        /// `Job+Priority.swift`), then drop the registration hold.
        case waits(for: [Job], priority: JobPriority)
        /// It moved on at once (to its conditions, or it finished, cancelled before): perform the step.
        case moved(Step)
    }

    /// The job joins `queue` (member `index` of the `add` call `batch`).
    ///
    /// - Precondition: The job is in no queue, was not started by hand and has not finished.
    func join(_ queue: JobQueue, batch: UInt64, index: Int, childOfIdleGroup: Bool = false) -> Joined {
        var refusal: (JobLifecycle.EnqueueRefusal, JobQueue?)?
        var group: GroupJob?
        let joined: Joined? = withCore { core in
            // A group's child is the group's to run: added to another queue too, it ran there and the
            // group stopped the program when it started, on a worker thread. (Told apart below, outside
            // this job's lock: a group that will never run leaves its children free to go.)
            if !childOfIdleGroup, !queue.runsChildrenOfAGroup, let parent = core.extras?.parent {
                group = parent
                return nil
            }
            let dependencies = core.allDependencies
            let result = core.lifecycle.enqueue(
                dependencies: dependencies.count,
                conditions: (core.extras?.evaluatedConditions ?? 0) > 0 || core.extras?.generated.isEmpty == false,
                categories: core.extras?.categories.isEmpty == false, observed: core.wantsEvents)
            switch result {
            case .failure(let why):
                refusal = (why, core.queue)
                return nil
            case .success(let action):
                core.queue = queue
                switch action {
                case .enqueueReady(let claims):
                    return .ready(JobQueue.ReadyJob(id: id, priority: core.effectivePriority, claims: claims))
                case .register:
                    core.cycleMark = CycleMark(
                        batch: batch, index: Int32(clamping: index),
                        // Jobs enqueued earlier, its group, or its own waiting children already wait for it.
                        mayCloseCycle: !core.dependents.isEmpty || core.extras?.parent != nil
                            || core.extras?.group?.waiting.isEmpty == false)
                    return .waits(for: dependencies, priority: core.countingPriority())
                default:
                    return .moved(
                        Step(
                            action: action, queue: queue, priority: core.effectivePriority,
                            leftBehind: core.takeLeftBehind()))
                }
            }
        }
        if let joined { return joined }
        if let group {
            // As `GroupJob.addChildren` does: a group that is in a queue, or started by hand, runs its
            // children; one that never will leaves them free.
            guard group.state == .initialized, group.queue == nil else {
                fatalError(
                    "Baton: cannot add job '\(name)' to queue '\(queue.name)': it is a child of group '\(group.name)', which runs it. Add the group to a queue, not its child."
                )
            }
            return join(queue, batch: batch, index: index, childOfIdleGroup: true)
        }
        let place = refusal?.1.map { "queue '\($0.name)'" } ?? "no queue (it was started by hand)"
        switch refusal?.0 {
        case .alreadyIn where refusal?.1 === queue:
            fatalError("Baton: job '\(name)' was added to queue '\(queue.name)' twice. A job runs once; add it once.")
        case .alreadyIn(let state):
            fatalError(
                "Baton: cannot add job '\(name)' to queue '\(queue.name)': it is already \(state) in \(place). A job runs once; add it to one queue, once."
            )
        case .alreadyFinished, nil:
            fatalError(
                "Baton: cannot add job '\(name)' to queue '\(queue.name)': it has already finished. A job runs once; create a new one."
            )
        }
    }

    /// The fast way in: a job with no dependencies, conditions or categories, not cancelled, joins
    /// `queue` straight to ready in one locked step. Returns `nil` (and changes nothing) otherwise.
    func joinAtOnce(_ queue: JobQueue) -> JobQueue.ReadyJob? {
        withCore { core in
            guard core.dependencies.isEmpty, core.extras == nil, case .initialized(nil) = core.lifecycle.state,
                case .success(.enqueueReady(claims: false)) = core.lifecycle.enqueue(
                    dependencies: 0, conditions: false, categories: false, observed: core.wantsEvents)
            else { return nil }
            core.queue = queue
            return JobQueue.ReadyJob(id: id, priority: core.priority)
        }
    }

    // MARK: 2. Dependencies

    /// What registering a dependent found.
    enum Registration {
        /// This job has already finished: the dependent must not wait for it.
        case finished
        /// The dependent waits for this job.
        case waits
        /// The dependent waits for this job, whose exclusivity claim waits: a cycle through the holders of
        /// its categories is possible (see ``CycleDetector``).
        case waitsForAClaim
    }

    /// Records `dependent` (member `index` of the `add` call `batch`), which counts itself at `priority`
    /// (see `Job+Priority.swift`), to be released when this job finishes. `counted`: its priority was
    /// counted here; `raised`: this job's effective priority rose (the caller carries that on).
    func registerDependent(
        _ dependent: Job, batch: UInt64, index: Int, priority: JobPriority, counted: inout Bool, raised: inout Bool
    ) -> Registration {
        withCore { core in
            guard !core.lifecycle.isHandedOver else { return .finished }
            core.dependents.append(dependent)
            let (didCount, changed) = core.recount(remove: nil, add: priority)
            if didCount { (counted, raised) = (true, changed) }
            // Still handing over: released with the others once the hand-over ends.
            if core.lifecycle.isHandingOver { return .waits }
            let mark = core.cycleMark
            if !(batch != 0 && mark.batch == batch && Int(mark.index) < index) { core.cycleMark.mayCloseCycle = true }
            if case .ready(.waiting) = core.lifecycle.state { return .waitsForAClaim }
            return .waits
        }
    }

    /// Whether the job must be searched for cycles after its `add` call registered everything.
    func takeMayCloseCycle() -> Bool {
        withCore { core in
            defer { core.cycleMark.mayCloseCycle = false }
            return core.cycleMark.mayCloseCycle
        }
    }

    /// `count` of this job's dependencies (or its registration hold) finished.
    func dependenciesFinished(_ count: Int, _ work: inout Propagation) {
        perform(step { $0.lifecycle.dependenciesFinished(count) }, &work)
    }

    // MARK: 3. Conditions

    /// Evaluates the conditions of round `round`: those that can answer at once on this thread, the
    /// others concurrently in one `Task`. Their answers move the job on.
    func evaluateConditions(round: UInt32, _ work: inout Propagation) {
        // in the order they were added
        let (conditions, generated, generatedBy, generatedPaths) = withCore {
            (
                $0.extras?.conditions ?? [], $0.extras?.generated ?? [], $0.extras?.generatedBy ?? [],
                $0.extras?.generatedPaths ?? []
            )
        }
        // A dependency a condition generated (a "sign in") that failed or was cancelled fails that
        // condition: the job must not run without what it was generated for. A condition of the job's
        // fails the job at once; one inside a composite fails there, and the composite combines that
        // with its other conditions' answers (see `ConditionTree`).
        var failures: [[Int]: any Error] = [:]
        for ((dependency, condition), paths) in zip(zip(generated, generatedBy), generatedPaths) {
            guard let outcome = dependency.outcomeIfDecided, !outcome.didSucceed else { continue }
            let error = DependencyOutcomeError(dependencyName: dependency.name, outcome: outcome)
            for path in paths where path.count > 1 && failures[path] == nil { failures[path] = error }
            guard paths.contains(where: { $0.count == 1 }) else { continue }
            conditionsEvaluated(
                round: round,
                failure: JobError(
                    code: .conditionFailed, jobs: [name],
                    message: "job '\(name)' did not run: condition '\(condition)' failed: \(error)", underlying: error),
                &work)
            return
        }
        var later: [Int] = []
        // (Set when there are failures, and cleared when an outer job's evaluation set it: a condition
        // may add jobs whose conditions are evaluated on this thread.)
        let inherited = ConditionTree.evaluation != nil
        for (index, condition) in conditions.enumerated()
        where condition.requiresEvaluation || ConditionTree.hasFailure(under: [index], in: failures) {
            let answer =
                failures.isEmpty && !inherited
                ? condition.evaluateImmediately(for: self)
                : ConditionTree.$evaluation.withValue(
                    failures.isEmpty ? nil : .init(path: [index], failures: failures)
                ) {
                    condition.evaluateImmediately(for: self)
                }
            switch answer {
            case nil:
                later.append(index)
            case .satisfied?:
                continue
            case .failed(let error)?:
                // A failure ends the job whatever the others say: don't start the asynchronous ones.
                conditionsEvaluated(round: round, failure: conditionFailure(condition, error), &work)
                return
            }
        }
        if later.isEmpty {
            conditionsEvaluated(round: round, failure: nil, &work)
            return
        }
        evaluateLater(later, of: conditions, round: round, failures: failures)
    }

    /// Evaluates the conditions at `later` of `conditions` (round `round`) concurrently in one `Task`.
    /// (Apart from `evaluateConditions`, whose `Task` would otherwise make its caller box what it
    /// captures on every call, even when every condition answered at once.)
    private func evaluateLater(
        _ later: [Int], of conditions: [any JobCondition], round: UInt32, failures: [[Int]: any Error]
    ) {
        let names = later.map { conditions[$0].name }
        let startedAt = effectivePriority
        let task = Task(priority: startedAt.taskPriority) {
            var results = [ConditionResult?](repeating: nil, count: conditions.count)
            await withTaskGroup(of: (Int, ConditionResult).self) { group in
                for index in later {
                    group.addTask {
                        // (The task inherits what the thread that made it had set: cleared, unless failures.)
                        let evaluation =
                            failures.isEmpty ? nil : ConditionTree.Evaluation(path: [index], failures: failures)
                        guard evaluation != nil || ConditionTree.evaluation != nil else {
                            return (index, await conditions[index].evaluate(for: self))
                        }
                        return await ConditionTree.$evaluation.withValue(evaluation) {
                            (index, await conditions[index].evaluate(for: self))
                        }
                    }
                }
                for await (index, result) in group {
                    results[index] = result
                    let name = conditions[index].name
                    self.withCore { core in
                        if let at = core.extras?.evaluating.firstIndex(of: name) {
                            core.extras?.evaluating.remove(at: at)
                        }
                    }
                }
            }
            // The first failure in the order the conditions were added, so the error is deterministic.
            var failure: (any Error)?
            for (condition, result) in zip(conditions, results) {
                if case .failed(let error)? = result {
                    failure = self.conditionFailure(condition, error)
                    break
                }
            }
            var work = Propagation()
            self.conditionsEvaluated(round: round, failure: failure, &work)
            work.run()
        }
        let (stale, raised) = withCore { core -> (Bool, JobPriority) in
            guard case .evaluatingConditions(round) = core.lifecycle.state else { return (true, startedAt) }
            core.extras?.evaluating = names
            core.extras?.conditionTask = task
            return (false, core.effectivePriority)
        }
        if stale { task.cancel() }
        // Raised before the task was stored: the raise did not reach it.
        if raised > startedAt { Job.escalate(task, to: raised) }
    }

    /// The job's error when `condition` failed with `error`.
    private func conditionFailure(_ condition: any JobCondition, _ error: any Error) -> JobError {
        JobError(
            code: .conditionFailed, jobs: [name],
            message: "job '\(name)' did not run: condition '\(condition.name)' failed: \(error)",
            underlying: error)
    }

    private func conditionsEvaluated(round: UInt32, failure: (any Error)?, _ work: inout Propagation) {
        perform(
            step { core in
                core.extras?.evaluating = []
                return core.lifecycle.conditionsEvaluated(round: round, failure: failure)
            }, &work)
    }

    // MARK: 4. Exclusivity

    /// Called by the thread that submits the claims of the jobs `queue` started, in the order it started
    /// them: the job, which holds the slot it was given, claims its categories and runs once they are
    /// granted (now, or when `claimGranted(_:_:)` is called: on the next worker loop of the queue that
    /// looks). A job that finished or went back to waiting since it was put on the ready list gives its
    /// slot back.
    func claimFromQueue(_ queue: JobQueue) {
        let action = withCore { $0.lifecycle.startFromQueue(observed: $0.wantsEvents) }
        switch action {
        case .claim(let round):
            var work = Propagation()
            let granted = claim(round: round, &work)
            work.run()
            if case .run(let deliver) = granted { queue.startGranted(self, deliverFirst: deliver) }
        case .run(let deliver):
            queue.startGranted(self, deliverFirst: deliver)
        default:
            queue.slotReturned()
        }
    }

    /// Asks the job's queue's scope for its categories. Returns the action of a claim granted at once
    /// (`.run`: the caller starts the body); a claim granted later runs the job from
    /// `claimGranted(_:_:)`.
    func claim(round: UInt32, _ work: inout Propagation) -> JobLifecycle.Action {
        let (queue, own) = withCore { ($0.queue, $0.extras?.categories ?? []) }
        guard let queue else { return .none }  // finished meanwhile
        let scope = queue.exclusivityScope
        switch scope.claimable(categoriesToClaim(own: own), by: name) {
        case .failure(let refusal):
            perform(step { $0.lifecycle.awaitsClaim(round: round) ? $0.lifecycle.claimRefused(refusal) : .none }, &work)
            return .none
        case .success(let categories):
            let ticket = ClaimTicket(job: self, categories: categories)
            // Only the claim of the current round is submitted, once: a job sent back to waiting and made
            // ready again meanwhile claims anew, and its earlier claim must not hold anything.
            let current: Bool = withCore { core in
                guard core.lifecycle.awaitsClaim(round: round), core.extras?.claim == nil else { return false }
                core.extrasForWriting().claim = ticket
                return true
            }
            guard current else { return .none }
            switch scope.request(ticket) {
            case .granted:
                if queue.isSuspended {
                    withdrawClaim(ticket, &work)
                    return .none
                }
                return withCore { core in
                    core.extras?.claim === ticket
                        ? core.lifecycle.claimGranted(observed: core.wantsEvents) : .none
                }
            case .waiting(let behindGroup):
                // A group that holds what this job waits for may itself wait for this job (through a
                // child's dependency): a cycle through exclusivity, which would never end.
                if behindGroup { CycleDetector.failCycles(through: [self], throughClaims: true) }
                return .none
            }
        }
    }

    /// The scope granted `ticket`: the job runs, on a thread of its queue. A grant of a ticket the job
    /// gave up since is ignored. In a suspended queue the job does not start: it gives the grant back
    /// (see `withdrawClaim(_:_:)`).
    func claimGranted(_ ticket: ClaimTicket, _ work: inout Propagation) {
        if let queue = withCore({ $0.queue }), queue.isSuspended {
            withdrawClaim(ticket, &work)
            return
        }
        perform(
            step { core in
                core.extras?.claim === ticket ? core.lifecycle.claimGranted(observed: core.wantsEvents) : .none
            }, &work)
    }

    /// The job, started by its queue, must not run on the claim `ticket` (its queue was suspended): it
    /// gives the claim and its slot back and returns to the ready list, to claim anew when a worker
    /// takes it again. Jobs granted what it gave back are told through `work`'s caller, in turn.
    func withdrawClaim(_ ticket: ClaimTicket, _ work: inout Propagation) {
        var withdrawn = false
        var back = step { core in
            guard core.extras?.claim === ticket else { return .none }  // gave it up already
            let action = core.lifecycle.withdrawClaimToReady()
            if case .enqueueReady = action {
                core.extras?.claim = nil
                withdrawn = true
            }
            return action
        }
        if withdrawn, let queue = back.queue {
            queue.slotReturned()
            for (granted, job) in queue.exclusivityScope.release(ticket) { job.claimGranted(granted, &work) }
        }
        perform(inPlace: &back, &work)
    }

    // MARK: 5. Running

    /// Called by a worker of the job's queue. Returns `false` if the job was cancelled (or sent back to
    /// waiting) since it was put on the ready list.
    func runFromQueue(_ queue: JobQueue) -> Bool {
        let action = withCore { $0.lifecycle.startFromQueue(observed: $0.wantsEvents) }
        guard case .run(let deliver) = action else { return false }
        runStarted(in: queue, deliverFirst: deliver)
        return true
    }

    /// Runs the body of a job that `queue` started, telling the queue's instruments.
    func runStarted(in queue: JobQueue, deliverFirst: Bool) {
        if queue.instruments.isEmpty {
            runBody(deliverFirst: deliverFirst, in: queue)
        } else {
            for instrument in queue.instruments { instrument.jobWillStart(self, in: queue) }
            queue.withInstruments(starting: self) { runBody(deliverFirst: deliverFirst, in: queue) }
        }
    }

    /// Runs the body of a job started by `queue`, or by hand (`nil`).
    func runBody(deliverFirst: Bool, in queue: JobQueue?) {
        if deliverFirst {
            Propagation.run { deliver(&$0) }
            // An observer of the start may have finished the job (a `CallbackJob`'s `finish`): its outcome
            // is decided, so its body must not run.
            guard withCore({ $0.lifecycle.outcome == nil }) else {
                executeReturned()
                return
            }
        }
        do {
            if finishesWhenExecuteReturns {
                // A blocking wait in the body for what needs the job to finish (its own queue, itself, a
                // job that depends on it) could never return: the frame lets the wait say so.
                try HandOverFrame.running(self, nil, queue) { try execute() }
                bodyReturned(error: nil)
            } else if handsOverAfterExecute {
                // Its finish may come while `execute()` runs (then it hands over once it returns): code
                // in it that waits for the job, or for what needs its finish, is part of that finish.
                try HandOverFrame.running(self, nil, queue) { try execute() }
                executeReturned()
            } else {
                // Its `execute()` runs none of the caller's code (it starts a task, or adds children):
                // its finish need not wait for it.
                executeReturned()
                try execute()
            }
        } catch {
            bodyReturned(error: error)
        }
    }

    /// The `execute()` of a job that does not finish when it returns came back (or was skipped): a
    /// hand-over parked for it (its finish came first) is carried out now, on this thread — the call
    /// held the job's closure, which is released by now.
    private func executeReturned() {
        var completion = withCore { core in core.lifecycle.executeReturned().map { core.takeCompletion($0) } }
        guard completion != nil else { return }
        let onLoop = WorkerContext.bodyReturned(self)
        Propagation.run(handsOffLast: onLoop) { complete(completion.take()!, &$0) }
    }

    // MARK: 6. Finishing

    /// The body completed, with `error` if it threw. Completing twice, or before starting, stops the
    /// program with a message naming the job.
    func bodyCompleted(error: (any Error)?) {
        Propagation.run { bodyCompleted(error: error, &$0) }
    }

    /// The body returned on the thread that runs it (a synchronous body): when that is a worker loop's
    /// thread, the jobs this finish makes ready last may be left to it.
    private func bodyReturned(error: (any Error)?) {
        let onLoop = WorkerContext.bodyReturned(self)
        Propagation.run(handsOffLast: onLoop) { bodyCompleted(error: error, fromExecute: true, &$0) }
    }

    func bodyCompleted(error: (any Error)?, fromExecute: Bool = false, _ work: inout Propagation) {
        var refusal: JobLifecycle.CompletionRefusal?
        let step = step { core -> JobLifecycle.Action in
            switch core.lifecycle.bodyCompleted(error: error, fromExecute: fromExecute) {
            case .success(let action): return action
            case .failure(let why):
                refusal = why
                return .none
            }
        }
        if case .notExecuting(let state)? = refusal {
            // A cancelled job may be finished by its `didCancel` and by its work racing it (the usual
            // pattern of an asynchronous operation): the first finish decided, a later one is ignored. A
            // job cancelled before it was added or started finishes cancelled then; a finish meanwhile is
            // ignored too.
            if (state >= .finishing || state == .initialized) && isCancelled {
                // An `execute()` that threw after its job was finished: a hand-over may wait for it.
                if fromExecute { executeReturned() }
                return
            }
            let problem = state >= .finishing ? "finished twice" : "finished while \(state), before it started"
            fatalError("Baton: job '\(name)' \(problem). Call finish exactly once, after the body started.")
        }
        perform(consume step, &work)
    }

    /// Performs what an event decided (lock not held). Pass the only copy of `step` (a temporary, or
    /// `consume`): a completion it carries releases what the job let go of before the job's waiters
    /// resume, which a copy left with the caller would delay. Steps kept in an array go through
    /// ``perform(inPlace:_:)``.
    func perform(_ step: consuming Step, _ work: inout Propagation) {
        perform(inPlace: &step, &work)
    }

    /// Performs what an event decided (lock not held), taking its completion out of `step`.
    func perform(inPlace step: inout Step, _ work: inout Propagation) {
        // A job cancelled before it ran: the dependencies its conditions made must not run for it.
        for made in step.leftBehind.made {
            work.cancel(made, reason: step.leftBehind.reason ?? CancellationError())
        }
        if !step.leftBehind.orphans.isEmpty {
            // A group that finishes without running: the children it never started finish first (through
            // the work list, so nested groups need no recursion), then its own finish is delivered — when
            // anyone hears of the group, every child reports `isFinished`.
            let orphans = step.leftBehind.orphans
            let error = JobError.groupFinished(
                children: orphans.map(\.name), group: name, outcome: outcomeIfDecided ?? .cancelled(CancellationError())
            )
            work.deliverLater(self, claimed: step.action.isDeliver)
            for orphan in orphans.reversed() { work.abandon(orphan, outcome: .cancelled(error)) }
            return
        }
        if let completion = step.completion.take() {
            complete(consume completion, &work)
            return
        }
        switch step.action {
        case .none, .register, .claim:
            break  // (`.claim` comes from a start by the queue only, see `claimFromQueue`)
        case .run(let deliver):
            // Its categories were granted after it waited for them, holding its slot: it runs on a thread
            // of its queue.
            step.queue?.startGranted(self, deliverFirst: deliver)
        case .evaluateConditions(let round):
            evaluateConditions(round: round, &work)
        case .enqueueReady(let claims):
            guard let queue = step.queue else { break }
            for instrument in queue.instruments { instrument.jobBecameReady(self, in: queue) }
            work.enqueueReady(JobQueue.ReadyJob(id: id, priority: step.priority, claims: claims), on: queue)
        case .interrupt(let reason, let deliver):
            // Interrupt first: delivering the cancel to slow observers must not delay it (and the body
            // may finish meanwhile; its finish is delivered after the cancel, in order, either way).
            interruptBody(reason: reason, &work)
            didCancel(reason: reason)
            if deliver { self.deliver(&work) }
        case .deliver:
            deliver(&work)
        }
    }

    /// Delivers the job's recorded events to its observers, one at a time, in order, outside the lock.
    /// Exactly one thread delivers at a time (the one the machine chose). After the finish, completes.
    func deliver(_ work: inout Propagation) {
        // Completed only once `deliverEvents` returned: its copies of the observer list are gone by
        // then, so the job's waiters resume after everything its observers captured was released.
        guard let completion = deliverEvents() else { return }
        complete(consume completion, &work)
    }

    /// Delivers the recorded events; returns the completion once the finish was delivered (or the job
    /// finished with nobody to tell), or nil when there is nothing more to deliver for now.
    private func deliverEvents() -> JobCompletion? {
        while true {
            var completion: JobCompletion?
            let next: (ObserverEvent, [any JobObserver], JobQueue?)? = withCore { core in
                if core.observers.isEmpty, let handOver = core.lifecycle.finishUnobserved() {
                    completion = core.handOver(handOver)
                    return nil
                }
                guard let event = core.lifecycle.nextEvent() else { return nil }
                return (event, core.observers, core.queue)
            }
            if let completion { return completion }
            guard let (event, observers, queue) = next else { return nil }
            switch event {
            case .start:
                for observer in observers { observer.jobDidStart(self) }
            case .cancel(let reason):
                for observer in observers { observer.jobDidCancel(self, reason: reason) }
            case .produce(let job, let queue):
                for observer in observers { observer.job(self, didProduce: job) }
                // Only now can it start: observers hear of a produced job first, even when the producer
                // produced it from an observer of its own (then this loop delivers the event later).
                queue?.add(job)
            case .progress(let fraction):
                for observer in observers { observer.job(self, didReportProgress: fraction) }
            case .finish(let outcome):
                HandOverFrame.running(self, outcome, queue) {
                    for observer in observers { observer.jobDidFinish(self, outcome: outcome) }
                }
                // Observers added while the finish was being delivered hear of it too.
                var told = observers.count
                while true {
                    var late: [any JobObserver] = []
                    var delivered = false
                    let completion: JobCompletion? = withCore { core in
                        if core.observers.count > told {
                            late = Array(core.observers[told...])
                            return nil
                        }
                        delivered = true
                        return core.handOver(core.lifecycle.finishDelivered())
                    }
                    if delivered { return completion }  // nil: parked until `execute()` returns
                    told += late.count
                    HandOverFrame.running(self, outcome, queue) {
                        for observer in late { observer.jobDidFinish(self, outcome: outcome) }
                    }
                }
            }
        }
    }

    /// The job hands over (lock not held): its exclusivity categories first, then what it let go of
    /// (dependencies, observers, closures — whose deinits may run here), its queue's instruments, then
    /// the end of the hand-over: its queue's slot, its waiters, its dependents and its group.
    ///
    /// Code that runs here is part of the job's finish (it runs in a ``HandOverFrame``): a wait
    /// for this job from it returns the outcome at once, and a blocking wait for something that needs
    /// the hand-over to end stops the program (see ``HandOverFrame/beforeBlocking(_:roots:queue:)``).
    /// Callers pass their only copy (`consume`), or the release would wait for theirs.
    private func complete(_ completion: consuming JobCompletion, _ work: inout Propagation) {
        let ending = completion.ending
        let queue = completion.queue
        let uncount = completion.uncount
        var extras = completion.released.extras
        // Categories first (no user code runs there): code this hand-over runs may wait for a job that
        // needs one of them.
        if ending.claimed, let scope = queue?.exclusivityScope, let ticket = extras?.claim {
            for (granted, job) in scope.release(ticket) { job.claimGranted(granted, &work) }
        }
        var released: JobCompletion? = consume completion
        let (orphans, parent) = HandOverFrame.running(self, ending.outcome, queue) {
            released = nil  // releases the dependencies and observers the job let go of
            let orphans = didComplete(outcome: ending.outcome, executed: ending.executed, extras: extras)
            extras?.conditionTask?.cancel()
            let parent = extras?.parent
            extras = nil
            if let queue {
                for instrument in queue.instruments {
                    instrument.jobDidFinish(self, in: queue, outcome: ending.outcome)
                }
            }
            return (orphans, parent)
        }
        _ = released
        let end = withCore { $0.endHandOver() }
        var drained: [IdleWaiter] = []
        if let queue { drained = queue.jobDidFinish(self, heldSlot: end.holdsSlot, waited: !end.waiters.isEmpty) }
        for waiter in end.waiters { waiter.resume(ending.outcome) }
        for waiter in drained { waiter.resume() }
        if !end.dependents.isEmpty { work.release(end.dependents) }
        if let parent { work.tell(parent, child: self, finished: ending.outcome) }
        for (orphan, outcome) in orphans { work.abandon(orphan, outcome: outcome) }
        // Finished without running: what it waited for no longer runs at its priority for it.
        if let (level, dependencies) = uncount { Job.recount(dependencies, from: level, to: nil) }
    }

    /// Finishes a job that will never run (its group finished first) without a queue.
    func abandon(_ work: inout Propagation, outcome: JobOutcome) {
        perform(step { $0.lifecycle.abandon(outcome, observed: $0.wantsEvents) }, &work)
    }

    // MARK: Steps

    /// An event's action with what performing it needs from the job, read in the same locked region.
    struct Step {
        var action: JobLifecycle.Action
        var queue: JobQueue?
        var priority: JobPriority
        /// Set when the job finished in the step itself (nobody to tell): hand it over.
        var completion: JobCompletion? = nil
        /// Set when a job finishes without running: what it leaves behind (see
        /// `JobCore.takeLeftBehind()`).
        var leftBehind = JobCore.LeftBehind()
    }

    /// Runs one lifecycle event under the lock. A job that finished with no observer to tell is
    /// completed in the same locked region (one lock instead of two per finish).
    func step(_ event: (inout JobCore) -> JobLifecycle.Action) -> Step {
        withCore { core in
            let action = event(&core)
            var completion: JobCompletion?
            let leftBehind = core.takeLeftBehind()
            if leftBehind.orphans.isEmpty, case .deliver = action, core.observers.isEmpty,
                let handOver = core.lifecycle.finishUnobserved()
            {
                completion = core.handOver(handOver)
            }
            return Step(
                action: action, queue: core.queue, priority: core.effectivePriority, completion: completion,
                leftBehind: leftBehind)
        }
    }
}
