import BatonDurable
import Foundation

extension JobStoreConformance {
    static let submitChecks: [Check] = [
        check("submit stores the graph: roots ready, the rest pending") { store, _ in
            let run = try await store.submit(
                Build.graph("g", Build.job("a"), Build.job("b", after: [0]), Build.job("c", after: [0, 1])),
                uniqueKey: nil)
            try expectEqual(run.existing, false, "existing")
            try expectEqual(Set(run.jobs).count, 3, "distinct job ids")
            try expectEqual(try await store.states(run), [.ready, .pending, .pending], "states")
            let snapshot = try await store.snapshot(of: run.run)
            try expectEqual(snapshot.run.name, "g", "run name")
            try expectEqual(snapshot.jobs.map(\.name), ["a", "b", "c"], "job order")
            try expectEqual(snapshot.jobs[2].dependencies.map(\.job), [run.jobs[0], run.jobs[1]], "edges of c")
            try expect(snapshot.run.finished == nil, "an unfinished run has no finish date")
            try expectEqual(try await store.run(of: run.jobs[1]), run.run, "run(of:)")
        },
        check("a cycle is rejected, naming it, and nothing is stored") { store, _ in
            let error = try await expectDurableError(.dependencyCycle) {
                _ = try await store.submit(
                    Build.graph(
                        "cyclic", Build.job("root"), Build.job("x", after: [0, 3]), Build.job("y", after: [1]),
                        Build.job("z", after: [2])),
                    uniqueKey: "cyclic")
            }
            try expectEqual(Set(error.jobs), ["x", "y", "z"], "jobs named by the cycle error")
            try expect(error.message.contains("'x'") && error.message.contains("cycle"), "message: \(error.message)")
            try expectEqual(try await store.claimAll().count, 0, "claimable jobs after a rejected submission")
            // The unique key was not taken by the rejected graph.
            let run = try await store.submit(Build.graph("ok", Build.job("a")), uniqueKey: "cyclic")
            try expectEqual(run.existing, false, "existing after a rejected submission with the same key")
        },
        check("a malformed graph is rejected before anything is stored") { store, _ in
            try await expectDurableError(.invalidGraph) {
                _ = try await store.submit(Build.graph("dup", Build.job("a"), Build.job("a")), uniqueKey: nil)
            }
            try await expectDurableError(.invalidGraph) {
                _ = try await store.submit(Build.graph("edge", Build.job("a", after: [5])), uniqueKey: nil)
            }
            try expectEqual(try await store.claimAll().count, 0, "claimable jobs")
        },
        check("numbers beyond a store's 32-bit integers are rejected before anything is stored") { store, _ in
            var cases: [(String, JobSpec)] = []
            var job = Build.job("a", priority: Int.max)
            cases.append(("a priority beyond Int32", job))
            job = Build.job("a", retry: .immediate(maxAttempts: 3))
            job.retry.maxAttempts = 0
            cases.append(("no attempt at all", job))
            job.retry.maxAttempts = Int(Int32.max) + 1
            cases.append(("attempts beyond Int32", job))
            job = Build.job("a", categories: [.named("c")])
            job.categories[0].limit = 0
            cases.append(("a category limit of 0", job))
            job = Build.job("a")
            job.timeout = .zero
            cases.append(("a zero timeout", job))
            for (what, job) in cases {
                let error = try await expectDurableError(.invalidGraph) {
                    _ = try await store.submit(GraphSpec(name: what, jobs: [job]), uniqueKey: nil)
                }
                try expect(error.message.contains("'a'") && error.jobs == ["a"], "\(what): \(error.message)")
            }
            try expectEqual(try await store.claimAll(["k", "big"]).count, 0, "claimable jobs")
            // The largest values accepted are stored and handed out as given.
            let big = Build.job(
                "big", kind: "big", priority: Int(Int32.max), retry: .immediate(maxAttempts: Int(Int32.max)),
                categories: [.named("wide", limit: Int(Int32.max))])
            _ = try await store.submit(GraphSpec(name: "edges", jobs: [big]), uniqueKey: nil)
            let claimed = try await store.claimAll(["big"])
            try expectEqual(claimed.map(\.priority), [Int(Int32.max)], "priority of the claimed job")
            try expectEqual(claimed.map(\.maxAttempts), [Int(Int32.max)], "attempts of the claimed job")
        },
        check("a unique key returns the existing run") { store, _ in
            let first = try await store.submit(Build.graph("g", Build.job("a"), Build.job("b")), uniqueKey: "key-1")
            let again = try await store.submit(Build.graph("g", Build.job("a"), Build.job("b")), uniqueKey: "key-1")
            try expectEqual(again.existing, true, "existing")
            try expectEqual(again.run, first.run, "run")
            try expectEqual(again.jobs, first.jobs, "jobs")
            let other = try await store.submit(Build.graph("g", Build.job("a")), uniqueKey: "key-2")
            try expect(other.run != first.run && !other.existing, "another key makes another run")
            try expectEqual(try await store.claimAll().count, 3, "claimable jobs (the resubmission added none)")
        },
    ]

    static let claimChecks: [Check] = [
        check("claim respects dependencies and passes outputs on as inputs") { store, _ in
            let run = try await store.submit(
                Build.graph("g", Build.job("a"), Build.job("b", inputFrom: 0), Build.job("c", after: [1])),
                uniqueKey: nil)
            let first = try await store.claimAll()
            try expectEqual(first.map(\.name), ["a"], "claimable before a finished")
            try expectEqual(first[0].attempt, 1, "attempt")
            try expectEqual(String(decoding: first[0].input, as: UTF8.self), "\"a\"", "input of a")
            try expectEqual(first[0].run, run.run, "run of the claim")
            try expectEqual(try await store.claimAll().count, 0, "claimable while a runs")
            try expectEqual(try await store.succeed(first[0], output: "{\"n\":42}"), .accepted(.succeeded), "finish a")
            let second = try await store.claimAll()
            try expectEqual(second.map(\.name), ["b"], "claimable after a")
            try expectEqual(String(decoding: second[0].input, as: UTF8.self), "{\"n\":42}", "input of b = output of a")
        },
        check("claim respects notBefore, and nextDueDate reports it") { store, clock in
            let start = clock.now
            _ = try await store.submit(
                Build.graph("g", Build.job("later", notBefore: start.addingTimeInterval(10))), uniqueKey: nil)
            try expectEqual(try await store.claimAll().count, 0, "claimable before notBefore")
            try expectEqual(try await store.nextDueDate(kinds: ["k"]), start.addingTimeInterval(10), "nextDueDate")
            clock.advance(by: .seconds(9))
            try expectEqual(try await store.claimAll().count, 0, "claimable 1 s before notBefore")
            clock.advance(by: .seconds(1))
            try expectEqual(try await store.claimAll().map(\.name), ["later"], "claimable at notBefore")
        },
        check("claim takes only the kinds asked for, up to the limit") { store, _ in
            _ = try await store.submit(
                Build.graph("g", Build.job("a1", kind: "a"), Build.job("b1", kind: "b"), Build.job("a2", kind: "a")),
                uniqueKey: nil)
            try expectEqual(try await store.claimAll(["c"]).count, 0, "claimed of an unknown kind")
            try expectEqual(try await store.claimAll(["a"], limit: 1).map(\.name), ["a1"], "first a")
            try expectEqual(try await store.claimAll(["a", "b"]).map(\.name), ["b1", "a2"], "the rest")
        },
        check("a claim of several kinds takes their jobs in one order: priority, then age") { store, clock in
            let later = clock.now.addingTimeInterval(10)
            _ = try await store.submit(
                Build.graph(
                    "g", Build.job("a-low", kind: "a", priority: 1), Build.job("b-high", kind: "b", priority: 3),
                    Build.job("a-mid", kind: "a", priority: 2), Build.job("c-top", kind: "c", priority: 5),
                    Build.job("b-mid", kind: "b", priority: 2), Build.job("a-later", kind: "a", notBefore: later),
                    Build.job("c-sooner", kind: "c", notBefore: clock.now.addingTimeInterval(5))),
                uniqueKey: nil)
            try expectEqual(
                try await store.claimAll(["b", "a"], limit: 3).map(\.name), ["b-high", "a-mid", "b-mid"], "first three")
            try expectEqual(try await store.nextDueDate(kinds: ["a"]), later, "next due of kind a (c's is sooner)")
            try expectEqual(try await store.claimAll(["a"], limit: 5).map(\.name), ["a-low"], "the rest of a")
            try expectEqual(try await store.claimAll(["c"], limit: 5).map(\.name), ["c-top"], "c")
        },
        check("a claim of 251 kinds takes their jobs in the same order, a few at a time") { store, _ in
            // Past 200 kinds the SQLite store looks at two kinds at once: a and b together, z alone.
            _ = try await store.submit(
                Build.graph(
                    "g", Build.job("a1", kind: "a", priority: 1), Build.job("b1", kind: "b", priority: 2),
                    Build.job("z1", kind: "z", priority: 3), Build.job("a2", kind: "a", priority: 3),
                    Build.job("b2", kind: "b", priority: 2), Build.job("z2", kind: "z", priority: 1)),
                uniqueKey: nil)
            let kinds = ["z", "b"] + (0..<248).map { "x\($0)" } + ["a"]
            try expectEqual(try await store.claimAll(kinds, limit: 3).map(\.name), ["z1", "a2", "b1"], "first three")
            try expectEqual(try await store.claimAll(kinds, limit: 2).map(\.name), ["b2", "a1"], "next two")
            try expectEqual(try await store.claimAll(kinds, limit: 2).map(\.name), ["z2"], "last")
        },
        check("claim takes higher priority first, then older first") { store, _ in
            _ = try await store.submit(
                Build.graph(
                    "g", Build.job("low", priority: 1), Build.job("high", priority: 3), Build.job("mid1", priority: 2),
                    Build.job("mid2", priority: 2)),
                uniqueKey: nil)
            try expectEqual(try await store.claimAll(limit: 1).map(\.name), ["high"], "first")
            try expectEqual(try await store.claimAll(limit: 2).map(\.name), ["mid1", "mid2"], "next two")
            try expectEqual(try await store.claimAll(limit: 5).map(\.name), ["low"], "last")
        },
        check("categories are counted across workers and runs, and freed by completion") { store, _ in
            let c = DurableCategory.named("c", limit: 2)
            _ = try await store.submit(
                Build.graph("g1", Build.job("a", categories: [c]), Build.job("b", categories: [c])), uniqueKey: nil)
            _ = try await store.submit(
                Build.graph("g2", Build.job("x", categories: [c, .named("solo")]), Build.job("free")), uniqueKey: nil)
            let w1 = try await store.claimAll(worker: "w1", limit: 1)
            try expectEqual(w1.map(\.name), ["a"], "w1")
            let w2 = try await store.claimAll(worker: "w2")
            try expectEqual(w2.map(\.name), ["b", "free"], "w2 (x waits: c is at its limit)")
            try expectEqual(try await store.claimAll(worker: "w3").count, 0, "w3")
            try expectEqual(try await store.succeed(w1[0]), .accepted(.succeeded), "finish a")
            try expectEqual(try await store.claimAll(worker: "w3").map(\.name), ["x"], "w3 after a finished")
        },
        check("an expired lease makes the job claimable again, attempt + 1, and frees its categories") { store, clock in
            _ = try await store.submit(
                Build.graph(
                    "g", Build.job("a", retry: .immediate(maxAttempts: 3), categories: [.named("c")]),
                    Build.job("b", categories: [.named("c")])),
                uniqueKey: nil)
            let first = try await store.claimAll(worker: "w1", lease: .seconds(5))
            try expectEqual(first.map(\.name), ["a"], "first claim")
            clock.advance(by: .seconds(5))
            try expectEqual(try await store.claimAll(worker: "w2").count, 0, "claimable when the lease just ends")
            clock.advance(by: .milliseconds(1))
            let second = try await store.claimAll(worker: "w2", limit: 1)
            try expectEqual(second.map(\.name), ["a"], "claim after expiry")
            try expectEqual(second[0].attempt, 2, "attempt after expiry")
            try expect(second[0].lease.token != first[0].lease.token, "a new lease token")
            let record = try await store.record(of: second[0].job)
            try expect(
                record.lastError?.contains("w1") == true,
                "last error names the lost worker: \(record.lastError ?? "nil")")
            try expectEqual(record.leaseOwner, "w2", "lease owner")
        },
        check("a renewed lease does not expire") { store, clock in
            _ = try await store.submit(Build.graph("g", Build.job("a")), uniqueKey: nil)
            let claimed = try await store.claimAll(worker: "w1", lease: .seconds(5))
            clock.advance(by: .seconds(4))
            let status = try await store.renew([claimed[0].lease], worker: "w1", lease: .seconds(5))
            try expectEqual(status, [.renewed(until: clock.now.addingTimeInterval(5))], "renewal")
            clock.advance(by: .seconds(4))
            try expectEqual(try await store.claimAll(worker: "w2").count, 0, "claimable before the renewed expiry")
            try expectEqual(try await store.succeed(claimed[0]), .accepted(.succeeded), "finish")
        },
        check("the last attempt lost with its lease fails the job") { store, clock in
            let run = try await store.submit(
                Build.graph("g", Build.job("a"), Build.job("b", after: [0])), uniqueKey: nil)
            _ = try await store.claimAll(lease: .seconds(1))
            clock.advance(by: .seconds(2))
            try expectEqual(try await store.claimAll().count, 0, "claimable")
            try expectEqual(try await store.states(run), [.failed, .cancelled], "states")
        },
    ]
}
