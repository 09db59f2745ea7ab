import Baton
import BatonTesting
import Testing

@Suite(.timeLimit(.minutes(1))) struct ConditionTests {
    /// The WWDC example: saving a favourite needs a signed-in user; the condition generates the
    /// sign-in job when nobody is signed in.
    final class Session: @unchecked Sendable {
        private let lock = Recorder<Bool>()
        var isSignedIn: Bool { lock.values.last ?? false }
        func signIn() { lock.record(true) }
    }

    struct SignedIn: JobCondition {
        let session: Session
        func dependencies(for job: Job) -> [Job] {
            session.isSignedIn ? [] : [BlockJob(name: "sign in") { session.signIn() }]
        }
        func evaluate(for job: Job) async -> ConditionResult {
            session.isSignedIn ? .satisfied : .failed(ConditionNotMet(condition: "signed in", reason: "not signed in"))
        }
    }

    @Test func aConditionGeneratesADependencyThatRunsFirstInTheSameQueue() async {
        let session = Session()
        let order = Recorder<String>()
        let save = BlockJob(name: "save favourite") { order.record("save") }
        save.addCondition(SignedIn(session: session))
        let queue = JobQueue(name: "favourites")
        queue.add(save)
        #expect(await save.outcome.didSucceed)
        #expect(session.isSignedIn)
        #expect(order.values == ["save"])
        // Signed in now: a second save generates nothing.
        let again = BlockJob(name: "save again") {}
        again.addCondition(SignedIn(session: session))
        queue.add(again)
        #expect(await again.outcome.didSucceed)
    }

    @Test func aSilentConditionDropsTheGeneratedDependencyAndFails() async throws {
        let session = Session()
        let ran = Recorder<Bool>()
        let save = BlockJob(name: "save") { ran.record(true) }
        save.addCondition(SilentCondition(SignedIn(session: session)))
        JobQueue().add(save)
        let error = try #require(await save.outcome.error as? JobError)
        #expect(error.code == .conditionFailed)
        #expect(error.message.contains("silent(SignedIn)"))
        #expect(ran.count == 0)
        #expect(!session.isSignedIn)
    }

    @Test func aFailedConditionRunsNoBodyAndNamesTheCondition() async throws {
        let ran = Recorder<Bool>()
        let job = BlockJob(name: "guarded") { ran.record(true) }
        job.addCondition(ClosureCondition(name: "disk has space") { _ in false })
        JobQueue().add(job)
        let outcome = await job.outcome
        #expect(outcome.didFail)
        let error = try #require(outcome.error as? JobError)
        #expect(error.code == .conditionFailed)
        #expect(
            error.message
                == "job 'guarded' did not run: condition 'disk has space' failed: it returned false")
        #expect(ran.count == 0)
    }

    @Test func aThrowingClosureConditionFailsWithItsError() async throws {
        let job = BlockJob(name: "j") {}
        job.addCondition(ClosureCondition(name: "throws") { _ in throw Boom(tag: 3) })
        JobQueue().add(job)
        let error = try #require(await job.outcome.error as? JobError)
        #expect((error.underlying as? Boom)?.tag == 3)
    }

    @Test func noFailedDependencies() async throws {
        let bad = BlockJob(name: "bad") { throw Boom() }
        let good = BlockJob(name: "good") {}
        let guarded = BlockJob(name: "guarded") {}
        guarded.addDependencies([good, bad])
        guarded.addCondition(NoFailedDependencies())
        let fine = BlockJob(name: "fine") {}
        fine.addDependency(good)
        fine.addCondition(NoFailedDependencies())
        JobQueue().add([bad, good, guarded, fine])
        let error = try #require(await guarded.outcome.error as? JobError)
        #expect(error.message.contains("dependency 'bad' failed"))
        #expect(await fine.outcome.didSucceed)
    }

    @Test func noCancelledDependencies() async throws {
        let cancelled = BlockJob(name: "cancelled") {}
        cancelled.cancel()
        let guarded = BlockJob(name: "guarded") {}
        guarded.addDependency(cancelled)
        guarded.addCondition(NoCancelledDependencies())
        JobQueue().add([cancelled, guarded])
        let error = try #require(await guarded.outcome.error as? JobError)
        #expect(error.message.contains("dependency 'cancelled' was cancelled"))
    }

    @Test func negationInvertsTheResult() async {
        let yes = ClosureCondition(name: "yes") { _ in true }
        let no = ClosureCondition(name: "no") { _ in false }
        let a = BlockJob(name: "a") {}
        a.addCondition(NegatedCondition(no))
        let b = BlockJob(name: "b") {}
        b.addCondition(NegatedCondition(yes))
        JobQueue().add([a, b])
        #expect(await a.outcome.didSucceed)
        #expect(await b.outcome.didFail)
    }

    @Test func allOfAndAnyOf() async {
        let yes = ClosureCondition(name: "yes") { _ in true }
        let no = ClosureCondition(name: "no") { _ in false }
        let jobs: [(BlockJob, any JobCondition, Bool)] = [
            (BlockJob(name: "all-yes") {}, AllOfConditions([yes, yes]), true),
            (BlockJob(name: "all-mixed") {}, AllOfConditions([yes, no]), false),
            (BlockJob(name: "any-mixed") {}, AnyOfConditions([no, yes]), true),
            (BlockJob(name: "any-no") {}, AnyOfConditions([no, no]), false),
        ]
        for (job, condition, _) in jobs { job.addCondition(condition) }
        JobQueue().add(jobs.map(\.0))
        for (job, _, expected) in jobs {
            #expect(await job.outcome.didSucceed == expected, "\(job.name)")
        }
    }

    @Test func conditionsAreEvaluatedConcurrently() async {
        // Each condition waits until both are being evaluated: only possible if they run at once.
        let gauge = ConcurrencyGauge()
        let both = Gate()
        let meet = ClosureCondition(name: "meet") { _ in
            if gauge.enter() == 2 { both.open() }
            await both.waitAsync()
            return true
        }
        let job = BlockJob(name: "j") {}
        job.addCondition(meet)
        job.addCondition(meet)
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
    }

    @Test func notBeforeWaitsForTheClock() async {
        let clock = ManualClock()
        let ran = Recorder<Bool>()
        let job = BlockJob(name: "later") { ran.record(true) }
        job.addCondition(NotBefore(clock.now.advanced(by: .seconds(30)), clock: clock))
        let queue = JobQueue()
        queue.add(job)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(29))
        #expect(job.state == .evaluatingConditions)
        #expect(ran.count == 0)
        clock.advance(by: .seconds(1))
        #expect(await job.outcome.didSucceed)
        #expect(ran.count == 1)
    }

    @Test func cancellingAJobThatWaitsForItsConditionsEndsTheWait() async {
        let clock = ManualClock()
        let job = BlockJob(name: "later") {}
        job.addCondition(NotBefore(clock.now.advanced(by: .seconds(3600)), clock: clock))
        JobQueue().add(job)
        await clock.waitForSleepers(1)
        job.cancel()
        #expect(await job.outcome.isCancelled)
        // The condition's sleep was cancelled too: nothing is left sleeping.
        await waitUntil { clock.sleeperCount == 0 }
    }

    @Test func addingAConditionAfterAddingTheJobStops() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queue = JobQueue()
            queue.isSuspended = true
            let job = BlockJob(name: "late") {}
            queue.add(job)
            job.addCondition(NoFailedDependencies())
        }
        expect(result, toSay: "cannot add condition 'NoFailedDependencies' to job 'late'")
    }
}

/// Waits for state reached asynchronously with no event to await (see `eventually`): at most ten
/// seconds, then the test fails naming the place — it never hangs, and never spins.
func waitUntil(
    _ predicate: @escaping @Sendable () -> Bool, sourceLocation: SourceLocation = #_sourceLocation
)
    async
{
    if !(await eventually(within: .seconds(10), predicate)) {
        Issue.record("condition never became true within 10 seconds", sourceLocation: sourceLocation)
    }
}

/// Issue 9: conditions as the WWDC sample and ProcedureKit define them.
@Suite(.timeLimit(.minutes(1))) struct ConditionSemanticsTests {
    /// A condition that generates a "sign in" job.
    struct SignedIn: JobCondition {
        let signIn: Job
        var name: String { "signed in" }
        func dependencies(for job: Job) -> [Job] { [signIn] }
        func evaluateImmediately(for job: Job) -> ConditionResult? { .satisfied }
    }

    /// Item 5: a dependency a condition generates runs after the job's own dependencies, and is listed
    /// apart from them.
    @Test func aGeneratedDependencyWaitsForTheJobsOwnDependencies() async throws {
        let order = Recorder<String>()
        let directInside = Gate()
        let release = Gate()
        let direct = AsyncJob(name: "direct") { _ in
            directInside.open()
            await release.waitAsync()
            order.record("direct")
        }
        let signIn = BlockJob(name: "sign in") { order.record("sign in") }
        let save = BlockJob(name: "save") { order.record("save") }
        save.addDependency(direct)
        save.addCondition(SignedIn(signIn: signIn))
        let queue = JobQueue(name: "favourites")
        queue.add([direct, save])
        await directInside.waitAsync()
        #expect(signIn.state == .pending)  // it waits for 'direct' too
        #expect(save.dependencies.map(\.name) == ["direct"])
        #expect(save.generatedDependencies.map(\.name) == ["sign in"])
        #expect(queue.diagnose().description.contains("'save' (pending) waits for dependencies 'direct'"))
        release.open()
        #expect(await save.outcome.didSucceed)
        #expect(order.values == ["direct", "sign in", "save"])
    }

    /// A condition whose name reads another job's name (it takes that job's lock).
    struct NamedAfter: JobCondition {
        let other: Job
        var name: String { "after \(other.name)" }
        func evaluate(for job: Job) async -> ConditionResult { .satisfied }
    }

    /// Item 12: Baton reads a condition's `name` (user code) outside every lock. Before, it was read
    /// under the guarded job's lock, and a name reading a job that shares that lock froze the process.
    @Test func aConditionsNameMayReadAnyJob() async throws {
        let other = BlockJob(name: "other") {}
        var guarded = BlockJob(name: "guarded") {}
        while guarded.id % 256 != other.id % 256 { guarded = BlockJob(name: "guarded") {} }  // same lock stripe
        guarded.addCondition(NamedAfter(other: other))
        guarded.addCondition(ClosureCondition(name: "fails") { _ in false })
        JobQueue().add(guarded)
        let job = guarded
        try await withDeadline(.seconds(10), "a job whose condition's name reads another job") {
            let error = try #require(await job.outcome.error as? JobError)
            #expect(error.message.contains("condition 'fails' failed"))
        }
    }

    /// A synchronous condition answers on the thread that released the job — here the one that added
    /// it, before `add` returns: no `Task`.
    @Test func conditionsThatCanAnswerAtOnceNeedNoTask() async {
        let evaluated = Recorder<String>()
        let job = BlockJob(name: "job") {}
        job.addCondition(
            ClosureCondition(name: "at once") { _ in
                evaluated.record("at once")
                return true
            })
        let queue = JobQueue(name: "q")
        queue.isSuspended = true
        queue.add(job)
        #expect(evaluated.values == ["at once"])  // already, synchronously
        #expect(job.state == .ready)
        queue.isSuspended = false
        #expect(await job.outcome.didSucceed)
    }
}
