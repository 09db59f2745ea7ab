import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Job {
    /// The job's outcome, once it finished.
    ///
    /// Waits without blocking a thread. Cancelling the awaiting `Task` does **not** cancel the job —
    /// a job may have many waiters, and one of them going away is no reason to stop the work for the
    /// others — and the wait goes on until the job finishes (every job in a queue does). To cancel the
    /// job with the task, use ``outcomeCancellingWithTask()``.
    ///
    /// Like every wait in Baton, it returns once the job *handed over*: it reports ``isFinished``
    /// (and so does every child of a group), it gave back its exclusivity categories and its queue's
    /// slot, and nothing its closures and observers captured is kept alive by Baton any more. (A wait
    /// that begins just after a synchronous body finished on its worker loop may find the queue still
    /// counting the job until that loop looks for work again: see *Using Baton*, "Awaiting".)
    public var outcome: JobOutcome {
        get async {
            await withCheckedContinuation { (continuation: CheckedContinuation<JobOutcome, Never>) in
                let outcome: JobOutcome? = withCore { core in
                    if core.lifecycle.isHandedOver { return core.lifecycle.outcome }
                    core.waiters.append(.continuation(continuation))
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        }
    }

    /// The job's outcome, cancelling the job if the awaiting `Task` is cancelled first.
    ///
    /// The job is cancelled with the task's `CancellationError` as reason; this still waits for it
    /// to finish, so the outcome is always the job's real one.
    public func outcomeCancellingWithTask() async -> JobOutcome {
        await withTaskCancellationHandler {
            await outcome
        } onCancel: {
            cancel(reason: CancellationError())
        }
    }

    /// Blocks the calling thread until the job finished and handed over (see ``outcome``), and returns
    /// its outcome.
    ///
    /// Code that runs as part of the job's own finish — its finish observers (``onFinish(_:)``), the
    /// instruments told of it, the `deinit`s of what it lets go of — gets the outcome at once: the job
    /// is finished for it. From such code, a wait for something that can only happen after the finish
    /// (a job that depends on this one, its group, its own queue becoming empty) would never return:
    /// it stops the program with a message naming both (as `JobQueue.waitUntilAllJobsAreFinished()` does).
    ///
    /// - Important: Never call it from the thread that must run the job (for example the main thread
    ///   for ``JobQueue/main``), or it waits forever.
    @available(*, noasync, message: "Use 'await job.outcome' instead")
    @discardableResult
    public func waitUntilFinished() -> JobOutcome {
        if let outcome = HandOverFrame.outcome(of: self) { return outcome }
        let semaphore = DispatchSemaphore(value: 0)
        let outcome: JobOutcome? = withCore { core in
            if core.lifecycle.isHandedOver { return core.lifecycle.outcome }
            core.waiters.append(.semaphore(semaphore))
            return nil
        }
        if let outcome { return outcome }
        HandOverFrame.beforeBlocking("job '\(name)'", roots: [self])
        semaphore.wait()
        return withCore { $0.lifecycle.outcome! }
    }
}

/// The finishes being carried out on the current thread, innermost first: while a job's finish is told
/// to its observers and while it hands over (`Job.complete`), the code it runs — observers,
/// instruments, deinits — is part of that finish.
///
/// The one rule for waits follows from it: a wait returns once what it waits for has finished and
/// handed over, on any thread; code run by a job's finish that waits for that job gets its outcome at
/// once; and a *blocking* wait there for something that needs the finish to end (the job's own queue
/// becoming empty, a job that depends on it or its group) would never return, so it stops the program
/// naming the job and the rule — as swift-nio stops a blocking wait on its own event loop.
struct HandOverFrame {
    let job: Job
    /// `nil` for the frame of an `execute()` (see `Job.runBody`) whose job's outcome is not decided
    /// yet: a job whose finish comes while its `execute()` runs hands over once it returns.
    let outcome: JobOutcome?
    /// The queue the job was in (it counts the job, and its slot, until the hand-over ends).
    let queue: JobQueue?
    /// The frame this one is nested in, on the same thread's stack.
    let outer: UnsafeMutableRawPointer?

    /// Runs `body` with `job`'s finish recorded for this thread. The frame lives on this thread's stack
    /// (no allocation per finish).
    static func running<Result>(
        _ job: Job, _ outcome: JobOutcome?, _ queue: JobQueue?, _ body: () throws -> Result
    ) rethrows -> Result {
        let outer = pthread_getspecific(key)
        var frame = HandOverFrame(job: job, outcome: outcome, queue: queue, outer: outer)
        return try withUnsafeMutablePointer(to: &frame) { pointer in
            pthread_setspecific(key, pointer)
            defer { pthread_setspecific(key, outer) }
            return try body()
        }
    }

    /// The frames of this thread, innermost first (copies).
    private static var frames: [HandOverFrame] {
        var frames: [HandOverFrame] = []
        var next = pthread_getspecific(key)
        while let pointer = next {
            let frame = pointer.assumingMemoryBound(to: HandOverFrame.self).pointee
            frames.append(frame)
            next = frame.outer
        }
        return frames
    }

    /// Whether this thread is carrying out a finish.
    static var isActive: Bool { pthread_getspecific(key) != nil }

    /// The outcome of `job`'s finish if this thread is carrying it out.
    static func outcome(of job: Job) -> JobOutcome? {
        var next = pthread_getspecific(key)
        while let pointer = next {
            let frame = pointer.assumingMemoryBound(to: HandOverFrame.self)
            if frame.pointee.job === job {
                // Inside the job's own `execute()`: once its outcome is decided it is finished for
                // that code (its hand-over waits for `execute()` to return); before, it never will be.
                if let outcome = frame.pointee.outcome ?? job.outcomeIfDecided { return outcome }
                if job.finishesWhenExecuteReturns {
                    stop(
                        waiting: "job '\(job.name)'", inBodyOf: job,
                        because: "it is the job's own body that waits, and the job finishes only when its body returns")
                }
                stop(
                    waiting: "job '\(job.name)'", finishing: job,
                    because:
                        "it is its own execute() that waits, and the job hands over only once execute() returned; finish it from a callback and return"
                )
            }
            next = frame.pointee.outer
        }
        return nil
    }

    /// Called before a blocking wait for `what` (the jobs `roots`; or the queue `queue`, whose
    /// unfinished jobs are `roots`). Outside any finish it does nothing. Inside one, it stops the
    /// program if the wait could only end after a finish this thread carries out; otherwise it gives
    /// back the exclusivity categories and queue slots those finishing jobs still hold, so that a job
    /// needing one of them, or the next job of a serial queue, can run while this thread waits.
    static func beforeBlocking(_ what: @autoclosure () -> String, roots: [Job], queue: JobQueue? = nil) {
        let frames = self.frames
        guard !frames.isEmpty else { return }
        if let queue, let finishing = frames.first(where: { $0.queue === queue }) {
            if finishing.isBody {
                stop(
                    waiting: what(), inBodyOf: finishing.job,
                    because: "queue '\(queue.name)' counts job '\(finishing.job.name)' until its body returns")
            }
            stop(
                waiting: what(), finishing: finishing.job,
                because: "queue '\(queue.name)' counts job '\(finishing.job.name)' until its finish ends")
        }
        if let (finishing, path) = blocker(roots, finishing: frames.map(\.job)) {
            let through =
                path.count > 2
                ? " (through \(path.dropFirst().dropLast().map { "'\($0.name)'" }.joined(separator: " → ")))" : ""
            let body = frames.first { $0.job === finishing }?.isBody ?? false
            let end = body ? "its body returns" : "its finish ends"
            let reason =
                path.count == 1
                ? "queue '\(queue?.name ?? "?")' counts it until \(end)"
                : "job '\(path[0].name)' waits for it\(through) and moves on only after \(end)"
            if body { stop(waiting: what(), inBodyOf: finishing, because: reason) }
            stop(waiting: what(), finishing: finishing, because: reason)
        }
        if let (needing, category, holder, path) = categoryBlocker(roots, bodies: frames.filter(\.isBody).map(\.job)) {
            let waits = path.count > 1 ? ", which '\(path[0].name)' waits for," : ""
            stop(
                waiting: what(), inBodyOf: holder,
                because:
                    "job '\(needing.name)'\(waits) needs exclusivity category '\(category)', which job '\(holder.name)' holds until its body returns"
            )
        }
        if let (needing, queue, holders, path) = slotBlocker(roots, bodies: frames.filter(\.isBody)) {
            let waits = path.count > 1 ? ", which '\(path[0].name)' waits for," : ""
            let names = holders.map { "'\($0.name)'" }.joined(separator: ", ")
            stop(
                waiting: what(), inBodyOf: holders[0],
                because:
                    "job '\(needing.name)'\(waits) needs a slot of queue '\(queue.name)', whose every slot \(holders.count == 1 ? "job" : "jobs") \(names) \(holders.count == 1 ? "holds" : "hold") until \(holders.count == 1 ? "its body returns" : "their bodies return")"
            )
        }
        for each in frames {
            let (slot, ticket) = each.job.withCore { core -> (Bool, ClaimTicket?) in
                // Its hand-over has not begun (its observers are told, or it is parked until its
                // `execute()` returns): its categories are not handed back yet.
                var ticket: ClaimTicket?
                switch core.lifecycle.state {
                case .finishing(let ending), .handingOver(let ending, parked: true):
                    if ending.claimed { ticket = core.extras?.claim.take() }
                default: break
                }
                return (core.lifecycle.giveSlotBackEarly(), ticket)
            }
            if let ticket, let scope = each.queue?.exclusivityScope {
                Propagation.run { work in
                    for (granted, job) in scope.release(ticket) { job.claimGranted(granted, &work) }
                }
            }
            if slot { each.queue?.slotReturned() }
        }
    }

    /// The frame of a synchronous body (not of a finish, nor of a callback job's `execute()`).
    var isBody: Bool { outcome == nil && job.finishesWhenExecuteReturns }

    static func stop(waiting what: String, inBodyOf job: Job, because reason: String) -> Never {
        fatalError(
            "Baton: BUG DETECTED: a blocking wait for \(what) inside the body of job '\(job.name)' cannot return unless something else cancels what it waits for: \(reason). A job's body must not wait for what needs the job to finish (its own queue, itself, a job that depends on it, its group). Add the work as a dependency or a child instead, or wait from outside the job."
        )
    }

    static func stop(waiting what: String, finishing job: Job, because reason: String) -> Never {
        fatalError(
            "Baton: BUG DETECTED: a blocking wait for \(what) inside the finish of job '\(job.name)' (its finish observers, its queue's instruments and the deinits of what it lets go of run as part of it, as does the execute() of a job that finishes by callback) cannot return unless something else cancels what it waits for: \(reason). A wait returns once what it waits for has finished; code run by a job's finish must not block on what needs that finish to end. Wait from a Task instead (await), or after the job finished."
        )
    }

    /// Searches what `roots` wait for (dependencies, generated ones, a group's children), through the
    /// jobs that have not finished, for one of `finishing`. Returns it and the path from a root to it.
    private static func blocker(_ roots: [Job], finishing: [Job]) -> (Job, [Job])? {
        let targets = Set(finishing.map(ObjectIdentifier.init))
        // Each job reached, with the one it was reached from (nil for a root).
        var from: [ObjectIdentifier: Job?] = [:]
        var stack: [Job] = []
        for root in roots where from.updateValue(nil, forKey: ObjectIdentifier(root)) == nil { stack.append(root) }
        while let job = stack.popLast() {
            if targets.contains(ObjectIdentifier(job)) {
                var path = [job]
                while let previous = from[ObjectIdentifier(path[0])] ?? nil { path.insert(previous, at: 0) }
                return (job, path)
            }
            let next: [Job] = job.withCore { core in
                guard !core.lifecycle.isFinished else { return [] }
                var next = core.allDependencies
                if let group = core.extras?.group {
                    next += group.waiting + group.children + group.joining.values.joined()
                }
                return next
            }
            for each in next where from[ObjectIdentifier(each)] == nil {
                from[ObjectIdentifier(each)] = .some(job)
                stack.append(each)
            }
        }
        return nil
    }

    /// Searches what `roots` wait for, as ``blocker(_:finishing:)`` does, for a job that has yet to get
    /// an exclusivity category whose every unit the jobs `bodies` (running their bodies on this thread)
    /// hold: it cannot start before they return. Returns that job, the category, its holder and the path
    /// from a root to the job. (A finishing job's categories are given back before a wait; a body's are
    /// held until it returns.)
    private static func categoryBlocker(_ roots: [Job], bodies: [Job]) -> (Job, String, Job, [Job])? {
        // What the bodies hold, by scope and key.
        var held: [(scope: ExclusivityScope, key: String, holder: Job)] = []
        for body in bodies {
            let (queue, claim) = body.withCore { ($0.queue, $0.extras?.claim) }
            guard let scope = queue?.exclusivityScope, let claim else { continue }
            for category in claim.categories { held.append((scope, category.key, body)) }
        }
        guard !held.isEmpty else { return nil }
        let holders = Set(bodies.map(ObjectIdentifier.init))
        var from: [ObjectIdentifier: Job?] = [:]
        var stack: [Job] = []
        for root in roots where from.updateValue(nil, forKey: ObjectIdentifier(root)) == nil { stack.append(root) }
        while let job = stack.popLast() {
            let (next, queue, own, needsClaim) = job.withCore {
                core -> ([Job], JobQueue?, [ExclusivityCategory], Bool) in
                guard !core.lifecycle.isFinished else { return ([], nil, [], false) }
                var next = core.allDependencies
                if let group = core.extras?.group {
                    next += group.waiting + group.children + group.joining.values.joined()
                }
                // Only a job certain to claim its categories: one whose conditions were satisfied (ready),
                // or one with none to ask (a condition may fail, and the job then finishes without
                // claiming). A running or finishing job claims nothing more.
                let needsClaim: Bool
                switch core.lifecycle.state {
                case .ready: needsClaim = true
                case .pending, .evaluatingConditions:
                    needsClaim =
                        (core.extras?.evaluatedConditions ?? 0) == 0 && (core.extras?.generated.isEmpty ?? true)
                default: needsClaim = false
                }
                return (next, core.queue, core.extras?.categories ?? [], needsClaim)
            }
            if needsClaim, let scope = queue?.exclusivityScope, !holders.contains(ObjectIdentifier(job)),
                case .success(let categories) = scope.claimable(job.categoriesToClaim(own: own), by: job.name)
            {
                for each in held {
                    // The smallest limit asked for applies (the job's own may lower the line's).
                    guard each.scope === scope,
                        let limit = categories.filter({ $0.key == each.key }).map(\.limit).min(),
                        scope.isHeld(each.key, onlyBy: holders, limit: limit)
                    else { continue }
                    var path = [job]
                    while let previous = from[ObjectIdentifier(path[0])] ?? nil { path.insert(previous, at: 0) }
                    return (job, each.key, each.holder, path)
                }
            }
            for each in next where from[ObjectIdentifier(each)] == nil {
                from[ObjectIdentifier(each)] = .some(job)
                stack.append(each)
            }
        }
        return nil
    }

    /// Searches what `roots` wait for, as ``blocker(_:finishing:)`` does, for a job that has yet to get a
    /// slot of a queue whose every slot is held by the jobs of `bodies` (running their bodies on this
    /// thread, each holding a slot of its queue until it returns): it cannot start before they return (a
    /// body of a serial queue waiting for the next job of that queue, directly or through another queue).
    /// Returns that job, the queue, the bodies holding its slots and the path from a root to the job.
    private static func slotBlocker(_ roots: [Job], bodies: [HandOverFrame]) -> (Job, JobQueue, [Job], [Job])? {
        var holders: [ObjectIdentifier: (queue: JobQueue, jobs: [Job])] = [:]
        for body in bodies {
            guard let queue = body.queue else { continue }
            holders[ObjectIdentifier(queue), default: (queue, [])].jobs.append(body.job)
        }
        let full = holders.filter { $0.value.jobs.count >= $0.value.queue.maxConcurrentJobs }
        guard !full.isEmpty else { return nil }
        var from: [ObjectIdentifier: Job?] = [:]
        var stack: [Job] = []
        for root in roots where from.updateValue(nil, forKey: ObjectIdentifier(root)) == nil { stack.append(root) }
        while let job = stack.popLast() {
            let (next, queue, needsSlot) = job.withCore { core -> ([Job], JobQueue?, Bool) in
                guard !core.lifecycle.isFinished else { return ([], nil, false) }
                var next = core.allDependencies
                if let group = core.extras?.group {
                    next += group.waiting + group.children + group.joining.values.joined()
                }
                // A job its queue has yet to start (one started and waiting for its categories holds a
                // slot already), and certain to be started: ready, or with no condition to ask (as in
                // `categoryBlocker`: a job whose condition fails finishes without a slot).
                let needsSlot: Bool
                switch core.lifecycle.state {
                case .ready(.none): needsSlot = true
                case .pending, .evaluatingConditions:
                    needsSlot =
                        (core.extras?.evaluatedConditions ?? 0) == 0 && (core.extras?.generated.isEmpty ?? true)
                default: needsSlot = false
                }
                return (next, core.queue, needsSlot)
            }
            if needsSlot, let queue, let held = full[ObjectIdentifier(queue)] {
                var path = [job]
                while let previous = from[ObjectIdentifier(path[0])] ?? nil { path.insert(previous, at: 0) }
                return (job, queue, held.jobs, path)
            }
            for each in next where from[ObjectIdentifier(each)] == nil {
                from[ObjectIdentifier(each)] = .some(job)
                stack.append(each)
            }
        }
        return nil
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key, nil)
        precondition(rc == 0, "Baton: pthread_key_create failed with \(rc)")
        return key
    }()
}
