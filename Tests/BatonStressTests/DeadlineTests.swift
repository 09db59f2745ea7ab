import Baton
import BatonTesting
import Testing

/// The deadline that guards every stress test must fire even when what it waits for ignores
/// cancellation — otherwise a hang shows up only as CI's own timeout, naming nothing.
@Suite struct DeadlineTests {
    @Test func aBodyThatNeverReturnsFailsWithinTheDeadlineNamingWhatHung() async {
        let never = Gate()  // never opened
        let queue = JobQueue(name: "stuck")
        let blocked = AsyncJob(name: "blocked") { _ in await never.waitAsync() }  // ignores cancellation
        queue.add(blocked)
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

    @Test func aBodyThatReturnsInTimePassesItsErrorThrough() async throws {
        struct Expected: Error {}
        await #expect(throws: Expected.self) {
            try await withDeadline(.seconds(30), "a quick body") { throw Expected() }
        }
        try await withDeadline(.seconds(30), "a quick body") {}
    }
}
