import BatonDurable
import Foundation

extension JobStoreConformance {
    static let inspectChecks: [Check] = [
        check("explain says what each job waits for") { store, clock in
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("a", categories: [.named("c")]), Build.job("b", categories: [.named("c")]),
                    Build.job("after-a", after: [0]), Build.job("later", notBefore: clock.now.addingTimeInterval(60)),
                    Build.job("orphan", kind: "nobody")),
                uniqueKey: nil)
            try await store.register(WorkerRecord(id: "w1", kinds: ["k"], expires: clock.now.addingTimeInterval(30)))
            let a = try await store.claim(worker: "w1", kinds: ["k"], limit: 1, lease: .seconds(10))[0]
            let explanation = try await store.explain(run: run.run)
            try expectEqual(explanation["a"]?.waitingFor, [.lease(worker: "w1", until: a.leaseExpires)], "a")
            try expectEqual(
                explanation["b"]?.waitingFor, [.category(name: "c", limit: 1, heldBy: ["a"])], "b")
            try expectEqual(explanation["after-a"]?.waitingFor, [.dependency(name: "a", state: .running)], "after-a")
            try expectEqual(
                explanation["later"]?.waitingFor, [.notBefore(clock.now.addingTimeInterval(60))], "later")
            try expectEqual(explanation["orphan"]?.waitingFor, [.noWorker(kind: "nobody")], "orphan")
            try expect(
                explanation.description.contains("no worker has registered kind 'nobody'"),
                "description: \(explanation.description)")
            let one = try await store.explain(job: run.jobs[1])
            try expectEqual(one.name, "b", "explain(job:)")
            // A lapsed registration no longer counts.
            clock.advance(by: .seconds(31))
            try expect(
                try await store.explain(run: run.run)["b"]?.waitingFor.contains(.noWorker(kind: "k")) == true,
                "b after the worker's registration lapsed")
            try await store.unregister(worker: "w1")
            try await expectDurableError(.unknownRun) { _ = try await store.explain(run: DurableRunID(987_654)) }
        },
        check("explain shows attempts and the last error") { store, _ in
            let run = try await store.submit(
                Build.graph("g", Build.job("a", retry: .constant(maxAttempts: 4, delay: .seconds(60)))), uniqueKey: nil)
            _ = try await store.fail(try await store.claimAll()[0], "timeout talking to the feed")
            let job = try await store.explain(run: run.run)["a"]!
            try expectEqual(job.attempts, 1, "attempts")
            try expectEqual(job.maxAttempts, 4, "max attempts")
            try expectEqual(job.lastError, "timeout talking to the feed", "last error")
            try expectEqual(job.state, .ready, "state")
        },
        check("prune deletes finished runs older than the date, and only those") { store, clock in
            let done = try await store.submit(Build.graph("done", Build.job("a", kind: "p")), uniqueKey: "done")
            _ = try await store.succeed(try await store.claimAll(["p"])[0])
            let open = try await store.submit(Build.graph("open", Build.job("b", kind: "q")), uniqueKey: "open")
            clock.advance(by: .seconds(10))
            try expectEqual(try await store.prune(finishedBefore: clock.now.addingTimeInterval(-20)), 0, "too recent")
            try expectEqual(try await store.prune(finishedBefore: clock.now), 1, "pruned")
            try await expectDurableError(.unknownRun) { _ = try await store.snapshot(of: done.run) }
            _ = try await store.snapshot(of: open.run)
            let again = try await store.submit(Build.graph("done", Build.job("a", kind: "p")), uniqueKey: "done")
            try expectEqual(again.existing, false, "the pruned run's key is free")
        },
        check("prune before a date that is no point in time (NaN, infinite) is refused and deletes nothing") {
            store, clock in
            let done = try await store.submit(Build.graph("done", Build.job("a", kind: "p")), uniqueKey: "done")
            _ = try await store.succeed(try await store.claimAll(["p"])[0])
            clock.advance(by: .seconds(10))
            for seconds in [Double.nan, .infinity, -.infinity] {
                try await expectDurableError(.misuse) {
                    _ = try await store.prune(finishedBefore: Date(timeIntervalSince1970: seconds))
                }
            }
            _ = try await store.snapshot(of: done.run)
        },
        check("a submission wakes the store's listeners") { store, _ in
            let stream = store.wakeups()
            _ = try await store.submit(Build.graph("g", Build.job("a")), uniqueKey: nil)
            let woke = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    for await _ in stream { return true }
                    return false
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(10))  // a deadline, not a wait for the result
                    return false
                }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
            try expect(woke, "no wake-up within 10 s of a submission")
        },
    ]
}

extension JobStoreConformance {
    static let recordChecks: [Check] = [
        check("record(of: run) tells when a run has finished") { store, clock in
            let run = try await store.submit(Build.graph("g", Build.job("a")), uniqueKey: "k")
            let before = try await store.record(of: run.run)
            try expectEqual(before.name, "g", "name")
            try expectEqual(before.uniqueKey, "k", "unique key")
            try expect(before.finished == nil, "finished before the job ran")
            clock.advance(by: .seconds(3))
            _ = try await store.succeed(try await store.claimAll()[0])
            try expectEqual(try await store.record(of: run.run).finished, clock.now, "finish date")
            try await expectDurableError(.unknownRun) { _ = try await store.record(of: DurableRunID(987_654)) }
        },
        check("a run keeps the trace context it was submitted with") { store, _ in
            let carrier = ["traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k": "v"]
            var graph = Build.graph("traced", Build.job("a"))
            graph.traceCarrier = carrier
            let traced = try await store.submit(graph, uniqueKey: nil)
            let plain = try await store.submit(Build.graph("plain", Build.job("a")), uniqueKey: nil)
            try expectEqual(try await store.traceCarrier(of: traced.run), carrier, "carrier of the traced run")
            try expectEqual(try await store.traceCarrier(of: plain.run), [:], "carrier of a run submitted untraced")
            // A unique key that matches keeps the first run's context.
            graph.traceCarrier = ["k": "other"]
            let keyed = try await store.submit(graph, uniqueKey: "u")
            graph.traceCarrier = ["k": "ignored"]
            let again = try await store.submit(graph, uniqueKey: "u")
            try expectEqual(again.run, keyed.run, "run of the repeated unique key")
            try expectEqual(try await store.traceCarrier(of: keyed.run), ["k": "other"], "carrier of the keyed run")
        },
    ]
}
