import Baton
import BatonTesting
import Foundation
import GRDB
import JobStoreConformance
import Testing

@testable import BatonDurable

/// Jobs that add jobs to their run, through a worker: the typed API, `afterAll:`, explain, and misuse.
@Suite("Runs that grow")
struct GrowingRunTests {
    /// Lists pages 1…`last`: each page adds the next page and a tally of itself.
    struct Page: DurableJob {
        static let kind = "test.grow.page"
        struct Input: Codable, Sendable {
            var page: Int
            var last: Int
        }
        func run(_ input: Input, context: DurableJobContext) async throws -> Int {
            var more = JobGraph(name: "more")
            let tally = more.add(Tally.self, input: input.page, name: "tally")  // the run's names get suffixes
            if input.page < input.last {
                more.add(Page.self, input: Input(page: input.page + 1, last: input.last), name: "page", after: [tally])
            }
            try context.add(more)
            return input.page
        }
    }

    struct Tally: DurableJob {
        static let kind = "test.grow.tally"
        static let seen = Protected<[Int]>([])
        func run(_ page: Int, context: DurableJobContext) async throws -> Int {
            Self.seen.withLock { $0.append(page) }
            return page
        }
    }

    /// Runs after everything: what the tallies saw by then.
    struct Summary: DurableJob {
        static let kind = "test.grow.summary"
        func run(_ input: Int, context: DurableJobContext) async throws -> [Int] {
            Tally.seen.withLock { $0.sorted() }
        }
    }

    /// Does nothing (a job of its own kind, so that tests running at once do not share ``Tally/seen``).
    struct Mark: DurableJob {
        static let kind = "test.grow.mark"
        func run(_ input: Int, context: DurableJobContext) async throws -> Int { input }
    }

    /// Adds two graphs in two calls, each with its own `after:` (the jobs set in ``targets``).
    struct Split: DurableJob {
        static let kind = "test.grow.split"
        static let targets = Protected<[DurableJobID]>([])
        func run(_ input: Int, context: DurableJobContext) async throws -> Int {
            let targets = Self.targets.withLock { $0 }
            var first = JobGraph(name: "first")
            first.add(Mark.self, input: 1, name: "a")
            try context.add(first, after: [targets[0]])
            var second = JobGraph(name: "second")
            let b = second.add(Mark.self, input: 2, name: "b")
            second.add(Mark.self, input: 3, name: "c", after: [b])
            try context.add(second, after: [targets[1]])
            return 0
        }
    }

    /// Adds after completing: refused.
    struct Late: DurableJob {
        static let kind = "test.grow.late"
        static let refusal = Protected<DurableError?>(nil)
        func run(_ input: Int, context: DurableJobContext) async throws -> Int {
            _ = try await context.complete(returning: 1) { _ in }
            do {
                var more = JobGraph(name: "late")
                more.add(Tally.self, input: 99)
                try context.add(more)
            } catch let error as DurableError {
                Self.refusal.withLock { $0 = error }
            }
            return 1
        }
    }

    /// Adds a job that waits for its own dependent (set in ``dependent``), then completes in its own
    /// transaction: the store refuses the cycle there.
    struct Cyclic: DurableJob {
        static let kind = "test.grow.cyclic"
        static let dependent = Protected<DurableJobID?>(nil)
        static let attempts = Protected(0)
        func run(_ input: Int, context: DurableJobContext) async throws -> Int {
            Self.attempts.withLock { $0 += 1 }
            var more = JobGraph(name: "more")
            more.add(Mark.self, input: 1, name: "x")
            try context.add(more, after: [try #require(Self.dependent.current)])
            return try await context.complete(returning: 1) { _ in }
        }
    }

    @Test("pages add pages and tallies; a summary with afterAll runs after all of them; explain nests them")
    func pagesAddPages() async throws {
        Tally.seen.withLock { $0 = [] }
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "pages")
        let first = graph.add(Page.self, input: Page.Input(page: 1, last: 5), name: "page")
        let summary = graph.add(Summary.self, input: 0, name: "summary", afterAll: [first])
        let run = try await store.submit(graph)
        let worker = try DurableWorker(
            store: store, jobs: [Page(), Tally(), Summary()],
            configuration: .init(id: "grow", pollInterval: .milliseconds(50)))
        try await withDeadline(.seconds(30), "the growing run") {
            let counts = try await worker.run(until: run).counts
            #expect(counts == [.succeeded: 11])
        }
        #expect(try await store.output(of: summary, in: run) == [1, 2, 3, 4, 5])
        let explanation = try await store.explain(run)
        #expect(explanation.jobs.map(\.name).contains("page #5"))
        #expect(explanation["tally #3"]?.addedBy == explanation["page #3"]?.id)
        let text = explanation.description
        #expect(text.contains("\n  page [test.grow.page]"), "\(text)")
        #expect(text.contains("\n    + tally [test.grow.tally]"), "\(text)")
        #expect(text.contains("\n    + page #2 [test.grow.page]"), "\(text)")
        #expect(text.contains("\n      + tally #2 [test.grow.tally]"), "\(text)")
    }

    @Test("each add call's after: applies to that call's jobs only")
    func afterIsPerCall() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "split")
        let x = graph.add(Mark.self, input: 100, name: "x")
        let y = graph.add(Mark.self, input: 200, name: "y")
        graph.add(Split.self, input: 0, name: "split", after: [x, y])
        let run = try await store.submit(graph)
        Split.targets.withLock { $0 = [run[x], run[y]] }
        let worker = try DurableWorker(
            store: store, jobs: [Split(), Mark()], configuration: .init(id: "split", pollInterval: .milliseconds(50)))
        try await withDeadline(.seconds(30), "the splitting run") {
            let counts = try await worker.run(until: run).counts
            #expect(counts == [.succeeded: 6])
        }
        let jobs = try await store.snapshot(of: run.id).jobs
        func waits(_ name: String) -> Set<DurableJobID> {
            Set(jobs.first { $0.name == name }?.dependencies.map(\.job) ?? [])
        }
        let b = try #require(jobs.first { $0.name == "b" }?.id)
        #expect(waits("a") == [run[x]], "a waits for x only (its call's after:)")
        #expect(waits("b") == [run[y]], "b waits for y only (its call's after:)")
        #expect(waits("c") == [b], "c waits for b, within its call, and for no existing job")
    }

    @Test("jobs refused as a cycle in the job's own completion transaction fail it at once, as finish does")
    func aCycleRefusedInTheCompletionTransactionIsNotRetried() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "cyclic")
        let adder = graph.add(Cyclic.self, input: 0, retry: .constant(maxAttempts: 3, delay: .zero))
        let dependent = graph.add(Mark.self, input: 0, after: [adder])
        let run = try await store.submit(graph)
        Cyclic.dependent.withLock { $0 = run[dependent] }
        let worker = try DurableWorker(
            store: store, jobs: [Cyclic(), Mark()], configuration: .init(id: "cyclic", pollInterval: .milliseconds(50)))
        try await withDeadline(.seconds(30), "the cyclic run") {
            let counts = try await worker.run(until: run).counts
            #expect(counts == [.failed: 1, .cancelled: 1])
        }
        #expect(Cyclic.attempts.current == 1, "a graph that cannot be is not tried again")
        let record = try await store.snapshot(of: run.id).jobs[0]
        #expect(record.lastError?.contains("cycle") == true, "\(record.lastError ?? "no error")")
        #expect(
            record.lastError?.hasPrefix("its added jobs were refused: ") == true,
            "as finish words it: \(record.lastError ?? "no error")")
        #expect(try await store.snapshot(of: run.id).jobs.count == 2, "nothing added")
    }

    /// Throws a graph error of its own (as from submitting a malformed graph elsewhere) on its first attempt.
    struct OwnGraphError: DurableJob {
        static let kind = "test.grow.own-graph-error"
        static let attempts = Protected(0)
        func run(_ input: Int, context: DurableJobContext) async throws -> Int {
            let attempt = Self.attempts.withLock { value -> Int in
                value += 1
                return value
            }
            if attempt == 1 { throw DurableError(code: .invalidGraph, message: "a graph of the job's own") }
            return attempt
        }
    }

    @Test("a job's own graph error is retried by its policy: only a store's refusal of added jobs is final")
    func aJobsOwnGraphErrorIsRetried() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "own")
        graph.add(OwnGraphError.self, input: 0, retry: .constant(maxAttempts: 2, delay: .zero))
        let run = try await store.submit(graph)
        let worker = try DurableWorker(
            store: store, jobs: [OwnGraphError()], configuration: .init(id: "own", pollInterval: .milliseconds(50)))
        try await withDeadline(.seconds(30), "the run") {
            let counts = try await worker.run(until: run).counts
            #expect(counts == [.succeeded: 1])
        }
        #expect(OwnGraphError.attempts.current == 2)
    }

    @Test(
        "an addition waiting for a running job fails that attempt as a conflict and the next adds, through a worker",
        arguments: [false, true])
    func anAdditionWaitingForARunningJobIsRetriedThroughAWorker(_ ownTransaction: Bool) async throws {
        let inTransaction: @Sendable (DurableJobContext, Int) async throws -> Int = { context, value in
            let writes: @Sendable (Database) throws -> Void = { _ in }
            return try await context.complete(returning: value, writes: writes)
        }
        try await withDeadline(.seconds(30), "the run whose adder conflicts with a running job") {
            try await JobStoreConformance.additionWaitingForARunningJob(
                on: try SQLiteJobStore.inMemory(), completingWith: ownTransaction ? inTransaction : nil)
        }
    }

    /// The names an addition must not reuse are found through the run's name indexes: reading every
    /// name of the run at each addition made a crawler's run quadratic (an addition to a run of 100,000
    /// jobs took 57 ms of a debug build, 1.1 ms through the indexes). A store made before the indexes
    /// gets them when it is next opened for writing.
    @Test("an addition finds the names it must not reuse through indexes, made when a store is opened")
    func addedNamesAreFoundThroughIndexes() async throws {
        let folder = try TemporaryDirectory()
        let path = folder.path("jobs.sqlite")
        let names = ["baton_jobs_run_name", "baton_jobs_run_wide_name"]
        do {
            let store = try SQLiteJobStore(path: path)
            // As an older version left it.
            try await store.writer.write { db in
                for name in names { try db.execute(sql: "DROP INDEX \(name)") }
            }
            try store.close()
        }
        let store = try SQLiteJobStore(path: path)
        defer { try? store.close() }
        try await store.writer.read { db in
            for name in names {
                #expect(
                    try Bool.fetchOne(
                        db, sql: "SELECT count(*) > 0 FROM sqlite_master WHERE name = ?", arguments: [name]) == true,
                    "\(name)")
            }
            // What `takenNames` asks, as the planner answers it: searches of an index, no scan of the run.
            for sql in [
                "SELECT name FROM baton_jobs WHERE run = 1 AND name = 'page'",
                "SELECT name FROM baton_jobs WHERE run = 1 AND name >= 'page #' AND name < 'page $'",
                """
                SELECT name FROM baton_jobs INDEXED BY baton_jobs_run_wide_name
                WHERE run = 1 AND length(name) <> length(CAST(name AS BLOB))
                """,
            ] {
                let plan = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String? ?? "" }
                #expect(plan.count == 1 && plan[0].hasPrefix("SEARCH baton_jobs USING"), "\(sql): \(plan)")
                #expect(plan.first?.contains("INDEX baton_jobs_run_") == true, "\(sql): \(plan)")
            }
        }
        // And names are still made unique by them: taken, numbered, and beyond ASCII (the Kelvin sign).
        var graph = JobGraph(name: "names")
        graph.add(Page.self, input: Page.Input(page: 1, last: 1), name: "page")
        graph.add(Page.self, input: Page.Input(page: 1, last: 1), name: "page #2")
        graph.add(Page.self, input: Page.Input(page: 1, last: 1), name: "\u{212A}")
        for index in 0..<40 { graph.add(Page.self, input: Page.Input(page: 1, last: 1), name: "other \(index)") }
        let run = try await store.submit(graph)
        let taken = try await store.writer.read { db in
            try SQLiteJobStore.takenNames(db, run: run.id.rawValue, among: ["page", "K", "new"])
        }
        #expect(taken == ["page", "page #2", "\u{212A}"])
    }

    @Test("an instrument told of a success that the store did not record as one is told why")
    func anInstrumentIsToldWhyASuccessWasNotRecorded() {
        let report = AttemptReport(
            lease: Lease(job: DurableJobID(1), token: 1), outcome: .succeeded(output: Data("1".utf8)),
            additions: RunAddition(jobs: [JobSpec(name: "x", kind: "k", input: Data("1".utf8))]))
        guard case .failed(let failed) = DurableAttemptEnd(report, .accepted(.failed)),
            case .retryScheduled(let retried) = DurableAttemptEnd(report, .accepted(.ready)),
            case .cancelled(let cancelled) = DurableAttemptEnd(report, .accepted(.cancelled))
        else {
            Issue.record("a refused success is not told as failed, retrying and cancelled")
            return
        }
        #expect(failed.contains("refused the jobs it added"))
        #expect(retried.contains("refused the jobs it added"))
        #expect(cancelled.contains("asked to cancel"))
        #expect(DurableAttemptEnd(report, .accepted(.succeeded)) == .succeeded)
    }

    @Test("adding after the completion, or on a context made by hand, is refused with a clear message")
    func misuse() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "late")
        let late = graph.add(Late.self, input: 1)
        let run = try await store.submit(graph)
        let worker = try DurableWorker(
            store: store, jobs: [Late()], configuration: .init(id: "late", pollInterval: .milliseconds(50)))
        try await withDeadline(.seconds(30), "the late run") { _ = try await worker.run(until: run) }
        #expect(try await store.snapshot(of: run.id).jobs.count == 1)
        #expect(Late.refusal.current?.code == .misuse)
        #expect(Late.refusal.current?.message.contains("after its completion") == true)
        _ = late
        let context = DurableJobContext(
            job: DurableJobID(1), run: DurableRunID(1), name: "by hand", attempt: 1, maxAttempts: 1, worker: "w",
            logger: .init(label: "test"))
        var more = JobGraph(name: "more")
        more.add(Tally.self, input: 1)
        let error = #expect(throws: DurableError.self) { try context.add(more) }
        #expect(error?.code == .misuse)
        #expect(error?.message.contains("made by hand") == true)
        var cyclic = JobGraph(name: "bad")
        cyclic.add(Tally.self, input: 1, name: "same")
        cyclic.add(Tally.self, input: 2, name: "")
        #expect(throws: DurableError.self) { try context.add(cyclic) }
    }
}
