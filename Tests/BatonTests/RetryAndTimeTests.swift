import Baton
import BatonTesting
import Testing

@Suite(.timeLimit(.minutes(1))) struct RetryAndTimeTests {
    @Test func aRetrySucceedsOnTheThirdAttemptWithExponentialBackoff() async throws {
        let clock = ManualClock()
        let attempts = Recorder<Int>()
        let retry = RetryJob(name: "fetch", maxAttempts: 5, backoff: .exponential(initial: .seconds(1)), clock: clock) {
            n in
            BlockJob(name: "attempt \(n)") {
                attempts.record(n)
                if n < 3 { throw Boom(tag: n) }
            }
        }
        let seen = Recorder<String>()
        retry.onProduce { _, attempt in seen.record(attempt.name) }
        JobQueue().add(retry)
        await waitUntil { attempts.count == 1 }
        await clock.waitForSleepers(1)
        clock.advance(by: .milliseconds(999))
        #expect(attempts.values == [1])  // not before the backoff is over
        clock.advance(by: .milliseconds(1))
        await waitUntil { attempts.count == 2 }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(2))  // doubled
        #expect(await retry.outcome.didSucceed)
        #expect(attempts.values == [1, 2, 3])
        #expect(retry.attempts == 3)
        #expect(seen.values == ["attempt 1", "attempt 2", "attempt 3"])
    }

    @Test func aRetryStopsWhenThePredicateSaysNoAndReportsTheLastError() async throws {
        let retry = RetryJob(name: "fetch", maxAttempts: 5, clock: ManualClock(), retryIf: { ($0 as? Boom)?.tag != 2 })
        { n in
            BlockJob(name: "attempt \(n)") { throw Boom(tag: n) }
        }
        JobQueue().add(retry)
        let error = try #require(await retry.outcome.error as? RetryJob.Failure)
        #expect(error.attempts == 2)
        #expect((error.lastError as? Boom)?.tag == 2)
        #expect(error.description.contains("failed after 2 attempts"))
    }

    @Test func aRetryGivesUpAfterMaxAttempts() async throws {
        let retry = RetryJob(name: "r", maxAttempts: 3) { n in BlockJob(name: "a\(n)") { throw Boom(tag: n) } }
        JobQueue().add(retry)
        let error = try #require(await retry.outcome.error as? RetryJob.Failure)
        #expect(error.attempts == 3)
    }

    @Test func backoffs() {
        #expect(Backoff.immediate.delay(beforeAttempt: 5) == .zero)
        #expect(Backoff.constant(.seconds(3)).delay(beforeAttempt: 9) == .seconds(3))
        let exponential = Backoff.exponential(initial: .seconds(1), multiplier: 3, maximum: .seconds(20))
        #expect(exponential.delay(beforeAttempt: 2) == .seconds(1))
        #expect(exponential.delay(beforeAttempt: 4) == .seconds(9))
        #expect(exponential.delay(beforeAttempt: 6) == .seconds(20))
        let jittered = Backoff.exponential(initial: .seconds(10), jitter: 0.5)
        for _ in 0..<100 {
            let delay = jittered.delay(beforeAttempt: 2)
            #expect(delay > .seconds(5) && delay <= .seconds(10))
        }
        #expect(Backoff.custom { .milliseconds($0) }.delay(beforeAttempt: 7) == .milliseconds(7))
    }

    @Test func repeatKeepsGoingWhileTheLastResultSaysSo() async {
        let clock = ManualClock()
        let ran = Recorder<Int>()
        @Sendable func poll(_ n: Int) -> Job { BlockJob(name: "poll \(n)") { ran.record(n) } }
        let polling = RepeatJob(name: "poll", backoff: .constant(.seconds(10)), clock: clock, first: poll(1)) {
            previous, _ in
            let n = Int(previous.name.split(separator: " ").last!)!
            return n < 3 ? poll(n + 1) : nil
        }
        JobQueue().add(polling)
        for expected in 2...3 {
            await clock.waitForSleepers(1)
            clock.advance(by: .seconds(10))
            await waitUntil { ran.count == expected }
        }
        #expect(await polling.outcome.didSucceed)
        #expect(ran.values == [1, 2, 3])
        #expect(polling.iterations == 3)
    }

    @Test func aTimeoutFiresOnATestClock() async throws {
        let clock = ManualClock()
        let job = AsyncJob(name: "slow") { _ in
            await Gate().waitAsyncUnlessCancelled()
            try Task.checkCancellation()
        }
        job.addTimeout(.seconds(5), clock: clock)
        JobQueue().add(job)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        let outcome = await job.outcome
        #expect(outcome.isCancelled)
        let error = try #require(outcome.error as? JobError)
        #expect(error.code == .timedOut)
        #expect(error.message == "job 'slow' timed out: it ran longer than its limit of 5.0 seconds.")
    }

    @Test func aJobThatFinishesInTimeIsNotTimedOutAndItsTimerStops() async {
        let clock = ManualClock()
        let job = BlockJob(name: "quick") {}
        job.addTimeout(.seconds(5), clock: clock)
        JobQueue().add(job)
        #expect(await job.outcome.didSucceed)
        await waitUntil { clock.sleeperCount == 0 }
    }

    @Test func aDelayJobWaitsOnItsClock() async {
        let clock = ManualClock()
        let delay = DelayJob(name: "delay", .seconds(30), clock: clock)
        let after = BlockJob(name: "after") {}
        after.addDependency(delay)
        JobQueue().add([delay, after])
        await clock.waitForSleepers(1)
        #expect(after.state == .pending)
        clock.advance(by: .seconds(30))
        #expect(await after.outcome.didSucceed)
    }
}

/// Issue 9: retries, backoff and timeouts as users expect them.
@Suite(.timeLimit(.minutes(1))) struct RetryAndTimeSemanticsTests {
    /// Item 2: a cancelled retry job finishes cancelled, like every other job.
    @Test func aCancelledRetryJobFinishesCancelled() async {
        let inside = Gate()
        let retry = RetryJob(name: "retry", maxAttempts: 3) { attempt in
            AsyncJob(name: "attempt \(attempt)") { _ in
                inside.open()
                await Gate().waitAsyncUnlessCancelled()
                try Task.checkCancellation()
            }
        }
        JobQueue().add(retry)
        await inside.waitAsync()
        retry.cancel()
        let outcome = await retry.outcome
        #expect(outcome.isCancelled, "\(outcome)")
        #expect(outcome.error is CancellationError)
        #expect(retry.attempts == 1)  // cancelling stops retrying
    }

    @Test func aRetryJobCancelledBeforeItRanFinishesCancelled() async {
        let retry = RetryJob(name: "retry", maxAttempts: 3) { _ in BlockJob {} }
        retry.cancel()
        JobQueue().add(retry)
        #expect(await retry.outcome.isCancelled)
    }

    /// An attempt cancelled on its own (its timeout fired) is a failure worth another attempt.
    @Test func anAttemptThatTimedOutIsRetried() async throws {
        let clock = ManualClock()
        let retry = RetryJob(name: "retry", maxAttempts: 2, clock: clock) { attempt in
            let job = AsyncJob(name: "attempt \(attempt)") { _ in
                if attempt == 1 {
                    await Gate().waitAsyncUnlessCancelled()
                    try Task.checkCancellation()
                }
            }
            job.addTimeout(.seconds(5), clock: clock)
            return job
        }
        JobQueue().add(retry)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(5))
        #expect(await retry.outcome.didSucceed)
        #expect(retry.attempts == 2)
    }

    /// Item 8: the exponential backoff clamps before it multiplies, so no attempt number traps.
    @Test func exponentialBackoffNeverOverflows() {
        let backoff = Backoff.exponential(initial: .milliseconds(100), maximum: .seconds(60))
        #expect(backoff.delay(beforeAttempt: 2) == .milliseconds(100))
        #expect(backoff.delay(beforeAttempt: 3) == .milliseconds(200))
        #expect(backoff.delay(beforeAttempt: 70) == .seconds(60))
        #expect(backoff.delay(beforeAttempt: 1_000) == .seconds(60))
        #expect(backoff.delay(beforeAttempt: .max) == .seconds(60))
        let jittered = Backoff.exponential(initial: .seconds(1), multiplier: 10, maximum: .seconds(30), jitter: 0.5)
        for attempt in [1_000, Int.max] {
            let delay = jittered.delay(beforeAttempt: attempt)
            #expect(delay <= .seconds(30) && delay >= .seconds(15))
        }
    }

    /// Item 8 as a user meets it: a poll that backs off exponentially, hundreds of times.
    @Test func aRepeatJobPollingHundredsOfTimesWithBackoffDoesNotTrap() async {
        let polls = Recorder<Int>()
        let backoff = Backoff.exponential(initial: .nanoseconds(1), multiplier: 1_000, maximum: .nanoseconds(50))
        @Sendable func poll(_ n: Int) -> Job { BlockJob(name: "poll \(n)") { polls.record(n) } }
        let repeating = RepeatJob(name: "poll", backoff: backoff, first: poll(1)) { previous, _ in
            let n = Int(previous.name.split(separator: " ").last!)!
            return n < 300 ? poll(n + 1) : nil
        }
        JobQueue().add(repeating)
        #expect(await repeating.outcome.didSucceed)
        #expect(polls.count == 300)
        #expect(repeating.iterations == 300)
    }
}
