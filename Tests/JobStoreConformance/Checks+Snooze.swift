import BatonDurable
import Foundation

extension JobStoreConformance {
    static let snoozeChecks: [Check] = [
        check("a snooze puts the job back after its wait, spending no attempt of its retry policy") { store, clock in
            let policy = RetryPolicy.exponential(maxAttempts: 2, initial: .seconds(10))
            let run = try await store.submit(
                Build.graph("g", Build.job("a", retry: policy), Build.job("b", after: [0])), uniqueKey: nil)
            let first = try await store.claimAll()[0]
            try expectEqual(try await store.snooze(first, .seconds(30)), .accepted(.ready), "the snooze")
            var record = try await store.record(of: first.job)
            try expectEqual(record.notBefore, clock.now.addingTimeInterval(30), "notBefore after the snooze")
            try expectEqual(record.lastError, nil, "a snooze is no error")
            try expectEqual(record.maxAttempts, 3, "attempts allowed after one snooze")
            try expectEqual(try await store.states(run), [.ready, .pending], "states after the snooze")
            clock.advance(by: .seconds(29))
            try expectEqual(try await store.claimAll().count, 0, "claimable before the snooze's wait")
            try expectEqual(
                try await store.nextDueDate(kinds: ["k"]), clock.now.addingTimeInterval(1), "next due: the snooze")
            clock.advance(by: .seconds(1))
            let second = try await store.claimAll()[0]
            try expectEqual(second.attempt, 2, "the attempt after the snooze has a number of its own")
            try expectEqual(second.maxAttempts, 3, "maxAttempts the attempt sees")
            // The policy's first failure: its wait before its second attempt (10 s), not its third (20 s).
            try expectEqual(try await store.fail(second, "down"), .accepted(.ready), "the first failure")
            record = try await store.record(of: first.job)
            try expectEqual(record.notBefore, clock.now.addingTimeInterval(10), "the backoff ignores the snooze")
            clock.advance(by: .seconds(10))
            let third = try await store.claimAll()[0]
            try expectEqual(third.attempt, 3, "third attempt")
            try expectEqual(try await store.fail(third, "still down"), .accepted(.failed), "the policy's last attempt")
            try expectEqual(try await store.states(run), [.failed, .cancelled], "states at the end")
            let attempts = try await store.attempts(of: first.job)
            try expectEqual(attempts.map(\.attempt), [1, 2, 3], "attempt numbers")
            try expectEqual(attempts.map(\.outcome), [.snoozed, .failed, .failed], "outcomes")
            try expectEqual(attempts.map(\.result), [.ready, .ready, .failed], "results")
            try expectEqual(attempts[0].error, "snoozed for 30 s", "the snooze's record says its wait")
            try expectEqual(attempts[0].worker, "w1", "the snooze's worker")

            // A retry gives the job its policy's attempts again, not the snoozes'.
            try expectEqual(try await store.retry(job: first.job), 2, "jobs run again")
            record = try await store.record(of: first.job)
            try expectEqual(record.attempts, 3, "attempts after a retry: numbering goes on")
            try expectEqual(record.maxAttempts, 5, "the policy's two attempts after the three made")
            clock.advance(by: .seconds(1))
            let fourth = try await store.claimAll()[0]
            try expectEqual(fourth.attempt, 4, "the retry's first attempt")
            try expectEqual(try await store.fail(fourth, "down again"), .accepted(.ready), "its first failure")
            try expectEqual(
                try await store.record(of: first.job).notBefore, clock.now.addingTimeInterval(10),
                "the backoff starts again with the retry")
        },
        check("a snooze of zero runs the job again at once; a job snoozes as often as it asks") { store, _ in
            let run = try await store.submit(Build.graph("g", Build.job("a")), uniqueKey: nil)
            for attempt in 1...4 {
                let claimed = try await store.claimAll()
                try expectEqual(claimed.map(\.attempt), [attempt], "attempt \(attempt)")
                try expectEqual(claimed[0].maxAttempts, attempt, "maxAttempts of attempt \(attempt)")
                try expectEqual(try await store.snooze(claimed[0], .zero), .accepted(.ready), "snooze \(attempt)")
            }
            let last = try await store.claimAll()[0]
            try expectEqual(try await store.succeed(last), .accepted(.succeeded), "the success")
            try expectEqual(try await store.states(run), [.succeeded], "states")
            try expectEqual(
                try await store.attempts(of: last.job).map(\.outcome),
                Array(repeating: .snoozed, count: 4) + [.succeeded], "outcomes")
        },
        check("a snooze of a job asked to cancel ends it cancelled, and a stale snooze changes nothing") {
            store, clock in
            let run = try await store.submit(
                Build.graph("g", Build.job("a", retry: .immediate(maxAttempts: 3)), Build.job("b", after: [0])),
                uniqueKey: nil)
            let stale = try await store.claimAll(lease: .seconds(5))[0]
            clock.advance(by: .seconds(6))
            let current = try await store.claimAll()[0]
            try expectEqual(try await store.snooze(stale, .seconds(60)), .rejected, "a snooze on a lost lease")
            try expectEqual(try await store.record(of: current.job).state, .running, "state after the stale snooze")
            try await store.cancel(run: run.run, reason: "user stopped it")
            try expectEqual(try await store.snooze(current, .seconds(60)), .accepted(.cancelled), "the snooze")
            try expectEqual(try await store.states(run), [.cancelled, .cancelled], "states")
            let attempts = try await store.attempts(of: current.job)
            try expectEqual(attempts.last?.outcome, .cancelled, "the snooze's record")
            try expect(
                attempts.last?.error?.contains("user stopped it") == true,
                "the record says why: \(attempts.last?.error ?? "nil")")
        },
        check("a report's snooze is kept within what a store keeps") { store, clock in
            _ = try await store.submit(Build.graph("g", Build.job("a"), Build.job("b")), uniqueKey: nil)
            let claimed = try await store.claimAll()
            try expectEqual(try await store.snooze(claimed[0], .seconds(-30)), .accepted(.ready), "a negative wait")
            try expectEqual(
                try await store.record(of: claimed[0].job).notBefore ?? clock.now, clock.now, "kept as none")
            try expectEqual(
                try await store.snooze(claimed[1], .seconds(Int64.max)), .accepted(.ready), "a wait beyond the maximum")
            try expectEqual(
                try await store.record(of: claimed[1].job).notBefore,
                clock.now.addingTimeInterval(Snooze.maximumWait / .seconds(1)), "kept as the maximum")
        },
    ]
}

extension JobStore {
    func snooze(_ job: ClaimedJob, _ wait: Duration) async throws -> FinishResult {
        try await finish([AttemptReport(lease: job.lease, outcome: .snoozed(wait: wait))])[0]
    }
}
