import BatonDurable
import Foundation

/// What operators read and repair: run lists, attempts, retries in place, deletion.
extension JobStoreConformance {
    static let operateChecks: [Check] = [
        check("runs are listed newest first by state, name and time, a page at a time") { store, clock in
            // ok: succeeds; bad: fails; stop: cancelled; open: still running.
            let ok = try await store.submit(Build.graph("ok", Build.job("a", kind: "ok")), uniqueKey: nil)
            _ = try await store.succeed(try await store.claimAll(["ok"])[0])
            clock.advance(by: .seconds(10))
            let bad = try await store.submit(
                Build.graph("bad", Build.job("a", kind: "bad"), Build.job("b", kind: "bad", after: [0])),
                uniqueKey: nil)
            _ = try await store.fail(try await store.claimAll(["bad"])[0], retryable: false)
            let stop = try await store.submit(Build.graph("stop", Build.job("a", kind: "none")), uniqueKey: nil)
            try await store.cancel(run: stop.run, reason: "no longer needed")
            clock.advance(by: .seconds(10))
            let open = try await store.submit(
                Build.graph("open", Build.job("a", kind: "none"), Build.job("b", kind: "none")), uniqueKey: "k")

            let all = try await store.runs(RunFilter())
            try expectEqual(all.runs.map(\.id), [open.run, stop.run, bad.run, ok.run], "newest first")
            try expectEqual(all.next, nil, "one page")
            try expectEqual(
                all.runs.map(\.state), [.running, .cancelled, .failed, .succeeded], "states")
            let first = all.runs[0]
            try expectEqual(
                [first.jobs, first.unfinished, first.done, first.failed, first.cancelled], [2, 2, 0, 0, 0],
                "open's counts")
            try expectEqual(first.uniqueKey, "k", "unique key")
            try expectEqual(first.finished, nil, "open has not finished")
            let failed = all.runs[2]
            try expectEqual(
                [failed.jobs, failed.unfinished, failed.failed, failed.cancelled], [2, 0, 1, 1], "bad's counts")
            for state in RunState.allCases {
                let listed = try await store.runs(RunFilter(state: state)).runs.map(\.state)
                try expectEqual(listed, [state], "runs in state \(state)")
            }
            try expectEqual(try await store.runs(RunFilter(name: "bad")).runs.map(\.id), [bad.run], "by name")
            try expectEqual(try await store.runs(RunFilter(name: "nothing")).runs, [], "an unknown name")
            let start = clock.now.addingTimeInterval(-20)
            try expectEqual(
                try await store.runs(RunFilter(createdSince: start.addingTimeInterval(5))).runs.map(\.id),
                [open.run, stop.run, bad.run], "created since")
            try expectEqual(
                try await store.runs(RunFilter(createdBefore: start.addingTimeInterval(5))).runs.map(\.id), [ok.run],
                "created before")
            // Pages of one, then the next from `next`.
            var filter = RunFilter(limit: 3)
            let page1 = try await store.runs(filter)
            try expectEqual(page1.runs.map(\.id), [open.run, stop.run, bad.run], "first page")
            try expectEqual(page1.next, bad.run, "the first page says where the next begins")
            filter.before = page1.next
            let page2 = try await store.runs(filter)
            try expectEqual(page2.runs.map(\.id), [ok.run], "second page")
            try expectEqual(page2.next, nil, "the last page says so")
            let counts = try await store.runCounts()
            try expectEqual(counts, [.running: 1, .succeeded: 1, .failed: 1, .cancelled: 1], "counts by state")
            try await expectDurableError(.misuse) { _ = try await store.runs(RunFilter(limit: 0)) }
        },
        check("a job's attempts list each error, lost lease and cancellation with its worker, then the success") {
            store, clock in
            let run = try await store.submit(
                Build.graph("g", Build.job("a", retry: .constant(maxAttempts: 5, delay: .zero))), uniqueKey: nil)
            let job = run.jobs[0]
            try expectEqual(try await store.attempts(of: job), [], "none before the first")
            _ = try await store.fail(try await store.claimAll(worker: "w1")[0], "timeout")
            _ = try await store.claimAll(worker: "w2", lease: .seconds(5))
            clock.advance(by: .seconds(6))
            let third = try await store.claimAll(worker: "w3")[0]
            _ = try await store.succeed(third)
            let attempts = try await store.attempts(of: job)
            try expectEqual(attempts.map(\.attempt), [1, 2, 3], "numbers")
            try expectEqual(attempts.map(\.outcome), [.failed, .lost, .succeeded], "outcomes")
            try expectEqual(attempts.map(\.result), [.ready, .ready, .succeeded], "what the job became")
            try expectEqual(attempts.map(\.worker).prefix(2), ["w1", "w2"], "workers")
            try expectEqual(attempts[0].error, "timeout", "the error")
            try expect(attempts[1].error?.contains("w2") == true, "a lost lease names its worker: \(attempts[1])")
            try expectEqual(attempts[2].error, nil, "a success has no error")
            try expect(attempts[0].ended <= attempts[1].ended, "in the order they ended")

            let cancelled = try await store.submit(Build.graph("c", Build.job("a", kind: "c")), uniqueKey: nil)
            let claimed = try await store.claimAll(["c"], worker: "w4")[0]
            try await store.cancel(run: cancelled.run, reason: "stop it")
            _ = try await store.finish([AttemptReport(lease: claimed.lease, outcome: .cancelled(reason: "stopped"))])
            let ended = try await store.attempts(of: cancelled.jobs[0])
            try expectEqual(ended.map(\.outcome), [.cancelled], "a cancelled attempt")
            try expectEqual(ended.map(\.worker), ["w4"], "its worker")
            try await expectDurableError(.unknownJob) { _ = try await store.attempts(of: DurableJobID(987_654)) }
        },
        check("a run's jobs are listed in the order they were added, by state, a page at a time") { store, clock in
            // a fails, b is cancelled with it, c succeeds (having started), d and e wait; x is added by c.
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("a", kind: "a"), Build.job("b", kind: "b", after: [0]), Build.job("c", kind: "c"),
                    Build.job("d", kind: "d"), Build.job("e", kind: "d")),
                uniqueKey: nil)
            let other = try await store.submit(Build.graph("o", Build.job("z", kind: "z")), uniqueKey: nil)
            _ = try await store.fail(try await store.claimAll(["a"], worker: "w1")[0], "a broke", retryable: false)
            let c = try await store.claimAll(["c"], worker: "w2")[0]
            let started = clock.now
            clock.advance(by: .seconds(3))
            _ = try await store.finish([
                AttemptReport(
                    lease: c.lease, outcome: .succeeded(output: Data("1".utf8)),
                    additions: RunAddition(jobs: [Build.job("x", kind: "x")]))
            ])

            let all = try await store.jobs(JobFilter(run: run.run))
            try expectEqual(all.jobs.map(\.name), ["a", "b", "c", "d", "e", "x"], "in the order they were added")
            try expectEqual(all.next, nil, "one page")
            try expectEqual(
                all.jobs.map(\.state), [.failed, .cancelled, .succeeded, .ready, .ready, .ready], "their states")
            try expectEqual(all.jobs[0].lastError, "a broke", "a's error")
            try expectEqual(all.jobs[0].attempts, 1, "a's attempts")
            try expectEqual(all.jobs[2].started, started, "when c started")
            try expectEqual(all.jobs[2].finished, started.addingTimeInterval(3), "when c finished")
            try expectEqual(all.jobs[2].kind, "c", "its kind")
            try expectEqual(all.jobs[5].addedBy, run.jobs[2], "x was added by c")
            try expectEqual(all.jobs[3].started, nil, "d has not started")
            try expectEqual(
                try await store.jobs(JobFilter(run: run.run, state: .ready)).jobs.map(\.name), ["d", "e", "x"],
                "only the ready ones")
            try expectEqual(
                try await store.jobs(JobFilter(run: run.run, state: .running)).jobs, [], "none running")
            // Pages of two, from `next`, with and without a state.
            var filter = JobFilter(run: run.run, limit: 2)
            var names: [[String]] = []
            while true {
                let page = try await store.jobs(filter)
                names.append(page.jobs.map(\.name))
                guard let next = page.next else { break }
                filter.after = next
            }
            try expectEqual(names, [["a", "b"], ["c", "d"], ["e", "x"]], "pages of two")
            let ready = try await store.jobs(JobFilter(run: run.run, state: .ready, limit: 2))
            try expectEqual(ready.jobs.map(\.name), ["d", "e"], "the first page of ready jobs")
            try expectEqual(
                try await store.jobs(JobFilter(run: run.run, state: .ready, after: ready.next, limit: 2)).jobs.map(
                    \.name),
                ["x"], "the second page of ready jobs")
            try expectEqual(
                try await store.jobs(JobFilter(run: other.run)).jobs.map(\.name), ["z"], "another run's jobs")
            try expectEqual(
                try await store.jobs(JobFilter(run: other.run, after: run.jobs[0])).jobs, [],
                "a job of another run as `after` gives an empty page")
            try await expectDurableError(.unknownRun) {
                _ = try await store.jobs(JobFilter(run: DurableRunID(987_654)))
            }
            try await expectDurableError(.misuse) { _ = try await store.jobs(JobFilter(run: run.run, limit: 1_001)) }

            // Every attempt of the run, in one call, as each job's own list.
            let byJob = try await store.attempts(ofRun: run.run)
            try expectEqual(Set(byJob.keys), [run.jobs[0], run.jobs[2]], "the jobs that ended an attempt")
            for job in byJob.keys {
                try expectEqual(byJob[job], try await store.attempts(of: job), "\(job)'s attempts")
            }
            try expectEqual(byJob[run.jobs[0]]?.map(\.worker), ["w1"], "a's worker")
            try expectEqual(try await store.attempts(ofRun: other.run), [:], "none in the other run")
            try await expectDurableError(.unknownRun) { _ = try await store.attempts(ofRun: DurableRunID(987_654)) }
        },
        check("workers are listed with the leases they hold, registered or not; a job's input and output are read") {
            store, clock in
            try await store.register(
                WorkerRecord(id: "w2", kinds: ["b", "a"], expires: clock.now.addingTimeInterval(30)))
            try await store.register(WorkerRecord(id: "w9", kinds: ["z"], expires: clock.now.addingTimeInterval(5)))
            let run = try await store.submit(
                Build.graph("g", Build.job("a", kind: "a"), Build.job("b", kind: "b"), Build.job("c", inputFrom: 0)),
                uniqueKey: nil)
            try expectEqual(
                try await store.workers().map(\.id), ["w2", "w9"], "registered workers without leases, by id")
            let started = clock.now
            let a = try await store.claimAll(["a"], worker: "w2", lease: .seconds(20))[0]
            _ = try await store.claimAll(["b"], worker: "ghost", lease: .seconds(20))
            clock.advance(by: .seconds(6))  // w9's registration lapses
            let workers = try await store.workers()
            try expectEqual(workers.map(\.id), ["ghost", "w2"], "w9 lapsed; ghost holds a lease unregistered")
            try expectEqual(workers[0].kinds, [], "ghost is not registered")
            try expectEqual(workers[0].expires, nil, "ghost has no registration")
            try expectEqual(workers[0].leases.map(\.name), ["b"], "ghost's lease")
            try expectEqual(Set(workers[1].kinds), ["a", "b"], "w2's kinds")
            let lease = try unwrap(workers[1].leases.first, "w2's lease")
            try expectEqual(
                lease,
                HeldLease(
                    job: run.jobs[0], name: "a", kind: "a", run: run.run, attempt: 1, started: started,
                    expires: started.addingTimeInterval(20)), "w2 holds a")
            _ = try await store.succeed(a, output: "\"A\"")
            try expectEqual(try await store.workers().first { $0.id == "w2" }?.leases, [], "a's lease ended")

            let payload = try await store.payload(of: run.jobs[0])
            try expectEqual(payload.input, Data("\"a\"".utf8), "a's input")
            try expectEqual(payload.output, Data("\"A\"".utf8), "a's output")
            try expectEqual(payload.inputFrom, nil, "a's input is its own")
            let c = try await store.payload(of: run.jobs[2])
            try expectEqual(c.inputFrom, run.jobs[0], "c takes a's output")
            try expectEqual(c.input, nil, "c has no input of its own")
            try expectEqual(c.output, nil, "c has not run")
            try await expectDurableError(.unknownJob) { _ = try await store.payload(of: DurableJobID(987_654)) }
        },
        check("retrying a failed job runs it and the dependents it cancelled again, in place") { store, _ in
            // a → b → c, and d runs regardless of a; e depends on nothing and succeeds.
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("a", retry: .constant(maxAttempts: 2, delay: .zero)), Build.job("b", after: [0]),
                    Build.job("c", after: [1]), Build.job("d", kind: "later", regardless: [0]), Build.job("e")),
                uniqueKey: nil)
            for job in try await store.claimAll() {
                if job.name == "a" { _ = try await store.fail(job, "first") } else { _ = try await store.succeed(job) }
            }
            _ = try await store.fail(try await store.claimAll()[0], "second")
            try expectEqual(
                try await store.states(run), [.failed, .cancelled, .cancelled, .ready, .succeeded], "after a failed")
            try expectEqual(try await store.runs(RunFilter()).runs[0].state, .running, "d has not run yet")
            _ = try await store.succeed(try await store.claimAll(["later"])[0])
            try expectEqual(try await store.record(of: run.run).finished != nil, true, "the run finished")
            try expectEqual(try await store.runs(RunFilter()).runs[0].state, .failed, "failed")

            try await expectDurableError(.misuse) { _ = try await store.retry(job: run.jobs[4]) }  // succeeded
            try await expectDurableError(.misuse) { _ = try await store.retry(job: run.jobs[1]) }  // a failed
            try expectEqual(try await store.retry(job: run.jobs[0]), 3, "a, b and c run again")
            try expectEqual(
                try await store.states(run), [.ready, .pending, .pending, .succeeded, .succeeded], "after the retry")
            let summary = try await store.runs(RunFilter()).runs[0]
            try expectEqual(summary.state, .running, "the run is running again")
            try expectEqual([summary.unfinished, summary.failed, summary.cancelled], [3, 0, 0], "its counts")
            try expectEqual(try await store.record(of: run.run).finished, nil, "not finished")
            // A fresh budget: two attempts again, numbered on from the two before (each claim its own number).
            let again = try await store.claimAll()
            try expectEqual(again.map(\.name), ["a"], "a is claimed")
            try expectEqual(again[0].attempt, 3, "numbered on")
            try expectEqual(again[0].maxAttempts, 4, "two attempts more")
            try expectEqual(
                try await store.fail(again[0], "third"), .accepted(.ready), "the first failure of the retry")
            let fourth = try await store.claimAll()
            try expectEqual(fourth.map(\.attempt), [4], "its second attempt since the retry")
            _ = try await store.succeed(fourth[0])
            _ = try await store.succeed(try await store.claimAll()[0])  // b
            _ = try await store.succeed(try await store.claimAll()[0])  // c
            try expectEqual(
                try await store.states(run), [.succeeded, .succeeded, .succeeded, .succeeded, .succeeded], "all done")
            try expectEqual(try await store.runs(RunFilter()).runs[0].state, .succeeded, "the run succeeded")
            try expect(try await store.record(of: run.run).finished != nil, "finished again")
            try expectEqual(
                try await store.attempts(of: run.jobs[0]).map(\.error), ["first", "second", "third", nil],
                "the attempts of both tries, in order")
            try await expectDurableError(.unknownJob) { _ = try await store.retry(job: DurableJobID(987_654)) }
        },
        check("a retry keeps the start date of a job that never started; one that ran is due at once") {
            store, clock in
            let later = clock.now.addingTimeInterval(3_600)
            let latest = clock.now.addingTimeInterval(7_200)
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("a"), Build.job("b", after: [0], notBefore: later),
                    Build.job("c", kind: "c", notBefore: latest)),
                uniqueKey: nil)
            _ = try await store.fail(try await store.claimAll()[0], "no", retryable: false)
            try await store.cancel(job: run.jobs[2], reason: "not now")
            try expectEqual(try await store.states(run), [.failed, .cancelled, .cancelled], "before the retry")
            try expectEqual(try await store.retry(run: run.run), 3, "a, b and c run again")
            try expectEqual(try await store.record(of: run.jobs[1]).notBefore, later, "b's start date")
            try expectEqual(try await store.record(of: run.jobs[2]).notBefore, latest, "c's start date")
            try expectEqual(try await store.claimAll(["c"]).count, 0, "c before its start date")
            _ = try await store.succeed(try await store.claimAll()[0])  // a
            try expectEqual(try await store.claimAll().count, 0, "b before its start date")
            try expectEqual(try await store.nextDueDate(kinds: ["k", "c"]), later, "next due: b's start date")
            clock.advance(by: .seconds(3_600))
            try expectEqual(try await store.claimAll().map(\.name), ["b"], "b at its start date")
            clock.advance(by: .seconds(3_600))
            try expectEqual(try await store.claimAll(["c"]).map(\.name), ["c"], "c at its start date")

            // A job cancelled while it waited for its backoff: its retry begins afresh, at once.
            let other = try await store.submit(
                Build.graph("h", Build.job("d", kind: "d", retry: .exponential(maxAttempts: 3, initial: .seconds(60)))),
                uniqueKey: nil)
            try expectEqual(try await store.fail(try await store.claimAll(["d"])[0]), .accepted(.ready), "d backs off")
            try await store.cancel(job: other.jobs[0], reason: "stop")
            try expectEqual(try await store.retry(job: other.jobs[0]), 1, "d runs again")
            try expectEqual(try await store.claimAll(["d"]).map(\.name), ["d"], "d at once")
        },
        check("a dependent that runs regardless waits for a retried job's new outcome") { store, _ in
            // a fails; d runs regardless of a and also waits for b (not yet run).
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("a"), Build.job("b", kind: "slow"),
                    Build.job("d", kind: "d", after: [1], regardless: [0])),
                uniqueKey: nil)
            _ = try await store.fail(try await store.claimAll()[0], "no", retryable: false)
            try expectEqual(try await store.states(run), [.failed, .ready, .pending], "d waits for b")
            try expectEqual(try await store.retry(job: run.jobs[0]), 1, "only a")
            _ = try await store.succeed(try await store.claimAll(["slow"])[0])
            try expectEqual(try await store.states(run), [.ready, .succeeded, .pending], "d waits for a again")
            _ = try await store.succeed(try await store.claimAll()[0])
            try expectEqual(try await store.states(run), [.succeeded, .succeeded, .ready], "then d is ready")
        },
        check("retrying a run retries each failed job whose dependencies did not fail; a cancelled run runs again") {
            store, _ in
            let run = try await store.submit(
                Build.graph("g", Build.job("a"), Build.job("b", after: [0]), Build.job("c"), Build.job("d")),
                uniqueKey: nil)
            for job in try await store.claimAll() where job.name != "d" {
                if job.name == "c" {
                    _ = try await store.succeed(job)
                } else {
                    _ = try await store.fail(job, retryable: false)
                }
            }
            try expectEqual(try await store.retry(run: run.run), 2, "a and b")
            try expectEqual(try await store.states(run), [.ready, .pending, .succeeded, .running], "after")
            try expectEqual(try await store.retry(run: run.run), 0, "nothing failed: nothing to retry")

            let stopped = try await store.submit(
                Build.graph("s", Build.job("a", kind: "s"), Build.job("b", kind: "s", after: [0])), uniqueKey: nil)
            try await store.cancel(run: stopped.run, reason: "pause")
            try expectEqual(try await store.runs(RunFilter(name: "s")).runs.map(\.state), [.cancelled], "cancelled")
            try expectEqual(try await store.retry(run: stopped.run), 2, "both")
            try expectEqual(try await store.states(stopped), [.ready, .pending], "running again")
            try await expectDurableError(.unknownRun) { _ = try await store.retry(run: DurableRunID(987_654)) }
        },
        // Retrying a run just after cancelling it made its cancelled dependents pending again and said
        // so, then the running job's attempt ended cancelled and cancelled them again: the retry was
        // undone while it had reported jobs running again.
        check("a retry waits for a dependency still being cancelled: refused saying which, then runs everything") {
            store, _ in
            let run = try await store.submit(
                Build.graph("g", Build.job("a"), Build.job("b", after: [0])), uniqueKey: nil)
            let a = try await store.claimAll()[0]
            try await store.cancel(run: run.run, reason: "stop")
            try expectEqual(try await store.states(run), [.running, .cancelled], "a is being cancelled")
            let refused = try await expectDurableError(.misuse) { _ = try await store.retry(run: run.run) }
            try expect(
                refused.message.contains("its dependency 'a' is still being cancelled"), "names a: \(refused.message)")
            let one = try await expectDurableError(.misuse) { _ = try await store.retry(job: run.jobs[1]) }
            try expect(one.message.contains("'a' is still being cancelled"), "names a: \(one.message)")
            try expectEqual(try await store.states(run), [.running, .cancelled], "nothing was changed")
            _ = try await store.finish([AttemptReport(lease: a.lease, outcome: .cancelled(reason: "stop"))])
            try expectEqual(try await store.states(run), [.cancelled, .cancelled], "a has stopped")
            try expectEqual(try await store.retry(run: run.run), 2, "then both run again")
            try expectEqual(try await store.states(run), [.ready, .pending], "and stay so")
        },
        check("a finished run can be deleted with its jobs; an unfinished one cannot") { store, _ in
            let done = try await store.submit(
                Build.graph("d", Build.job("a", retry: .constant(maxAttempts: 2, delay: .zero))), uniqueKey: "d")
            _ = try await store.fail(try await store.claimAll()[0])
            let open = try await store.submit(Build.graph("o", Build.job("a", kind: "none")), uniqueKey: nil)
            try await expectDurableError(.misuse) { try await store.delete(run: open.run) }
            try await expectDurableError(.misuse) { try await store.delete(run: done.run) }  // a retry is due
            _ = try await store.succeed(try await store.claimAll()[0])
            try await store.delete(run: done.run)
            try await expectDurableError(.unknownRun) { _ = try await store.snapshot(of: done.run) }
            try await expectDurableError(.unknownJob) { _ = try await store.attempts(of: done.jobs[0]) }
            try await expectDurableError(.unknownRun) { try await store.delete(run: done.run) }
            try expectEqual(try await store.runs(RunFilter()).runs.map(\.id), [open.run], "only the open run is left")
            let again = try await store.submit(Build.graph("d", Build.job("a")), uniqueKey: "d")
            try expectEqual(again.existing, false, "the deleted run's key is free")
        },
    ]
}
