import Testing

@testable import Baton

/// The job state machine, driven event by event without threads.
@Suite struct JobStateMachineTests {
    struct Boom: Error {}

    @Test func happyPathWithoutDependencies() {
        var machine = JobStateMachine()
        do { let r = machine.enqueue(dependencies: 0, hasConditions: false); #expect(r == .enqueued) }
        #expect(machine.state == .pending)
        do { let r = machine.dependenciesFinished(1); #expect(r == .becomeReady) }  // the registration hold
        #expect(machine.state == .ready)
        do { let r = machine.startFromQueue(); #expect(r == .run) }
        do { let r = machine.finish(error: nil); #expect(r == .finish) }
        #expect(machine.state == .finishing)
        #expect(machine.outcome?.isSucceeded == true)
        machine.completeFinish()
        #expect(machine.state == .finished)
    }

    @Test func waitsForEveryDependencyAndTheHold() {
        var machine = JobStateMachine()
        _ = machine.enqueue(dependencies: 2, hasConditions: false)
        do { let r = machine.dependenciesFinished(1); #expect(r == .none) }
        do { let r = machine.dependenciesFinished(1); #expect(r == .none) }
        do { let r = machine.addDependency(); #expect(r == .recordAndRegister) }
        do { let r = machine.dependenciesFinished(1); #expect(r == .none) }
        do { let r = machine.dependenciesFinished(1); #expect(r == .becomeReady) }
    }

    @Test func conditionsComeBetweenPendingAndReady() {
        var machine = JobStateMachine()
        _ = machine.enqueue(dependencies: 0, hasConditions: true)
        do { let r = machine.dependenciesFinished(1); #expect(r == .evaluateConditions) }
        #expect(machine.state == .evaluatingConditions)
        do { let r = machine.conditionsEvaluated(failure: Boom()); #expect(r == .finish) }
        #expect(machine.outcome?.isFailed == true)
    }

    @Test func cancelBeforeEnqueueFinishesWhenTheHoldIsReleased() {
        var machine = JobStateMachine()
        do { let r = machine.cancel(reason: CancellationError()); #expect(r == .recorded) }
        _ = machine.enqueue(dependencies: 3, hasConditions: false)
        do { let r = machine.dependenciesFinished(1); #expect(r == .none) }
        do { let r = machine.dependenciesFinished(3); #expect(r == .finish) }
        #expect(machine.outcome?.isCancelled == true)
        #expect(machine.didExecute == false)
    }

    @Test func cancelWhileWaitingFinishesAtOnce() {
        for waitingState in [JobState.pending, .evaluatingConditions, .ready] {
            var machine = JobStateMachine()
            _ = machine.enqueue(dependencies: 1, hasConditions: true)
            if waitingState >= .evaluatingConditions { _ = machine.dependenciesFinished(2) }
            if waitingState == .ready { _ = machine.conditionsEvaluated(failure: nil) }
            #expect(machine.state == waitingState)
            do { let r = machine.cancel(reason: Boom()); #expect(r == .finish) }
            #expect(machine.state == .finishing)
            // Late events are ignored.
            do { let r = machine.dependenciesFinished(1); #expect(r == .none) }
            do { let r = machine.conditionsEvaluated(failure: nil); #expect(r == .none) }
            do { let r = machine.startFromQueue(); #expect(r == .skip) }
        }
    }

    @Test func cancelWhileExecutingInterruptsAndWinsOverSuccess() {
        var machine = JobStateMachine()
        _ = machine.enqueue(dependencies: 0, hasConditions: false)
        _ = machine.dependenciesFinished(1)
        _ = machine.startFromQueue()
        do { let r = machine.cancel(reason: Boom()); #expect(r == .interrupt) }
        do { let r = machine.cancel(reason: Boom()); #expect(r == .ignored) }  // only the first request counts
        _ = machine.finish(error: nil)
        guard case .cancelled(let reason)? = machine.outcome else {
            Issue.record("expected cancelled, got \(String(describing: machine.outcome))")
            return
        }
        #expect(reason is Boom)
    }

    @Test func aFailureOtherThanCancellationStaysAFailure() {
        var machine = JobStateMachine()
        _ = machine.enqueue(dependencies: 0, hasConditions: false)
        _ = machine.dependenciesFinished(1)
        _ = machine.startFromQueue()
        _ = machine.cancel(reason: CancellationError())
        _ = machine.finish(error: Boom())
        #expect(machine.outcome?.isFailed == true)
    }

    @Test func aFinishedJobCannotBeCancelledOrFinishedAgain() {
        var machine = JobStateMachine()
        _ = machine.startManually()
        _ = machine.finish(error: nil)
        do { let r = machine.cancel(reason: Boom()); #expect(r == .ignored) }
        do { let r = machine.finish(error: nil); #expect(r == .notExecuting(.finishing)) }
        machine.completeFinish()
        do { let r = machine.cancel(reason: Boom()); #expect(r == .ignored) }
        #expect(machine.outcome?.isSucceeded == true)
    }

    @Test func enqueueTwiceAndTooLateDependenciesAreReported() {
        var machine = JobStateMachine()
        _ = machine.enqueue(dependencies: 0, hasConditions: false)
        do { let r = machine.enqueue(dependencies: 0, hasConditions: false); #expect(r == .alreadyEnqueued(.pending)) }
        _ = machine.dependenciesFinished(1)
        do { let r = machine.addDependency(); #expect(r == .tooLate(.ready)) }
        _ = machine.startFromQueue()
        _ = machine.finish(error: nil)
        do { let r = machine.enqueue(dependencies: 0, hasConditions: false); #expect(r == .alreadyFinished) }
    }

    @Test func manualStartOfACancelledJobFinishesWithoutRunning() {
        var machine = JobStateMachine()
        _ = machine.cancel(reason: Boom())
        do { let r = machine.startManually(); #expect(r == .finish) }
        #expect(machine.didExecute == false)
        do { let r = machine.startManually(); #expect(r == .notStartable(.finishing)) }
    }

    @Test func cycleMembersFailOnlyWhilePending() {
        var machine = JobStateMachine()
        _ = machine.enqueue(dependencies: 1, hasConditions: false)
        do { let r = machine.failPending(Boom()); #expect(r == true) }
        do { let r = machine.failPending(Boom()); #expect(r == false) }
        #expect(machine.outcome?.isFailed == true)
    }
}

@Suite struct JobStateTests {
    @Test func theTableAllowsExactlyTheDocumentedTransitions() {
        let expected: Set<String> = [
            "initialized→pending", "initialized→executing",
            "pending→evaluatingConditions", "pending→ready", "pending→finishing",
            "evaluatingConditions→ready", "evaluatingConditions→finishing",
            "ready→executing", "ready→finishing",
            "executing→finishing", "finishing→finished",
        ]
        var allowed: Set<String> = []
        for from in JobState.allCases {
            for to in JobState.allCases where from.canTransition(to: to) { allowed.insert("\(from)→\(to)") }
        }
        #expect(allowed == expected)
    }
}
