import BatonDurable
import Foundation

/// Runs that grow: jobs added by a running job, stored with its success.
extension JobStoreConformance {
    static let growthChecks: [Check] = [
        check("jobs added by a success are stored with it, once; a failed or stale attempt adds nothing") {
            store, clock in
            let run = try await store.submit(
                Build.graph("g", Build.job("list", retry: .constant(maxAttempts: 3, delay: .zero))), uniqueKey: nil)
            let more = RunAddition(jobs: [Build.job("import"), Build.job("next", after: [0])])
            let first = try await store.claimAll(lease: .seconds(5))[0]
            try expectEqual(
                try await store.finish([
                    AttemptReport(lease: first.lease, outcome: .failed(message: "no", retryable: true), additions: more)
                ]), [.accepted(.ready)], "a failure")
            try expectEqual(try await store.snapshot(of: run.run).jobs.count, 1, "a failure adds nothing")
            let second = try await store.claimAll(lease: .seconds(5))[0]
            clock.advance(by: .seconds(6))
            let third = try await store.claimAll()[0]
            try expectEqual(
                try await store.finish([
                    AttemptReport(lease: second.lease, outcome: .succeeded(output: Data("1".utf8)), additions: more)
                ]), [.rejected], "a stale attempt")
            try expectEqual(try await store.snapshot(of: run.run).jobs.count, 1, "a stale attempt adds nothing")
            let report = AttemptReport(lease: third.lease, outcome: .succeeded(output: Data("1".utf8)), additions: more)
            try expectEqual(try await store.finish([report]), [.accepted(.succeeded)], "the success")
            let jobs = try await store.snapshot(of: run.run).jobs
            try expectEqual(jobs.map(\.name), ["list", "import", "next"], "the added jobs, after the run's")
            try expectEqual(jobs.map(\.state), [.succeeded, .ready, .pending], "their states")
            try expectEqual(jobs.map(\.addedBy), [nil, run.jobs[0], run.jobs[0]], "who added them")
            try expectEqual(jobs[2].dependencies.map(\.job), [jobs[1].id], "their edges")
            let summary = try await store.runs(RunFilter()).runs[0]
            try expectEqual([summary.jobs, summary.unfinished], [3, 2], "the run counts them")
            try expectEqual(try await store.record(of: run.run).finished, nil, "the run is not finished")
            _ = try? await store.finish([report])  // sent again: recognised or rejected, never added twice
            try expectEqual(try await store.snapshot(of: run.run).jobs.count, 3, "added once")
            for job in try await store.claimAll() { _ = try await store.succeed(job) }
            for job in try await store.claimAll() { _ = try await store.succeed(job) }
            try expect(try await store.record(of: run.run).finished != nil, "the run finishes with its added jobs")
            let explained = try await store.explain(run: run.run).description
            try expect(explained.contains("    + import"), "explain shows added jobs under their adder:\n\(explained)")
        },
        // A program that crashed after a run grew and submits its graph again with the run's unique key
        // (to resume, as with River or Oban) was refused with uniqueKeyConflict ("a run of 4 jobs; graph
        // has 2"): the jobs the run added counted toward its shape.
        check("a run that grew is returned for its unique key, with the jobs it was submitted with") { store, _ in
            let graph = Build.graph("paged", Build.job("page"), Build.job("report", afterAll: [0]))
            let run = try await store.submit(graph, uniqueKey: "import-2026-06")
            let page = try await store.claimAll()[0]
            _ = try await store.finish([
                AttemptReport(
                    lease: page.lease, outcome: .succeeded(output: Data("1".utf8)),
                    additions: RunAddition(jobs: [Build.job("page 2"), Build.job("page 3")]))
            ])
            try expectEqual(try await store.snapshot(of: run.run).jobs.count, 4, "the run grew")
            let again = try await store.submit(graph, uniqueKey: "import-2026-06")
            try expect(again.existing, "the run is returned, not a new one")
            try expectEqual(again.run, run.run, "the same run")
            try expectEqual(again.jobs, run.jobs, "its handles name the jobs the graph was submitted with")
            try expectEqual(try await store.runs(RunFilter()).runs.count, 1, "no second run")
        },
        check("a dependent with afterAll waits for everything its dependency adds, transitively") { store, _ in
            let run = try await store.submit(
                GraphSpec(
                    name: "g",
                    jobs: [
                        Build.job("first"),
                        JobSpec(
                            name: "all", kind: "all", input: Data("1".utf8),
                            dependencies: [JobSpec.Dependency(index: 0, includingAdded: true)], retry: .never),
                        Build.job("plain", kind: "plain", after: [0]),
                    ]), uniqueKey: nil)
            let first = try await store.claimAll()[0]
            _ = try await store.finish([
                AttemptReport(
                    lease: first.lease, outcome: .succeeded(output: Data("1".utf8)),
                    additions: RunAddition(jobs: [Build.job("second")]))
            ])
            try expectEqual(
                try await store.states(run), [.succeeded, .pending, .ready, .ready], "all waits for second; plain runs")
            let second = try await store.claimAll()[0]
            try expectEqual(second.name, "second", "second is claimed")
            _ = try await store.finish([
                AttemptReport(
                    lease: second.lease, outcome: .succeeded(output: Data("1".utf8)),
                    additions: RunAddition(jobs: [Build.job("third")]))
            ])
            try expectEqual(try await store.states(run)[1], .pending, "all waits for what second added")
            _ = try await store.succeed(try await store.claimAll()[0])
            try expectEqual(try await store.states(run)[1], .ready, "then all is ready")
            let all = try await store.snapshot(of: run.run).jobs[1]
            try expectEqual(all.dependencies.count, 3, "all's edges: first, second and third")
            try expect(all.dependencies.allSatisfy(\.includingAdded), "each waits for what its job adds")
        },
        check(
            "added names the run has get a suffix; edges to the run's jobs; a cycle or another run's job fails the adder"
        ) {
            store, _ in
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("list"), Build.job("other", kind: "o"), Build.job("after", kind: "a", after: [0])),
                uniqueKey: nil)
            let list = try await store.claimAll()[0]
            _ = try await store.finish([
                AttemptReport(
                    lease: list.lease, outcome: .succeeded(output: Data("1".utf8)),
                    additions: RunAddition(
                        jobs: [Build.job("other", kind: "x"), Build.job("other", kind: "x")], after: [run.jobs[1]]))
            ])
            let jobs = try await store.snapshot(of: run.run).jobs
            try expectEqual(jobs.map(\.name), ["list", "other", "after", "other #2", "other #3"], "unique names")
            try expectEqual(jobs.suffix(2).map(\.state), [.pending, .pending], "they wait for other")
            _ = try await store.succeed(try await store.claimAll(["o"])[0])
            try expectEqual(
                try await store.snapshot(of: run.run).jobs.suffix(2).map(\.state), [.ready, .ready], "then run")

            let cyclic = try await store.submit(
                Build.graph("c", Build.job("p", kind: "c"), Build.job("d", kind: "d", after: [0])), uniqueKey: nil)
            let p = try await store.claimAll(["c"])[0]
            try expectEqual(
                try await store.finish([
                    AttemptReport(
                        lease: p.lease, outcome: .succeeded(output: Data("1".utf8)),
                        additions: RunAddition(jobs: [Build.job("x", kind: "x")], after: [cyclic.jobs[1]]))
                ]), [.accepted(.failed)], "waiting for its own dependent fails the adder")
            let failed = try await store.snapshot(of: cyclic.run).jobs
            try expectEqual(failed.count, 2, "nothing added")
            try expect(failed[0].lastError?.contains("cycle") == true, "says why: \(failed[0].lastError ?? "nil")")
            let attempts = try await store.attempts(of: cyclic.jobs[0])
            try expectEqual(attempts.map(\.outcome), [.failed], "the refused attempt is recorded as failed")
            try expect(attempts.first?.error?.contains("cycle") == true, "with why: \(attempts)")

            let foreign = try await store.submit(Build.graph("f", Build.job("p", kind: "f")), uniqueKey: nil)
            let q = try await store.claimAll(["f"])[0]
            try expectEqual(
                try await store.finish([
                    AttemptReport(
                        lease: q.lease, outcome: .succeeded(output: Data("1".utf8)),
                        additions: RunAddition(jobs: [Build.job("x", kind: "x")], after: [run.jobs[0]]))
                ]), [.accepted(.failed)], "a job of another run fails the adder")
            try expectEqual(try await store.snapshot(of: foreign.run).jobs.count, 1, "nothing added")

            // Waiting for a job that is running now is refused (its completion may be under way), as a
            // conflict of the moment: the adder's attempt fails as retryable, and a later one adds.
            let busy = try await store.submit(
                Build.graph(
                    "b", Build.job("p", kind: "b1", retry: .constant(maxAttempts: 3, delay: .zero)),
                    Build.job("r", kind: "b2")), uniqueKey: nil)
            let adder = try await store.claimAll(["b1"])[0]
            let running = try await store.claimAll(["b2"])[0]
            let waiting = RunAddition(jobs: [Build.job("x", kind: "x")], after: [busy.jobs[1]])
            try expectEqual(
                try await store.finish([
                    AttemptReport(lease: adder.lease, outcome: .succeeded(output: Data("1".utf8)), additions: waiting)
                ]), [.accepted(.ready)], "waiting for a running job fails the adder's attempt, to be retried")
            let refused = try await store.snapshot(of: busy.run).jobs
            try expectEqual(refused.count, 2, "nothing added")
            try expect(refused[0].lastError?.contains("running now") == true, "says why: \(refused[0])")
            try expectEqual(
                try await store.attempts(of: busy.jobs[0]).map(\.outcome), [.failed], "the refused attempt, failed")
            _ = try await store.succeed(running)
            let again = try await store.claimAll(["b1"])
            try expectEqual(again.map(\.attempt), [2], "the adder is tried again")
            try expectEqual(
                try await store.finish([
                    AttemptReport(
                        lease: again[0].lease, outcome: .succeeded(output: Data("1".utf8)), additions: waiting)
                ]), [.accepted(.succeeded)], "its next attempt adds")
            try expectEqual(try await store.states(busy), [.succeeded, .succeeded, .ready], "x is ready")

            // A graph that cannot be fails the adder at once, whatever its retry policy, even when it also
            // waits for a running job (met first, in identity order).
            let doomed = try await store.submit(
                Build.graph(
                    "d", Build.job("s", kind: "d0"),
                    Build.job("p", kind: "d1", retry: .constant(maxAttempts: 3, delay: .zero)),
                    Build.job("q", kind: "d2", after: [1])), uniqueKey: nil)
            _ = try await store.claimAll(["d0"])
            try expectEqual(
                try await store.finish([
                    AttemptReport(
                        lease: try await store.claimAll(["d1"])[0].lease, outcome: .succeeded(output: Data("1".utf8)),
                        additions: RunAddition(
                            jobs: [Build.job("x", kind: "x")], after: [doomed.jobs[0], doomed.jobs[2]]))
                ]), [.accepted(.failed)], "a cycle fails an adder that could retry, at once")
            let cycle = try await store.snapshot(of: doomed.run).jobs[1].lastError ?? ""
            try expect(cycle.contains("cycle"), "names the cycle, not the running job: \(cycle)")

            // A conflict on the last attempt the policy allows fails the job.
            let last = try await store.submit(
                Build.graph("e", Build.job("p", kind: "e1"), Build.job("r", kind: "e2")), uniqueKey: nil)
            _ = try await store.claimAll(["e2"])
            try expectEqual(
                try await store.finish([
                    AttemptReport(
                        lease: try await store.claimAll(["e1"])[0].lease, outcome: .succeeded(output: Data("1".utf8)),
                        additions: RunAddition(jobs: [Build.job("x", kind: "x")], after: [last.jobs[1]]))
                ]), [.accepted(.failed)], "a conflict with no attempt left fails the adder")
            let history = try await store.attempts(of: last.jobs[0])
            try expectEqual(history.map(\.result), [.failed], "its attempt, in the history, failed the job")
            try expect(history.first?.error?.contains("running now") == true, "with why: \(history)")
        },
        check(
            "an addition of 5,000 jobs with edges and categories is stored whole, its names numbered past the run's"
        ) { store, _ in
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("list"), Build.job("page", kind: "q"), Build.job("page #2", kind: "q"),
                    Build.job("page #2 #2", kind: "q"), Build.job("report", kind: "r", afterAll: [0])),
                uniqueKey: nil)
            var jobs: [JobSpec] = []
            for index in 0..<4_998 {
                jobs.append(
                    Build.job(
                        "page", kind: "p", after: index % 100 == 0 ? [] : [index - 1],
                        categories: [.named("site", limit: 2)]))
            }
            jobs.append(Build.job("page #2", kind: "p"))
            jobs.append(Build.job("item", kind: "p", inputFrom: 0))
            let list = try await store.claimAll()[0]
            try expectEqual(
                try await store.finish([
                    AttemptReport(
                        lease: list.lease, outcome: .succeeded(output: Data("1".utf8)),
                        additions: RunAddition(jobs: jobs))
                ]), [.accepted(.succeeded)], "the success")
            let stored = try await store.snapshot(of: run.run).jobs
            try expectEqual(stored.count, 5_005, "every added job")
            let added = Array(stored.dropFirst(5))
            try expectEqual(
                added.map(\.name), (3...5_000).map { "page #\($0)" } + ["page #2 #3", "item"],
                "repeated and taken names get the first free numbers")
            try expectEqual(Set(added.map(\.name)).count, 5_000, "names unique")
            try expectEqual(
                added.filter { $0.state == .ready }.count, 51, "the 50 chains' heads and the job waiting for none")
            try expectEqual(added[1].dependencies.map(\.job), [added[0].id], "edges among them")
            try expectEqual(added[0].categories, [.named("site", limit: 2)], "categories")
            try expectEqual(added[4_999].inputFrom, added[0].id, "inputFrom")
            try expectEqual(stored[4].dependencies.count, 5_001, "the report waits for list and all it added")
            try expectEqual(
                try await store.claimAll(["p"], limit: 100).count, 3,
                "two at a time in the added jobs' category, and the one without")
        },
        check("an added name is compared with the run's as Swift compares names: by character, not byte") {
            store, _ in
            // U+212A KELVIN SIGN is the letter K to Swift (and so to a submission's check); "é" twice, as
            // one character and as e with a combining accent.
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("list"), Build.job("list 2"), Build.job("\u{212A}", kind: "q"),
                    Build.job("caf\u{E9}", kind: "q")),
                uniqueKey: nil)
            // Each adder alone: one adds only ASCII names, the other a name beyond ASCII.
            let lists = try await store.claimAll()
            try expectEqual(lists.count, 2, "both adders")
            for (adder, name) in zip(lists, ["K", "cafe\u{301}"]) {
                _ = try await store.finish([
                    AttemptReport(
                        lease: adder.lease, outcome: .succeeded(output: Data("1".utf8)),
                        additions: RunAddition(jobs: [Build.job(name, kind: "x")]))
                ])
            }
            let names = try await store.snapshot(of: run.run).jobs.dropFirst(4).map(\.name)
            try expectEqual(names, ["K #2", "cafe\u{301} #2"], "numbered as taken names")
        },
        check("a job whose run is being cancelled adds nothing when it succeeds, and ends cancelled") { store, _ in
            let run = try await store.submit(Build.graph("g", Build.job("p")), uniqueKey: nil)
            let adder = try await store.claimAll()[0]
            try await store.cancel(run: run.run, reason: "stop")
            try expectEqual(
                try await store.finish([
                    AttemptReport(
                        lease: adder.lease, outcome: .succeeded(output: Data("1".utf8)),
                        additions: RunAddition(jobs: [Build.job("x")]))
                ]), [.accepted(.cancelled)], "its success without its additions is recorded as cancelled")
            try expectEqual(try await store.snapshot(of: run.run).jobs.count, 1, "nothing added")
            try expect(try await store.record(of: run.run).finished != nil, "the run is finished")
        },
        check("a dependent cancelled before its dependency added jobs waits for them when the run is retried") {
            store, _ in
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("config", kind: "c"), Build.job("list", kind: "l"),
                    Build.job("report", kind: "r", after: [0], afterAll: [1])), uniqueKey: nil)
            // config fails: the report is cancelled while list still runs, then list adds a page.
            let list = try await store.claimAll(["l"])[0]
            try expectEqual(
                try await store.fail(try await store.claimAll(["c"])[0], retryable: false), .accepted(.failed),
                "config fails")
            try expectEqual(
                try await store.finish([
                    AttemptReport(
                        lease: list.lease, outcome: .succeeded(output: Data("1".utf8)),
                        additions: RunAddition(jobs: [Build.job("page", kind: "p")]))
                ]), [.accepted(.succeeded)], "list adds a page")
            try expectEqual(
                try await store.states(run), [.failed, .succeeded, .cancelled, .ready],
                "the report was cancelled; the page is added")
            _ = try await store.retry(run: run.run)
            try expectEqual(
                try await store.succeed(try await store.claimAll(["c"])[0]), .accepted(.succeeded), "config")
            try expectEqual(try await store.claimAll(["r"]).count, 0, "the report waits for the added page")
            try expectEqual(try await store.succeed(try await store.claimAll(["p"])[0]), .accepted(.succeeded), "page")
            try expectEqual(try await store.claimAll(["r"]).count, 1, "then it runs")
        },
        check("a job cancelled alone while it runs adds nothing; what waits for all it adds is cancelled") {
            store, _ in
            let run = try await store.submit(
                Build.graph("g", Build.job("list"), Build.job("report", kind: "report", afterAll: [0])), uniqueKey: nil)
            let adder = try await store.claimAll()[0]
            try await store.cancel(job: adder.lease.job, reason: "stop listing")
            try expectEqual(
                try await store.finish([
                    AttemptReport(
                        lease: adder.lease, outcome: .succeeded(output: Data("1".utf8)),
                        additions: RunAddition(jobs: [Build.job("page 2")]))
                ]), [.accepted(.cancelled)], "recorded as cancelled, not as a success without its additions")
            let jobs = try await store.snapshot(of: run.run).jobs
            try expectEqual(jobs.map(\.name), ["list", "report"], "nothing added")
            try expectEqual(jobs.map(\.state), [.cancelled, .cancelled], "the report does not run on a partial list")
            try expectEqual(try await store.claimAll(["report"]).count, 0, "nothing to claim")
            try expectEqual(
                try await store.attempts(of: adder.lease.job).map(\.outcome), [.cancelled],
                "the attempt, in the history")
        },
    ]
}
