import BatonDurable
import Foundation

extension JobStoreConformance {
    /// Text the stores cannot keep as it is, repeated reports, and claims that must look past candidates
    /// they cannot admit: every store answers the same way.
    static let edgeChecks: [Check] = [
        check("a NUL character in a failure message or a cancellation reason is stored as U+FFFD") { store, _ in
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("a"), Build.job("b", retry: .immediate(maxAttempts: 3)), Build.job("c"),
                    Build.job("d", kind: "other")),
                uniqueKey: nil)
            let claimed = try await store.claimAll(["k"], limit: 3)
            try expectEqual(claimed.map(\.name), ["a", "b", "c"], "claimed")
            let results = try await store.finish([
                AttemptReport(lease: claimed[0].lease, outcome: .failed(message: "bad\0byte", retryable: false)),
                AttemptReport(lease: claimed[1].lease, outcome: .failed(message: "again\0", retryable: true)),
                AttemptReport(lease: claimed[2].lease, outcome: .cancelled(reason: "\0stop")),
            ])
            try expectEqual(results, [.accepted(.failed), .accepted(.ready), .accepted(.cancelled)], "the reports")
            try await store.cancel(run: run.run, reason: "run\0cancelled")
            let errors = try await store.snapshot(of: run.run).jobs.map(\.lastError)
            try expectEqual(
                errors, ["bad\u{FFFD}byte", "run\u{FFFD}cancelled", "\u{FFFD}stop", "run\u{FFFD}cancelled"],
                "stored messages")
        },
        check("a failure message or cancellation reason longer than 64 KiB is stored cut, saying how much was left out")
        {
            store, _ in
            let run = try await store.submit(Build.graph("g", Build.job("a"), Build.job("b")), uniqueKey: nil)
            let claimed = try await store.claimAll(["k"], limit: 2)
            let long = String(repeating: "é", count: 100_000)  // 200,000 bytes; é is 2 bytes
            let results = try await store.finish([
                AttemptReport(lease: claimed[0].lease, outcome: .failed(message: "x" + long, retryable: false)),
                AttemptReport(lease: claimed[1].lease, outcome: .cancelled(reason: long)),
            ])
            try expectEqual(results, [.accepted(.failed), .accepted(.cancelled)], "the reports")
            let errors = try await store.snapshot(of: run.run).jobs.map { $0.lastError ?? "" }
            // "x" + 32,767 é = 65,535 bytes: the next é would pass the limit, so it is not cut in two.
            func shape(_ text: String) -> String {
                let marker = text.firstIndex(of: "…") ?? text.endIndex
                return "\(text[..<marker].utf8.count) bytes kept\(text[marker...])"
            }
            try expectEqual(
                shape(errors[0]), "65535 bytes kept… (134466 more bytes not stored)", "the failure, cut at a character")
            try expect(errors[0].hasPrefix("xé"), "the failure's start is kept")
            try expectEqual(shape(errors[1]), "65536 bytes kept… (134464 more bytes not stored)", "the reason")
        },
        check("a NUL character in a graph, job, kind or category name or a unique key is refused up front") {
            store, _ in
            let refused: [(String, GraphSpec, String?)] = [
                ("graph name", Build.graph("g\0", Build.job("a")), nil),
                ("job name", Build.graph("g", Build.job("a\0")), nil),
                ("kind", Build.graph("g", Build.job("a", kind: "k\0")), nil),
                ("category", Build.graph("g", Build.job("a", categories: [.named("c\0")])), nil),
                ("unique key", Build.graph("g", Build.job("a")), "key\0"),
            ]
            for (what, graph, key) in refused {
                let error = try await expectDurableError(.invalidGraph) {
                    _ = try await store.submit(graph, uniqueKey: key)
                }
                try expect(
                    error.message.contains("NUL character"), "the \(what)'s error names the NUL: \(error.message)")
            }
            let error = try await expectDurableError(.invalidConfiguration) {
                _ = try await store.claim(worker: "w\0", kinds: ["k"], limit: 1, lease: .seconds(30))
            }
            try expect(error.message.contains("worker id"), "the worker id's error says what: \(error.message)")
            try expectEqual(try await store.claimAll().count, 0, "nothing was submitted")
        },
        check(
            "a name a store looks things up by (graph, kind, category, unique key, worker) over 1,024 bytes is refused alike"
        ) { store, _ in
            // PostgreSQL indexes them, and refused a unique key of about 2.7 KB with a server error
            // (SQLite kept it): every store refuses what one cannot keep.
            let long = String(repeating: "é", count: 513)  // 1,026 bytes
            let atLimit = String(repeating: "k", count: StoredText.nameLimit)
            let refused: [(String, GraphSpec, String?)] = [
                ("graph name", Build.graph(long, Build.job("a")), nil),
                ("kind", Build.graph("g", Build.job("a", kind: long)), nil),
                ("category", Build.graph("g", Build.job("a", categories: [.named(long)])), nil),
                ("unique key", Build.graph("g", Build.job("a")), long),
            ]
            for (what, graph, key) in refused {
                let error = try await expectDurableError(.invalidGraph) {
                    _ = try await store.submit(graph, uniqueKey: key)
                }
                try expect(error.message.contains("1026 bytes long"), "the \(what)'s error says why: \(error.message)")
                try expect(error.message.contains(what), "the error names the \(what): \(error.message)")
            }
            let error = try await expectDurableError(.invalidConfiguration) {
                _ = try await store.claim(worker: long, kinds: ["k"], limit: 1, lease: .seconds(30))
            }
            try expect(error.message.contains("worker id"), "the worker id's error says what: \(error.message)")
            try expectEqual(try await store.claimAll().count, 0, "nothing was submitted")
            let first = try await store.submit(
                Build.graph(atLimit, Build.job("a", kind: atLimit, categories: [.named(atLimit)])), uniqueKey: atLimit)
            let again = try await store.submit(
                Build.graph(atLimit, Build.job("a", kind: atLimit, categories: [.named(atLimit)])), uniqueKey: atLimit)
            try expect(!first.existing && again.existing, "names of 1,024 bytes are kept, and the key found again")
        },
        check(
            "edges that contradict each other are refused: input: with inputFrom:, after: with regardless: on one job, inputFrom: a job it also runs regardless of; an empty worker id too"
        ) { store, _ in
            var both = Build.job("b", inputFrom: 0)
            both.input = Data("\"b\"".utf8)
            let refused: [(GraphSpec, String)] = [
                (Build.graph("g", Build.job("a"), both), "both input: and inputFrom:"),
                (
                    Build.graph("g", Build.job("a"), Build.job("b", after: [0], regardless: [0])),
                    "both with after: and with regardless:"
                ),
                (
                    Build.graph("g", Build.job("a"), Build.job("b", regardless: [0], inputFrom: 0)),
                    "also runs regardless of it"
                ),
            ]
            for (graph, words) in refused {
                let error = try await expectDurableError(.invalidGraph) {
                    _ = try await store.submit(graph, uniqueKey: nil)
                }
                try expect(error.message.contains(words), "the error says what: \(error.message)")
                try expect(error.message.contains("'a'"), "the error names the other job: \(error.message)")
            }
            let error = try await expectDurableError(.invalidConfiguration) {
                _ = try await store.claim(worker: "", kinds: ["k"], limit: 1, lease: .seconds(30))
            }
            try expect(error.message.contains("worker id is empty"), "the error says what: \(error.message)")
            try expectEqual(try await store.claimAll().count, 0, "nothing was submitted")
        },
        check("a job naming one category twice with different limits is refused; twice with one limit is one") {
            store, _ in
            let error = try await expectDurableError(.invalidGraph) {
                _ = try await store.submit(
                    Build.graph("g", Build.job("a", categories: [.named("c", limit: 1), .named("c", limit: 2)])),
                    uniqueKey: nil)
            }
            try expect(error.message.contains("limits 1 and 2"), "the error names both limits: \(error.message)")
            let run = try await store.submit(
                Build.graph(
                    "g", Build.job("a", categories: [.named("c", limit: 1), .named("c", limit: 1)]),
                    Build.job("b", categories: [.named("c", limit: 1)])),
                uniqueKey: nil)
            try expectEqual(try await store.claimAll().map(\.name), ["a"], "one slot of c")
            try expectEqual(try await store.states(run), [.running, .ready], "b waits for c")
        },
        check("the same report twice in one call: the first is accepted, the second rejected") { store, _ in
            _ = try await store.submit(Build.graph("g", Build.job("a"), Build.job("b")), uniqueKey: nil)
            let claimed = try await store.claimAll()
            let success = AttemptReport(lease: claimed[0].lease, outcome: .succeeded(output: Data("1".utf8)))
            try expectEqual(
                try await store.finish([success, success]), [.accepted(.succeeded), .rejected], "two successes")
            let failure = AttemptReport(lease: claimed[1].lease, outcome: .failed(message: "x", retryable: false))
            try expectEqual(
                try await store.finish([failure, failure]), [.accepted(.failed), .rejected], "two failures")
            // Sent again in a later call, a report is recognised as recorded (SQLite rejects it: either way,
            // it is not recorded twice).
            let again = try await store.finish([success])
            try expect(again == [.accepted(.succeeded)] || again == [.rejected], "the success sent again: \(again)")
        },
        check("a claim looks past candidates whose shared category has no room left") { store, _ in
            _ = try await store.submit(
                Build.graph(
                    "g", Build.job("a", priority: 10, categories: [.named("x", limit: 1)]),
                    Build.job("b", priority: 10, categories: [.named("x", limit: 1)]), Build.job("c")),
                uniqueKey: nil)
            let claimed = try await store.claimAll(limit: 2)
            try expectEqual(claimed.map(\.name), ["a", "c"], "a (x's one slot) and c")
        },
    ]
}
