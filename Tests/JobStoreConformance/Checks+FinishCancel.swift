import BatonDurable
import Foundation

extension JobStoreConformance {
    static let finishChecks: [Check] = [
        check("fencing: a completion with a stale lease is rejected and changes nothing") { store, clock in
            _ = try await store.submit(
                Build.graph("g", Build.job("a", retry: .immediate(maxAttempts: 5))), uniqueKey: nil)
            let stale = try await store.claimAll(worker: "w1", lease: .seconds(5))[0]
            clock.advance(by: .seconds(6))
            let current = try await store.claimAll(worker: "w2")[0]
            try expectEqual(try await store.succeed(stale, output: "\"stale\""), .rejected, "stale success")
            try expectEqual(try await store.fail(stale), .rejected, "stale failure")
            try expectEqual(
                try await store.renew([stale.lease], worker: "w1", lease: .seconds(5)), [.lost], "stale renewal")
            try await store.release([stale.lease])
            let record = try await store.record(of: current.job)
            try expectEqual(record.state, .running, "state after stale reports")
            try expectEqual(record.leaseOwner, "w2", "owner after stale reports")
            try expectEqual(try await store.succeed(current, output: "\"fresh\""), .accepted(.succeeded), "current")
            try expectEqual(try await store.succeed(current, output: "\"twice\""), .rejected, "a second completion")
            let output = try await store.record(of: current.job).output
            try expectEqual(output.map { String(decoding: $0, as: UTF8.self) }, "\"fresh\"", "output")
        },
        check("completion makes dependents ready in the same transaction") { store, _ in
            let run = try await store.submit(
                Build.graph(
                    "diamond", Build.job("a"), Build.job("b", after: [0]), Build.job("c", after: [0]),
                    Build.job("d", after: [1, 2])),
                uniqueKey: nil)
            let a = try await store.claimAll()
            try expectEqual(try await store.succeed(a[0]), .accepted(.succeeded), "a")
            try expectEqual(try await store.states(run), [.succeeded, .ready, .ready, .pending], "after a")
            let bc = try await store.claimAll()
            try expectEqual(bc.map(\.name), ["b", "c"], "b and c")
            let results = try await store.finish(
                bc.map {
                    AttemptReport(lease: $0.lease, outcome: .succeeded(output: Data("1".utf8)))
                })
            try expectEqual(results, [.accepted(.succeeded), .accepted(.succeeded)], "a batch of reports")
            try expectEqual(try await store.states(run)[3], .ready, "d after b and c")
            let d = try await store.claimAll()
            try expectEqual(try await store.succeed(d[0]), .accepted(.succeeded), "d")
            try expect(try await store.snapshot(of: run.run).run.finished != nil, "the run is finished")
        },
        check("finish then claim: the dependent a completion makes ready is claimed with its input") { store, _ in
            let run = try await store.submit(
                Build.graph(
                    "chain", Build.job("a"), Build.job("b", inputFrom: 0, categories: [.named("one", limit: 1)]),
                    Build.job("c", after: [1], categories: [.named("one", limit: 1)]), Build.job("other", kind: "z")),
                uniqueKey: nil)
            let a = try await store.claimAll()[0]
            let stale = AttemptReport(
                lease: Lease(job: a.lease.job, token: a.lease.token &+ 1),
                outcome: .succeeded(
                    output: Data("\"stale\"".utf8)))
            let (rejected, none) = try await store.finish(
                [stale], thenClaim: 5, worker: "w1", kinds: ["k"], lease: .seconds(30))
            try expectEqual(rejected, [.rejected], "a stale report")
            try expectEqual(none.map(\.name), [], "nothing claimable while a runs")
            let (results, claimed) = try await store.finish(
                [AttemptReport(lease: a.lease, outcome: .succeeded(output: Data("\"from a\"".utf8)))], thenClaim: 5,
                worker: "w1", kinds: ["k"], lease: .seconds(30))
            try expectEqual(results, [.accepted(.succeeded)], "a's report")
            try expectEqual(claimed.map(\.name), ["b"], "b claimed, not c (pending) nor other (kind z)")
            try expectEqual(String(decoding: claimed[0].input, as: UTF8.self), "\"from a\"", "b's input is a's output")
            try expectEqual(claimed[0].attempt, 1, "b's attempt")
            // c waits for b, and for b's category: finishing b claims c in the same call.
            let (_, next) = try await store.finish(
                [AttemptReport(lease: claimed[0].lease, outcome: .succeeded(output: Data("1".utf8)))], thenClaim: 5,
                worker: "w1", kinds: ["k"], lease: .seconds(30))
            try expectEqual(next.map(\.name), ["c"], "c claimed when b finished")
            try expectEqual(try await store.states(run), [.succeeded, .succeeded, .running, .ready], "states")
            let (_, zero) = try await store.finish([], thenClaim: 0, worker: "w1", kinds: ["z"], lease: .seconds(30))
            try expectEqual(zero.count, 0, "a limit of 0 claims nothing")
        },
        check("a failure cancels dependents with a reason naming it, except those that run regardless") { store, _ in
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("a"), Build.job("hard", after: [0]), Build.job("soft", regardless: [0]),
                    Build.job("next", after: [1])),
                uniqueKey: nil)
            let a = try await store.claimAll()[0]
            try expectEqual(try await store.fail(a, "disk full"), .accepted(.failed), "fail a (one attempt)")
            let snapshot = try await store.snapshot(of: run.run)
            try expectEqual(snapshot.jobs.map(\.state), [.failed, .cancelled, .ready, .cancelled], "states")
            try expectEqual(snapshot.jobs[0].lastError, "disk full", "a's error")
            try expect(
                snapshot.jobs[1].lastError?.contains("'a'") == true,
                "hard's reason: \(snapshot.jobs[1].lastError ?? "nil")")
            try expect(
                snapshot.jobs[3].lastError?.contains("'hard'") == true,
                "next's reason: \(snapshot.jobs[3].lastError ?? "nil")")
            let soft = try await store.claimAll()
            try expectEqual(soft.map(\.name), ["soft"], "the job that runs regardless")
            _ = try await store.succeed(soft[0])
            try expect(try await store.snapshot(of: run.run).run.finished != nil, "the run is finished")
        },
        check("retries wait for their backoff, persisted as notBefore") { store, clock in
            let run = try await store.submit(
                Build.graph("g", Build.job("a", retry: .constant(maxAttempts: 3, delay: .seconds(30)))), uniqueKey: nil)
            let first = try await store.claimAll()[0]
            try expectEqual(try await store.fail(first, "try again"), .accepted(.ready), "first failure")
            let record = try await store.record(of: first.job)
            try expectEqual(record.notBefore, clock.now.addingTimeInterval(30), "notBefore of the retry")
            try expectEqual(record.lastError, "try again", "last error")
            try expectEqual(record.attempts, 1, "attempts")
            clock.advance(by: .seconds(29))
            try expectEqual(try await store.claimAll().count, 0, "claimable before the backoff")
            clock.advance(by: .seconds(1))
            let second = try await store.claimAll()[0]
            try expectEqual(second.attempt, 2, "second attempt")
            try expectEqual(
                try await store.fail(second, "bad input", retryable: false), .accepted(.failed), "not retryable")
            try expectEqual(try await store.states(run), [.failed], "state")
        },
        check("retries backing off stay out of the way and keep their place in claims' order once due") {
            store, clock in
            // Retries keep their ids, older than the jobs submitted after them: while they back off, a claim
            // takes those jobs; once they are due, they come first again (same priority, older).
            // Shorter than the leases of the jobs claimed meanwhile (30 s), which the next due time also counts.
            let retry = RetryPolicy.constant(maxAttempts: 3, delay: .seconds(20))
            _ = try await store.submit(
                Build.graph("g", Build.job("r1", retry: retry), Build.job("r2", retry: retry)), uniqueKey: nil)
            for attempt in try await store.claimAll() {
                try expectEqual(
                    try await store.fail(attempt, "try again"), .accepted(.ready), "failure of \(attempt.name)")
            }
            _ = try await store.submit(
                Build.graph("h", Build.job("n1"), Build.job("n2"), Build.job("n3"), Build.job("top", priority: 3)),
                uniqueKey: nil)
            try expectEqual(
                try await store.claimAll(limit: 2).map(\.name), ["top", "n1"], "while the retries back off")
            try expectEqual(
                try await store.nextDueDate(kinds: ["k"]), clock.now.addingTimeInterval(20), "next due: the retries")
            clock.advance(by: .seconds(20))
            try expectEqual(try await store.claimAll(limit: 2).map(\.name), ["r1", "r2"], "once due, by age")
            try expectEqual(try await store.claimAll(limit: 5).map(\.name), ["n2", "n3"], "then the rest")
        },
        check("a backlog of retries that all came due while no worker claimed is taken in order, priority first") {
            store, clock in
            // More than a claim promotes at once (SQLite and PostgreSQL: the best 1,000 of those due).
            let retry = RetryPolicy.constant(maxAttempts: 2, delay: .seconds(60))
            var failing = GraphSpec(name: "failing")
            for index in 0..<1500 {
                failing.jobs.append(Build.job("r\(index)", priority: index == 1400 ? 3 : 2, retry: retry))
            }
            _ = try await store.submit(failing, uniqueKey: nil)
            try await store.failEveryClaimable()
            _ = try await store.submit(Build.graph("fresh", Build.job("n0"), Build.job("n1")), uniqueKey: nil)
            clock.advance(by: .seconds(600))
            try expectEqual(
                try await store.claimAll(limit: 3).map(\.name), ["r1400", "r0", "r1"], "first: the highest priority")
            var names: [String] = []
            while true {
                let claimed = try await store.claimAll(limit: 400)
                if claimed.isEmpty { break }
                names += claimed.map(\.name)
            }
            try expectEqual(
                names, (2..<1500).filter { $0 != 1400 }.map { "r\($0)" } + ["n0", "n1"],
                "then by age, the retries first")
        },
        check("due retries held back by a full category do not hide the others from a claim of several kinds") {
            store, clock in
            // 1,000 due retries whose category is full, older than a due retry without one: a claim promotes
            // at most 1,000 due jobs at once, and must not spend them on the ones it cannot take.
            let api = [DurableCategory(name: "api", limit: 1000)]
            let retry = RetryPolicy.constant(maxAttempts: 2, delay: .seconds(20))
            var blocked = GraphSpec(name: "blocked")
            for index in 0..<1000 { blocked.jobs.append(Build.job("b\(index)", retry: retry, categories: api)) }
            blocked.jobs.append(Build.job("r", retry: retry))
            // Due later than the others: once the three places below are taken, the claim must look again.
            blocked.jobs.append(Build.job("z", retry: .constant(maxAttempts: 2, delay: .seconds(40))))
            _ = try await store.submit(blocked, uniqueKey: nil)
            try await store.failEveryClaimable()
            // The category full: 1,000 holders of another kind, running.
            var holders = GraphSpec(name: "holders")
            for index in 0..<1000 { holders.jobs.append(Build.job("h\(index)", kind: "h", categories: api)) }
            _ = try await store.submit(holders, uniqueKey: nil)
            var held: [ClaimedJob] = []
            while true {
                let claimed = try await store.claimAll(["h"], limit: 500, lease: .seconds(600))
                if claimed.isEmpty { break }
                held += claimed
            }
            try expectEqual(held.count, 1000, "holders running")
            _ = try await store.submit(Build.graph("fresh", Build.job("f", kind: "x", priority: 1)), uniqueKey: nil)
            clock.advance(by: .seconds(20))
            try expectEqual(
                try await store.claimAll(["k", "x"], limit: 1).map(\.name), ["r"], "the due retry with room")
            try expectEqual(try await store.claimAll(["x", "k"], limit: 5).map(\.name), ["f"], "then the fresh job")
            let done = held.prefix(3).map {
                AttemptReport(lease: $0.lease, outcome: .succeeded(output: Data("1".utf8)))
            }
            try expectEqual(
                try await store.finish(done), Array(repeating: .accepted(.succeeded), count: 3), "three holders done")
            clock.advance(by: .seconds(20))
            // The 1,000 held-back retries had room when the claim began and come first; once they fill the
            // category, z (due, no category) is the next.
            try expectEqual(
                try await store.claimAll(["k", "x"], limit: 5).map(\.name), ["b0", "b1", "b2", "z"],
                "three places: the oldest, then the due job without a category")
        },
        check("a job with a start time made ready by its dependency after that time is claimed at once, by both claims")
        {
            store, clock in
            let start = clock.now.addingTimeInterval(10)
            _ = try await store.submit(
                Build.graph("g", Build.job("a"), Build.job("b", after: [0], notBefore: start), Build.job("c")),
                uniqueKey: nil)
            let a = try await store.claimAll(limit: 1)
            try expectEqual(a.map(\.name), ["a"], "first")
            clock.advance(by: .seconds(20))
            try expectEqual(try await store.succeed(a[0]), .accepted(.succeeded), "a")
            try expectEqual(try await store.claimAll(limit: 5).map(\.name), ["b", "c"], "b, due, then c")
            // The same through a completion's own claim: d waits for its time behind e, and is claimed
            // by the completion of e once due.
            _ = try await store.submit(
                Build.graph(
                    "h", Build.job("d", notBefore: clock.now.addingTimeInterval(5)), Build.job("e")),
                uniqueKey: nil)
            let e = try await store.claimAll(limit: 5)
            try expectEqual(e.map(\.name), ["e"], "before d's time")
            clock.advance(by: .seconds(5))
            let (results, claimed) = try await store.finish(
                [AttemptReport(lease: e[0].lease, outcome: .succeeded(output: Data("1".utf8)))], thenClaim: 5,
                worker: "w1", kinds: ["k"], lease: .seconds(30))
            try expectEqual(results, [.accepted(.succeeded)], "e")
            try expectEqual(claimed.map(\.name), ["d"], "d, claimed with e's completion")
        },
        check("the last attempt's failure is final") { store, _ in
            _ = try await store.submit(
                Build.graph("g", Build.job("a", retry: .immediate(maxAttempts: 2))), uniqueKey: nil)
            try expectEqual(try await store.fail(try await store.claimAll()[0]), .accepted(.ready), "first")
            let second = try await store.claimAll()[0]
            try expectEqual(second.attempt, 2, "attempt")
            try expectEqual(try await store.fail(second), .accepted(.failed), "second")
        },
        check("release gives a job back unattempted and frees its categories") { store, _ in
            _ = try await store.submit(
                Build.graph("g", Build.job("a", categories: [.named("c")]), Build.job("b", categories: [.named("c")])),
                uniqueKey: nil)
            let a = try await store.claimAll(limit: 1)[0]
            try await store.release([a.lease])
            let record = try await store.record(of: a.job)
            try expectEqual(record.state, .ready, "state")
            try expectEqual(record.attempts, 0, "attempts")
            let again = try await store.claimAll(worker: "w2", limit: 1)
            try expectEqual(again.map(\.name), ["a"], "claim after release")
            try expectEqual(again[0].attempt, 1, "attempt after release")
            try expectEqual(try await store.succeed(a), .rejected, "the released lease")
        },
    ]

    static let cancelChecks: [Check] = [
        check("cancelling a run cancels waiting jobs at once and asks running ones") { store, _ in
            let run = try await store.submit(
                Build.graph("g", Build.job("a"), Build.job("b"), Build.job("c", after: [0])), uniqueKey: nil)
            let a = try await store.claimAll(limit: 1)[0]
            try await store.cancel(run: run.run, reason: "user stopped it")
            try expectEqual(try await store.states(run), [.running, .cancelled, .cancelled], "states")
            try expectEqual(try await store.claimAll().count, 0, "claimable")
            let status = try await store.renew([a.lease], worker: "w1", lease: .seconds(30))
            guard case .cancelRequested(let reason, _) = status[0] else {
                throw ConformanceFailure(message: "renewal after cancel: \(status)")
            }
            try expectEqual(reason, "user stopped it", "reason")
            let result = try await store.finish([AttemptReport(lease: a.lease, outcome: .cancelled(reason: reason))])
            try expectEqual(result, [.accepted(.cancelled)], "report")
            let snapshot = try await store.snapshot(of: run.run)
            try expect(snapshot.run.finished != nil, "the run is finished")
            try expectEqual(snapshot.jobs[1].lastError, "user stopped it", "b's reason")
        },
        check("cancelling a job cancels its dependents; a running one ends cancelled with its lease") { store, clock in
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("a"), Build.job("b", after: [0]), Build.job("r", retry: .immediate(maxAttempts: 5))),
                uniqueKey: nil)
            try await store.cancel(job: run.jobs[0], reason: "not needed")
            try expectEqual(try await store.states(run), [.cancelled, .cancelled, .ready], "after cancelling a")
            try expect(try await store.record(of: run.jobs[1]).lastError?.contains("'a'") == true, "b's reason names a")
            _ = try await store.claimAll(lease: .seconds(5))
            try await store.cancel(job: run.jobs[2], reason: "stop r")
            clock.advance(by: .seconds(6))
            try expectEqual(try await store.claimAll().count, 0, "claimable after r's lease expired")
            try expectEqual(try await store.states(run)[2], .cancelled, "r")
            try await expectDurableError(.unknownJob) {
                try await store.cancel(job: DurableJobID(987_654), reason: "x")
            }
            try await expectDurableError(.unknownRun) {
                try await store.cancel(run: DurableRunID(987_654), reason: "x")
            }
        },
        check("a job asked to cancel that succeeds before hearing of it ends cancelled, and so do its dependents") {
            store, _ in
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("charge"), Build.job("receipt", after: [0]), Build.job("other"),
                    Build.job("late"), Build.job("after late", after: [3])),
                uniqueKey: nil)
            let claimed = try await store.claimAll()
            try expectEqual(claimed.map(\.name), ["charge", "other", "late"], "claimed")
            try await store.cancel(job: run.jobs[0], reason: "card refused")
            // Both successes in one call, as a worker sends them: the cancelled one and another.
            let results = try await store.finish(
                claimed.prefix(2).map { AttemptReport(lease: $0.lease, outcome: .succeeded(output: Data("1".utf8))) })
            try expectEqual(results, [.accepted(.cancelled), .accepted(.succeeded)], "the two successes")
            try expectEqual(
                try await store.states(run), [.cancelled, .cancelled, .succeeded, .running, .pending], "states")
            let attempt = try await store.attempts(of: run.jobs[0]).last
            try expectEqual(attempt?.outcome, .cancelled, "charge's attempt")
            try expect(attempt?.error?.contains("card refused") == true, "it says why: \(attempt?.error ?? "nil")")
            try expectEqual(try await store.payload(of: run.jobs[0]).output, nil, "no output kept")
            // The same through the call that reports and claims in one trip.
            try await store.cancel(run: run.run, reason: "stop everything")
            let (finished, next) = try await store.finish(
                [AttemptReport(lease: claimed[2].lease, outcome: .succeeded(output: Data("2".utf8)))], thenClaim: 10,
                worker: "w1", kinds: ["k"], lease: .seconds(30))
            try expectEqual(finished, [.accepted(.cancelled)], "late's success")
            try expectEqual(next.count, 0, "nothing to claim")
            try expectEqual(
                try await store.states(run), [.cancelled, .cancelled, .succeeded, .cancelled, .cancelled], "at the end")
            try expect(try await store.record(of: run.run).finished != nil, "the run is finished")
        },
    ]
}
