import Testing

@testable import Baton

/// The job lifecycle machine, driven event by event without threads or jobs.
@Suite struct JobLifecycleTests {
    struct Boom: Error {}

    /// A readable name for an action, so expectations compare strings.
    func name(_ action: JobLifecycle.Action) -> String {
        switch action {
        case .none: "none"
        case .register: "register"
        case .evaluateConditions(let round): "evaluate(\(round))"
        case .claim: "claim"
        case .enqueueReady: "enqueueReady"
        case .run(let deliver): deliver ? "run+deliver" : "run"
        case .interrupt(_, let deliver): deliver ? "interrupt+deliver" : "interrupt"
        case .deliver: "deliver"
        }
    }

    func enqueued(
        _ machine: inout JobLifecycle, dependencies: Int = 0, conditions: Bool = false, categories: Bool = false,
        observed: Bool = false
    ) -> String {
        switch machine.enqueue(
            dependencies: dependencies, conditions: conditions, categories: categories, observed: observed)
        {
        case .success(let action): name(action)
        case .failure(.alreadyFinished): "alreadyFinished"
        case .failure(.alreadyIn(let state)): "alreadyIn(\(state))"
        }
    }

    /// Delivers every recorded event; returns their names.
    func drain(_ machine: inout JobLifecycle) -> [String] {
        var names: [String] = []
        while let event = machine.nextEvent() {
            switch event {
            case .start: names.append("start")
            case .cancel: names.append("cancel")
            case .produce: names.append("produce")
            case .progress: names.append("progress")
            case .finish(let outcome):
                names.append("finish(\(outcome.didSucceed ? "succeeded" : outcome.didFail ? "failed" : "cancelled"))")
                _ = machine.finishDelivered()
                return names
            }
        }
        return names
    }

    @Test func aJobWithNothingToWaitForGoesStraightToReady() {
        var m = JobLifecycle()
        #expect(enqueued(&m) == "enqueueReady")
        #expect(m.publicState == .ready)
        #expect(name(m.startFromQueue(observed: false)) == "run")
        #expect(m.publicState == .executing)
        guard case .success(let finish) = m.bodyCompleted(error: nil) else { Issue.record("refused"); return }
        #expect(name(finish) == "deliver")
        #expect(m.publicState == .finishing)
        #expect(m.outcome?.didSucceed == true)
        #expect(m.finishUnobserved() != nil)
        #expect(m.publicState == .finished)
        #expect(m.isFinished)
    }

    @Test func aSynchronousBodyHandsOverAtOnceThenFinishes() {
        var m = JobLifecycle()
        _ = enqueued(&m)
        _ = m.startFromQueue(observed: false)
        guard case .success = m.bodyCompleted(error: nil, fromExecute: true) else { Issue.record("refused"); return }
        guard case .now(let ending)? = m.finishUnobserved() else { Issue.record("not handed over now"); return }
        #expect(ending.heldSlot)
        #expect(m.isFinished && m.isHandingOver && !m.isHandedOver)
        #expect(m.publicState == .finished)
        // A waiter that must block meanwhile gives the slot back once; the end of the hand-over knows.
        let first = m.giveSlotBackEarly()
        let second = m.giveSlotBackEarly()
        #expect(first && !second)
        let (_, holdsSlot) = m.handOverEnded()
        #expect(!holdsSlot)
        #expect(m.isHandedOver && !m.isHandingOver)
    }

    @Test func aFinishWhileExecuteRunsIsParkedUntilExecuteReturns() {
        var m = JobLifecycle()
        _ = enqueued(&m)
        _ = m.startFromQueue(observed: false)
        // `done()` inside the closure, or from another thread, while `execute()` still runs.
        guard case .success = m.bodyCompleted(error: nil) else { Issue.record("refused"); return }
        guard case .parked? = m.finishUnobserved() else { Issue.record("not parked"); return }
        #expect(m.isFinished && !m.isHandedOver)
        guard let ending = m.executeReturned() else { Issue.record("not un-parked"); return }
        #expect(ending.outcome.didSucceed)
        let again = m.executeReturned()
        #expect(again == nil)  // once
        let (_, holdsSlot) = m.handOverEnded()
        #expect(holdsSlot)
        #expect(m.isHandedOver)
    }

    @Test func executeReturningBeforeTheFinishLeavesNothingParked() {
        var m = JobLifecycle()
        _ = enqueued(&m)
        _ = m.startFromQueue(observed: false)
        let parked = m.executeReturned()
        #expect(parked == nil)  // a callback job whose work goes on elsewhere
        guard case .success = m.bodyCompleted(error: nil) else { Issue.record("refused"); return }
        guard case .now? = m.finishUnobserved() else { Issue.record("parked after execute() returned"); return }
    }

    @Test func waitsForEveryDependencyAndTheRegistrationHold() {
        var m = JobLifecycle()
        #expect(enqueued(&m, dependencies: 2) == "register")
        #expect(m.waitingFor == 3)
        #expect(name(m.dependenciesFinished(1)) == "none")
        #expect(name(m.dependenciesFinished(1)) == "none")
        if case .register(let withdraw) = m.addDependency() {
            #expect(!withdraw)
        } else {
            Issue.record("not registered")
        }
        #expect(m.waitingFor == 2)
        #expect(name(m.dependenciesFinished(1)) == "none")
        #expect(name(m.dependenciesFinished(1)) == "enqueueReady")
    }

    /// A job claims its categories only once its queue started it (holding a slot while it waits).
    @Test func conditionsThenTheReadyListThenTheClaim() {
        var m = JobLifecycle()
        #expect(enqueued(&m, conditions: true, categories: true) == "evaluate(1)")
        #expect(m.publicState == .evaluatingConditions)
        #expect(name(m.conditionsEvaluated(round: 1, failure: nil)) == "enqueueReady")
        #expect(m.publicState == .ready)
        #expect(name(m.startFromQueue(observed: false)) == "claim")
        #expect(m.awaitsClaim(round: 2))
        #expect(name(m.startFromQueue(observed: false)) == "none")  // started already
        #expect(name(m.claimGranted(observed: false)) == "run")
        #expect(m.publicState == .executing)
    }

    @Test func aFailedConditionFailsTheJobWithoutRunningIt() {
        var m = JobLifecycle()
        _ = enqueued(&m, conditions: true)
        #expect(name(m.conditionsEvaluated(round: 1, failure: Boom())) == "deliver")
        #expect(m.outcome?.didFail == true)
        #expect(drain(&m) == ["finish(failed)"])
    }

    /// Issue 9, item 1: a job cancelled before it was added tells its observers of the cancel once added.
    @Test func aJobCancelledBeforeItJoinedTellsOfTheCancelThenFinishes() {
        var m = JobLifecycle()
        #expect(name(m.cancel(reason: Boom(), observed: true)) == "none")
        #expect(m.publicState == .initialized)
        #expect(m.isCancelled)
        #expect(enqueued(&m, dependencies: 3, observed: true) == "deliver")  // no waiting for dependencies
        #expect(drain(&m) == ["cancel", "finish(cancelled)"])
    }

    @Test func cancellingAWaitingJobFinishesItAtOnce() {
        for state in ["pending", "evaluating", "ready"] {
            var m = JobLifecycle()
            switch state {
            case "pending": _ = enqueued(&m, dependencies: 1)
            case "evaluating": _ = enqueued(&m, conditions: true)
            default: _ = enqueued(&m)
            }
            #expect(name(m.cancel(reason: Boom(), observed: true)) == "deliver", "\(state)")
            #expect(m.outcome?.isCancelled == true, "\(state)")
            #expect(drain(&m) == ["cancel", "finish(cancelled)"], "\(state)")
            // A late answer or release changes nothing.
            #expect(name(m.dependenciesFinished(1)) == "none")
            #expect(name(m.conditionsEvaluated(round: 1, failure: nil)) == "none")
        }
    }

    /// Issue 9, item 21: a body that completed reports its result even if a cancel came while it ran.
    @Test func aBodyThatCompletesAfterACancelRequestSucceeds() {
        var m = JobLifecycle()
        _ = enqueued(&m)
        _ = m.startFromQueue(observed: false)
        #expect(name(m.cancel(reason: Boom(), observed: false)) == "interrupt")
        #expect(name(m.cancel(reason: Boom(), observed: false)) == "none")  // only the first request counts
        _ = m.bodyCompleted(error: nil)
        #expect(m.outcome?.didSucceed == true)
        #expect(m.isCancelled)  // it was asked
    }

    @Test func aBodyThatStopsOnCancelIsCancelledWithTheRequestsReason() throws {
        var m = JobLifecycle()
        _ = enqueued(&m)
        _ = m.startFromQueue(observed: false)
        _ = m.cancel(reason: Boom(), observed: false)
        _ = m.bodyCompleted(error: CancellationError())
        guard case .cancelled(let reason)? = m.outcome else {
            Issue.record("not cancelled")
            return
        }
        #expect(reason is Boom)
    }

    @Test func aBodyThatThrowsAnotherErrorFails() {
        var m = JobLifecycle()
        _ = enqueued(&m)
        _ = m.startFromQueue(observed: false)
        _ = m.bodyCompleted(error: Boom())
        #expect(m.outcome?.didFail == true)
    }

    @Test func completingTwiceOrBeforeStartingIsRefused() {
        var m = JobLifecycle()
        if case .failure(.notExecuting(let state)) = m.bodyCompleted(error: nil) {
            #expect(state == .initialized)
        } else {
            Issue.record("accepted a completion before the start")
        }
        _ = enqueued(&m)
        _ = m.startFromQueue(observed: false)
        _ = m.bodyCompleted(error: nil)
        if case .failure(.notExecuting(let state)) = m.bodyCompleted(error: nil) {
            #expect(state == .finishing)
        } else {
            Issue.record("accepted a second completion")
        }
    }

    @Test func joiningTwiceOrAfterFinishingIsRefused() {
        var m = JobLifecycle()
        _ = enqueued(&m, dependencies: 1)
        #expect(enqueued(&m) == "alreadyIn(pending)")
        _ = m.failPending(Boom())
        #expect(enqueued(&m) == "alreadyFinished")
    }

    /// Issue 9, item 19: a dependency added to a job that is evaluating its conditions or ready sends it
    /// back to waiting; the answer of the abandoned round is ignored.
    @Test func aDependencyAddedBeforeTheStartSendsTheJobBackToWaiting() {
        var m = JobLifecycle()
        _ = enqueued(&m, conditions: true, categories: true)
        if case .register(let withdraw) = m.addDependency() { #expect(!withdraw) } else { Issue.record("refused") }
        #expect(m.publicState == .pending)
        #expect(name(m.conditionsEvaluated(round: 1, failure: nil)) == "none")  // stale round
        #expect(name(m.dependenciesFinished(1)) == "evaluate(2)")
        #expect(name(m.conditionsEvaluated(round: 2, failure: nil)) == "enqueueReady")
        #expect(name(m.startFromQueue(observed: false)) == "claim")
        // Started and waiting for its claim: going back gives the claim (and the slot) up.
        if case .register(let withdraw) = m.addDependency() { #expect(withdraw) } else { Issue.record("refused") }
        #expect(name(m.claimGranted(observed: false)) == "none")
        #expect(name(m.dependenciesFinished(1)) == "evaluate(4)")  // rounds count claims too
    }

    @Test func aDependencyAddedAfterTheStartIsTooLate() {
        var m = JobLifecycle()
        _ = enqueued(&m)
        _ = m.startFromQueue(observed: false)
        if case .tooLate(let state) = m.addDependency() {
            #expect(state == .executing)
        } else {
            Issue.record("accepted")
        }
    }

    @Test func eventsAreDeliveredByOneThreadInOrder() {
        var m = JobLifecycle()
        _ = enqueued(&m)
        #expect(name(m.startFromQueue(observed: true)) == "run+deliver")  // this thread delivers the start
        #expect(m.record(.progress(0.5)) == false)  // the deliverer will get to it
        #expect(name(m.cancel(reason: Boom(), observed: true)) == "interrupt")  // ditto
        #expect(drain(&m) == ["start", "progress", "cancel"])
        #expect(m.record(.progress(0.9)) == true)  // nobody delivers now: the caller must
        _ = m.bodyCompleted(error: CancellationError())  // recorded behind the progress
        #expect(drain(&m) == ["progress", "finish(cancelled)"])
        #expect(m.isFinished)
    }

    @Test func aJobItsGroupNeverRanIsAbandoned() {
        var m = JobLifecycle()
        #expect(name(m.abandon(.cancelled(Boom()), observed: true)) == "deliver")
        #expect(drain(&m) == ["cancel", "finish(cancelled)"])
        var started = JobLifecycle()
        _ = enqueued(&started)
        #expect(name(started.abandon(.cancelled(Boom()), observed: false)) == "none")  // only unqueued jobs
    }

    @Test func aRefusedClaimFailsTheJobHoldingNothing() {
        var m = JobLifecycle()
        _ = enqueued(&m, categories: true)
        #expect(name(m.startFromQueue(observed: false)) == "claim")
        #expect(name(m.claimRefused(Boom())) == "deliver")
        guard case .finishing(let ending) = m.state else {
            Issue.record("not finishing")
            return
        }
        #expect(!ending.claimed && !ending.executed && ending.heldSlot && ending.outcome.didFail)
    }

    @Test func startingByHand() {
        var m = JobLifecycle()
        if case .run(let deliver) = m.startManually(observed: false) {
            #expect(!deliver)
        } else {
            Issue.record("not run")
        }
        if case .notStartable(let state) = m.startManually(observed: false) {
            #expect(state == .executing)
        } else {
            Issue.record("started twice")
        }
        var cancelled = JobLifecycle()
        _ = cancelled.cancel(reason: Boom(), observed: false)
        if case .finished = cancelled.startManually(observed: false) {} else { Issue.record("ran a cancelled job") }
        #expect(cancelled.outcome?.isCancelled == true)
    }

    /// Every transition the machine can make is in the table (the machine asserts it in debug builds;
    /// this checks the table itself).
    @Test func theTransitionTableAllowsEveryPath() {
        let paths: [[JobState]] = [
            [.initialized, .pending, .evaluatingConditions, .ready, .executing, .finishing, .finished],
            [.initialized, .ready], [.initialized, .evaluatingConditions], [.initialized, .executing],
            [.initialized, .finishing], [.evaluatingConditions, .pending], [.ready, .pending],
        ]
        for path in paths {
            for (from, to) in zip(path, path.dropFirst()) { #expect(from.canTransition(to: to), "\(from) → \(to)") }
        }
        #expect(!JobState.finished.canTransition(to: .pending))
        #expect(!JobState.executing.canTransition(to: .ready))
    }
}
