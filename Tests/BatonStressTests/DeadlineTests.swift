import Baton
import BatonTesting
import Testing

/// The deadline that guards every stress test must fire even when what it waits for ignores
/// cancellation — otherwise a hang shows up only as CI's own timeout, naming nothing.
@Suite struct DeadlineTests {
    @Test func aBodyThatNeverReturnsFailsWithinTheDeadlineNamingWhatHung() async {
        let never = Gate()  // never opened
        let inside = Gate()
        let queue = JobQueue(name: "stuck")
        let blocked = AsyncJob(name: "blocked") { _ in
            inside.open()
            await never.waitAsync()  // ignores cancellation
        }
        queue.add(blocked)
        await inside.waitAsync()  // executing, so the report can say so on a loaded machine too
        do {
            try await withDeadline(.milliseconds(200), "the stuck queue", report: { queue.diagnose().description }) {
                await queue.waitUntilAllJobsAreFinished()
            }
            Issue.record("the deadline did not fire")
        } catch let error as DeadlineExceeded {
            #expect(error.description.contains("the stuck queue did not finish"))
            #expect(error.description.contains("'blocked' (executing) is running"))
        } catch {
            Issue.record("unexpected \(error)")
        }
        // Reaching this line at all is the point: the body never returns, yet the wait ended (without
        // the fix it waited for the body, until the suite's own time limit).
        never.open()
        await queue.waitUntilAllJobsAreFinished()
    }

    /// A review (7 December 2026): cancelling the task that called `withDeadline` (a test's time limit)
    /// neither cancelled the body nor ended the wait: it returned at the deadline, blaming the body. Now
    /// the body is cancelled and the call throws `CancellationError` at once (the deadline here is an
    /// hour: reaching the end of this test is the proof), and the same for `withStallDeadline`.
    @Test(.timeLimit(.minutes(1))) func cancellingTheCallerCancelsTheBodyAndEndsTheWait() async throws {
        for stall in [false, true] {
            let started = Gate()
            let bodyCancelled = Gate()
            let never = Gate()
            let caller = Task {
                let body: @Sendable () async throws -> Void = {
                    started.open()
                    await withTaskCancellationHandler {
                        await never.waitAsync()  // ignores cancellation itself
                    } onCancel: {
                        bodyCancelled.open()
                    }
                }
                if stall {
                    try await withStallDeadline(
                        stalledFor: .seconds(3600), atMost: .seconds(3600), "x", progress: { 0 }, body)
                } else {
                    try await withDeadline(.seconds(3600), "x", body)
                }
            }
            await started.waitAsync()
            caller.cancel()
            let result = await caller.result
            #expect(throws: CancellationError.self, "stall: \(stall)") { try result.get() }
            await bodyCancelled.waitAsync()
            never.open()
        }
    }

    @Test func aBodyThatReturnsInTimePassesItsErrorThrough() async throws {
        struct Expected: Error {}
        await #expect(throws: Expected.self) {
            try await withDeadline(.seconds(30), "a quick body") { throw Expected() }
        }
        try await withDeadline(.seconds(30), "a quick body") {}
    }

    @Test func aStallDeadlineFiresWhenProgressStopsNamingWhatHung() async {
        let never = Gate()  // never opened
        let inside = Gate()
        let queue = JobQueue(name: "stuck")
        queue.add(
            AsyncJob(name: "blocked") { _ in
                inside.open()
                await never.waitAsync()  // ignores cancellation
            })
        await inside.waitAsync()  // executing, so the report can say so on a loaded machine too
        do {
            try await withStallDeadline(
                stalledFor: .milliseconds(300), atMost: .seconds(600), "the stuck queue",
                progress: { queue.jobCount }, report: { queue.diagnose().description }
            ) {
                await queue.waitUntilAllJobsAreFinished()
            }
            Issue.record("the stall deadline did not fire")
        } catch let error as DeadlineExceeded {
            #expect(error.description.contains("no progress for"))
            #expect(error.description.contains("the stuck queue hung"))
            #expect(error.description.contains("'blocked' (executing) is running"))
        } catch {
            Issue.record("unexpected \(error)")
        }
        never.open()
        await queue.waitUntilAllJobsAreFinished()
    }

    /// Work that keeps moving outlives the stall window: here the progress changes every time the
    /// watchdog samples it, and the body ends only after several stall windows have passed.
    @Test func aStallDeadlineLetsWorkThatKeepsMovingFinish() async throws {
        let stall = Duration.milliseconds(200)
        let samples = Recorder<Int>()
        let done = Gate()
        let start = ContinuousClock.now
        try await withStallDeadline(
            stalledFor: stall, atMost: .seconds(600), "moving work",
            progress: {
                samples.record(0)
                if ContinuousClock.now - start > stall * 3 { done.open() }
                return samples.values.count
            }
        ) {
            await done.waitAsync()
        }
        #expect(ContinuousClock.now - start > stall * 3)
    }

    @Test func aStallDeadlineStillHasAnOverallLimit() async {
        let never = Gate()
        let counter = Recorder<Int>()
        do {
            try await withStallDeadline(
                stalledFor: .seconds(600), atMost: .milliseconds(300), "endless but moving work",
                progress: {
                    counter.record(0)
                    return counter.values.count
                }
            ) {
                await never.waitAsync()
            }
            Issue.record("the overall limit did not fire")
        } catch let error as DeadlineExceeded {
            #expect(error.description.contains("while still progressing"))
        } catch {
            Issue.record("unexpected \(error)")
        }
        never.open()
    }
}
