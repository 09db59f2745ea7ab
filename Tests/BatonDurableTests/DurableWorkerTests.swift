import Baton
import BatonTesting
import Foundation
import JobStoreConformance
import Logging
import Testing

@testable import BatonDurable

@Suite("DurableWorker")
struct DurableWorkerTests {
    @Test("the README example: a typed graph runs to the end and its outputs decode")
    func example() async throws {
        let store = try SQLiteJobStore.inMemory()
        let imported = Protected<[Int]>([])
        var graph = JobGraph(name: "refresh")
        let fetch = graph.add(FetchFeed.self, input: "https://example.com/day", retry: .exponential(maxAttempts: 5))
        let parse = graph.add(ParseFeed.self, inputFrom: fetch)
        let load = graph.add(ImportFeed.self, inputFrom: parse, categories: [.named("import", limit: 1)])
        let run = try await store.submit(graph, uniqueKey: "refresh-day")
        let worker = try makeWorker(store, [FetchFeed(), ParseFeed(), ImportFeed(imported: imported)])
        try await withDeadline(.seconds(30), "the run") {
            let explanation = try await worker.run(until: run)
            #expect(explanation.counts == [.succeeded: 3])
        }
        #expect(try await store.output(of: fetch, in: run) == FeedFile(url: "https://example.com/day", bytes: 2300))
        #expect(try await store.output(of: load, in: run) == 23)
        #expect(imported.current == Array(0..<23))
        let again = try await store.submit(graph, uniqueKey: "refresh-day")
        #expect(again.existing && again.id == run.id)
    }

    @Test("a failing job is retried with its attempt number until it succeeds")
    func retries() async throws {
        let store = try SQLiteJobStore.inMemory()
        let attempts = Protected<[Int]>([])
        var graph = JobGraph(name: "flaky")
        let flaky = graph.add(Flaky.self, input: 3, retry: .immediate(maxAttempts: 5))
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Flaky(attempts: attempts)])
        try await withDeadline(.seconds(30), "the run") { try await worker.run(until: run) }
        #expect(attempts.current == [1, 2, 3])
        #expect(try await store.output(of: flaky, in: run) == "ok on 3")
    }

    @Test("a job's logger carries the worker's metadata and the job's identity")
    func jobLogger() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "logging")
        let job = graph.add(LoggerMetadata.self, input: 1, name: "say-hello")
        let run = try await store.submit(graph)
        var logger = Logger(label: "test")
        logger[metadataKey: "given"] = "by the worker's configuration"
        let worker = try DurableWorker(
            store: store, jobs: [LoggerMetadata()], configuration: .init(id: "worker-1", logger: logger))
        try await withDeadline(.seconds(30), "the run") { try await worker.run(until: run) }
        let metadata = try await store.output(of: job, in: run)
        #expect(
            metadata == [
                "durable.job": "\(run.jobs[0].rawValue)", "durable.name": "say-hello", "durable.attempt": "1",
                "given": "by the worker's configuration",
            ])
    }

    @Test("an input that does not decode fails the job at once, with an error naming it")
    func undecodableInput() async throws {
        let store = try SQLiteJobStore.inMemory()
        let spec = GraphSpec(
            name: "old",
            jobs: [
                JobSpec(
                    name: "parse-yesterday", kind: ParseFeed.kind, input: Data(#"{"address":"x","bytes":1}"#.utf8),
                    retry: .immediate(maxAttempts: 5))
            ])
        let submitted = try await store.submit(spec, uniqueKey: nil)
        let run = DurableRun(submitted)
        let worker = try makeWorker(store, [ParseFeed()])
        try await withDeadline(.seconds(30), "the run") { try await worker.run(until: run) }
        let job = try await store.explain(run: run.id)["parse-yesterday"]
        #expect(job?.state == .failed)
        #expect(job?.attempts == 1)
        #expect(job?.lastError?.contains("'parse-yesterday'") == true)
        #expect(job?.lastError?.contains("'url'") == true)
    }

    @Test("a job that throws PermanentFailure fails at once, its dependent cancelled; other errors are retried")
    func permanentFailure() async throws {
        let store = try SQLiteJobStore.inMemory()
        let attempts = Protected<[String]>([])
        var graph = JobGraph(name: "permanent")
        let broken = graph.add(Refuses.self, input: "permanent", name: "broken", retry: .immediate(maxAttempts: 5))
        graph.add(Refuses.self, input: "never", name: "after", after: [broken])
        graph.add(Refuses.self, input: "retried", name: "transient", retry: .immediate(maxAttempts: 3))
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Refuses(attempts: attempts)])
        try await withDeadline(.seconds(30), "the run") { try await worker.run(until: run) }
        let explanation = try await store.explain(run: run.id)
        #expect(explanation["broken"]?.state == .failed)
        #expect(explanation["broken"]?.attempts == 1)
        #expect(explanation["broken"]?.lastError == "the record is gone; no retry brings it back")
        #expect(explanation["after"]?.state == .cancelled)
        #expect(explanation["transient"]?.state == .failed)
        #expect(explanation["transient"]?.attempts == 3)
        #expect(attempts.current.sorted() == ["permanent", "retried", "retried", "retried"])
    }

    @Test("explain names a kind that no worker has registered")
    func noWorker() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "g")
        graph.add(FetchFeed.self, input: "a")
        let run = try await store.submit(graph)
        try await store.register(WorkerRecord(id: "w", kinds: ["other"], expires: Date().addingTimeInterval(60)))
        let text = try await store.explain(run).description
        #expect(text.contains("no worker has registered kind 'test.fetch'"))
    }

    @Test("cancelling a run reaches a running job at the next lease renewal")
    func cancelReachesRunningJob() async throws {
        let store = try SQLiteJobStore.inMemory()
        let started = Gate()
        let endings = Protected<[String]>([])
        var graph = JobGraph(name: "g")
        graph.add(Blocker.self, input: "b")
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Blocker(started: started, endings: endings)], renew: .seconds(3600))
        let running = Task { try await worker.run(until: run) }
        try await withDeadline(.seconds(30), "the job starts") { await started.waitAsync() }
        try await store.cancel(run, reason: "user stopped it")
        await worker.renewLeases()  // what the renew loop does every renew interval
        try await withDeadline(.seconds(30), "the run ends") { _ = try await running.value }
        #expect(endings.current == ["b: cancelled"])
        let job = try await store.explain(run).jobs[0]
        #expect(job.state == .cancelled)
        #expect(job.lastError == "user stopped it")
    }

    @Test("a worker that lost its lease sees cancellation, and its late completion is not recorded")
    func lostLease() async throws {
        let clock = ManualDurableClock()
        let store = try SQLiteJobStore.inMemory(clock: clock.clock)
        let started = Gate()
        let ended = Gate()
        let endings = Protected<[String]>([])
        var graph = JobGraph(name: "g")
        graph.add(Blocker.self, input: "b", retry: .immediate(maxAttempts: 3))
        let run = try await store.submit(graph)
        let worker = try makeWorker(
            store, [Blocker(started: started, endings: endings, ended: ended)], lease: .seconds(5),
            renew: .seconds(3600))
        let running = Task { try await worker.run() }
        try await withDeadline(.seconds(30), "the job starts") { await started.waitAsync() }
        clock.advance(by: .seconds(6))
        let thief = try await store.claim(worker: "thief", kinds: [Blocker.kind], limit: 1, lease: .seconds(30))
        #expect(thief.map(\.attempt) == [2])
        try #require(thief.count == 1)
        await worker.renewLeases()
        try await withDeadline(.seconds(30), "the job sees cancellation") { await ended.waitAsync() }
        #expect(
            try await store.finish([
                AttemptReport(lease: thief[0].lease, outcome: .succeeded(output: Data("\"t\"".utf8)))
            ]) == [.accepted(.succeeded)])
        running.cancel()
        try await withDeadline(.seconds(30), "the worker stops") { try await running.value }
        let record = try await store.record(of: run.jobs[0])
        #expect(record.state == .succeeded)
        #expect(record.output == Data("\"t\"".utf8))
        #expect(endings.current == ["b: cancelled"])
    }

    @Test(
        "an attempt whose renewals get no answer is stopped a margin before its lease ends and reported failed: its job and category slot are free before the lease would have ended"
    )
    func unrenewedAttemptStopsBeforeItsLeaseEnds() async throws {
        let clock = ManualDurableClock()
        let base = try SQLiteJobStore.inMemory(clock: clock.clock)
        let store = HookedStore(base)
        let answer = Gate()
        store.renewGate.withLock { $0 = answer }  // the server is away: renewals hang
        let reported = Gate()
        let results = Protected<[FinishResult]>([])
        store.finished.withLock {
            $0 = { _, stored in
                results.withLock { $0 += stored }
                reported.open()
            }
        }
        let started = Gate()
        let ended = Gate()
        let endings = Protected<[String]>([])
        let db = DurableCategory.named("db", limit: 1)
        var graph = JobGraph(name: "g")
        graph.add(Blocker.self, input: "b", retry: .never, categories: [db])
        let run = try await store.submit(graph)
        let lost = LostLeases()
        let worker = try DurableWorker(
            store: store, jobs: [Blocker(started: started, endings: endings, ended: ended)],
            configuration: .init(
                id: "worker-1", maxConcurrentJobs: 8, leaseDuration: .seconds(8), renewInterval: .milliseconds(50),
                pollInterval: .milliseconds(200), instruments: [lost]))
        let running = Task { try await worker.run() }
        defer {
            answer.open()
            running.cancel()
        }
        try await withDeadline(.seconds(30), "the job starts and a renewal is under way") {
            await started.waitAsync()
            await store.renewEntered.waitAsync()
        }
        // 8 s lease (from just before the claim), 1 s margin: at 6.9 s the attempt keeps running; its
        // deadline is 7 s.
        clock.advance(by: .milliseconds(6900))
        let next = try #require(await worker.checkLeases())
        #expect(abs(next.timeIntervalSince(clock.clock.now()) - 0.1) < 0.001)
        #expect(endings.current.isEmpty)
        // Past the deadline (7.1 s), the worker's own watch stops it and reports it failed, though its
        // renewals still hang: the store takes the report, as the lease is still the attempt's.
        clock.advance(by: .milliseconds(200))
        try await withDeadline(.seconds(30), "the attempt is stopped by the lease watch and reported") {
            await ended.waitAsync()
            await reported.waitAsync()
        }
        #expect(endings.current == ["b: cancelled"])
        #expect(lost.count == 1)
        #expect(results.current == [.accepted(.failed)])
        let record = try await base.record(of: run.jobs[0])
        #expect(record.attempts == 1)
        #expect(record.lastError?.contains("no lease renewal reached the store") == true)
        // The category's slot is free at 7.1 s, not when the lease would have ended (8 s).
        var other = JobGraph(name: "other")
        other.add(Echo.self, input: "e", categories: [db])
        _ = try await base.submit(other)
        let taken = try await base.claim(worker: "other", kinds: [Echo.kind], limit: 1, lease: .seconds(30))
        #expect(taken.count == 1)
        answer.open()
        running.cancel()
        try await withDeadline(.seconds(30), "the worker stops") { try await running.value }
        #expect(lost.count == 1, "told once")
    }

    @Test("a claim that arrives with its lease about to end is given back unattempted, not run")
    func lateClaimIsGivenBack() async throws {
        let clock = ManualDurableClock()
        let base = try SQLiteJobStore.inMemory(clock: clock.clock)
        let store = HookedStore(base)
        let started = Gate()
        let endings = Protected<[String]>([])
        var graph = JobGraph(name: "g")
        graph.add(Blocker.self, input: "b", retry: .never)
        let run = try await store.submit(graph)
        let lost = LostLeases()
        // The first claim answers 7.5 s after it was asked (a call the store retried through a server
        // restart): the 8 s lease the worker asked for is nearly over by its own clock.
        store.nextClaim.withLock { $0 = (nil, { clock.advance(by: .milliseconds(7500)) }) }
        let worker = try DurableWorker(
            store: store, jobs: [Blocker(started: started, endings: endings)],
            configuration: .init(id: "worker-1", pollInterval: .milliseconds(200), instruments: [lost]))
        // The worker gives it back: ready again, with attempt 1 not counted, and its next claim runs it.
        let running = Task { try await worker.run() }
        try await withDeadline(.seconds(30), "the job starts on its next claim") { await started.waitAsync() }
        #expect(lost.claimedAttempts == [1], "the late claim counted no attempt, and was not run")
        #expect(try await store.record(of: run.jobs[0]).attempts == 1)
        running.cancel()
        try await withDeadline(.seconds(30), "the worker stops") { try await running.value }
    }

    @Test(
        "a release that fails beside a finish-and-claim that committed: the claimed job starts at once, and the release is sent again"
    )
    func failedReleaseKeepsTheClaimedJobs() async throws {
        let clock = ManualDurableClock()
        let base = try SQLiteJobStore.inMemory(clock: clock.clock)
        let store = HookedStore(base)
        let started = Gate()
        let endings = Protected<[String]>([])
        var graph = JobGraph(name: "g")
        graph.add(Blocker.self, input: "late", name: "late")
        graph.add(Blocker.self, input: "next", name: "next")
        let run = try await store.submit(graph)
        // "late" is claimed alone by a claim that answers with its lease nearly over: the worker gives it
        // back beside its next report. Later claims claim nothing, so "next" can only start from the
        // finish-and-claim that carries that release, and the release beside it fails.
        store.failReleasesUntilAfterAClaim.withLock { $0 = true }
        store.nextClaim.withLock {
            $0 = (
                1,
                {
                    clock.advance(by: .milliseconds(7500))
                    store.claimNothing.withLock { $0 = true }
                }
            )
        }
        let worker = try makeWorker(store, [Blocker(started: started, endings: endings)], lease: .seconds(8))
        let running = Task { try await worker.run() }
        defer { running.cancel() }
        try await withDeadline(
            .seconds(30), "the job claimed beside the failed release starts, and the release is sent again"
        ) {
            await started.waitAsync()
            await store.released.waitAsync()
        }
        #expect(try await base.record(of: run.jobs[1]).state == .running)
        let given = try await base.record(of: run.jobs[0])
        #expect(given.state == .ready)
        #expect(given.attempts == 0, "given back unattempted")
        #expect(store.failedAReleaseAfterAClaim, "the release beside the claim failed")
    }

    @Test("a second run() of a worker that runs is refused with an error that says so; the first runs on")
    func secondRunIsRefused() async throws {
        let setup = try await BlockerSetup()
        let (worker, started, endings) = (setup.worker, setup.started, setup.endings)
        let running = Task { try await worker.run() }
        try await withDeadline(.seconds(30), "the job starts") { await started.waitAsync() }
        let error = await #expect(throws: DurableError.self) { try await worker.run() }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("is already running") == true)
        worker.shutdown()
        try await withDeadline(.seconds(30), "the first run() returns") { try await running.value }
        #expect(endings.current == ["b: cancelled"])
        // Once it has returned, the worker may run again: not refused (the call returns without error).
        worker.shutdown()  // obeyed by the next run(), which returns at once
        try await withDeadline(.seconds(30), "the next run() returns") { try await worker.run() }
    }

    @Test(
        "a store closed under a running worker stops it: run(until:) throws an error saying so, rather than retrying for ever"
    )
    func closedStoreStopsTheWorker() async throws {
        let ends = AttemptEnds()
        let setup = try await BlockerSetup(instruments: [ends])
        let (store, run, worker, started, endings) = (
            setup.store, setup.run, setup.worker, setup.started, setup.endings
        )
        let running = Task { try await worker.run(until: run) }
        try await withDeadline(.seconds(30), "the job starts") { await started.waitAsync() }
        try store.close()
        let result = Protected<Result<RunExplanation, any Error>?>(nil)
        try await withDeadline(.seconds(30), "the worker stops") {
            let outcome = await running.result
            result.withLock { $0 = outcome }
        }
        guard case .failure(let error as DurableError) = result.current else {
            Issue.record("run(until:) returned \(String(describing: result.current)), not a DurableError")
            return
        }
        #expect(error.code == .storeFailure)
        #expect(error.message.contains("its store was closed while it ran"))
        #expect(error.message.contains("1 attempts' reports could not be sent"))
        #expect(endings.current == ["b: cancelled"])
        // Its instruments heard the attempt end, once (its span ended): nothing reached the store.
        #expect(ends.ends == ["lease lost"])
        // The next run() is refused by the closed store at once, not hung.
        await #expect(throws: (any Error).self) { try await worker.run() }
    }

    @Test("run(until:) of a run whose jobs need a kind no live worker has warns, naming the kind and the jobs")
    func stalledRunIsWarnedAbout() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "g")
        let first = graph.add(Echo.self, input: "a", name: "a")
        graph.add(NoWorkerHere.self, input: "b", name: "b", after: [first])
        let run = try await store.submit(graph)
        let warned = Gate()
        let lines = Protected<[String]>([])
        var logger = Logger(label: "test") { _ in
            GateLogHandler { line in
                lines.withLock { $0.append(line) }
                if line.contains("no live worker has registered") { warned.open() }
            }
        }
        logger.logLevel = .warning
        var configuration = DurableWorker.Configuration(id: "w", pollInterval: .milliseconds(50), logger: logger)
        configuration.stallWarningDelay = .milliseconds(200)
        let worker = try DurableWorker(store: store, jobs: [Echo()], configuration: configuration)
        let running = Task { try await worker.run(until: run) }
        try await withDeadline(.seconds(30), "the warning") { await warned.waitAsync() }
        let warning = try #require(lines.current.first { $0.contains("no live worker has registered") })
        #expect(warning.contains("'\(NoWorkerHere.kind)' ('b')"))
        worker.shutdown()
        try await withDeadline(.seconds(30), "the worker stops") {
            let explanation = try await running.value
            #expect(explanation.run.finished == nil, "the run did not finish")
        }
    }

    @Test("a worker with an empty id, or a job type with an empty kind, is refused when made")
    func emptyIdOrKindIsRefused() throws {
        let store = try SQLiteJobStore.inMemory()
        #expect(throws: DurableError.self) {
            try DurableWorker(store: store, jobs: [Echo()], configuration: .init(id: ""))
        }
        let error = #expect(throws: DurableError.self) {
            try DurableWorker(store: store, jobs: [NoKind()], configuration: .init(id: "w"))
        }
        #expect(error?.message.contains("empty kind") == true)
    }

    @Test("a graph names unnamed jobs of one kind in order, past names already taken")
    func defaultNames() throws {
        var graph = JobGraph(name: "g")
        graph.add(Echo.self, input: "x", name: "\(Echo.kind) #3")
        for index in 0..<2000 { graph.add(Echo.self, input: "\(index)") }
        let names = try graph.spec().jobs.map(\.name)
        #expect(names.count == 2001)
        #expect(Set(names).count == 2001)
        #expect(Array(names.prefix(4)) == ["\(Echo.kind) #3", Echo.kind, "\(Echo.kind) #2", "\(Echo.kind) #4"])
        #expect(names.last == "\(Echo.kind) #2001")
    }

    @Test("a handle of another graph is an error of the graph that uses it, not an edge to another job")
    func foreignHandle() throws {
        var first = JobGraph(name: "first")
        first.add(Echo.self, input: "a", name: "a")
        let foreign = first.add(Echo.self, input: "b", name: "b")
        var second = JobGraph(name: "second")
        second.add(Echo.self, input: "x", name: "x")
        second.add(Echo.self, input: "y", name: "y", after: [foreign])  // index 1 is 'y' here: wrong job
        let error = #expect(throws: DurableError.self) { try second.spec() }
        #expect(error?.message.contains("not of this graph") == true)
        var third = JobGraph(name: "third")
        third.add(Echo.self, inputFrom: foreign, name: "z")  // index 1 is not in this graph at all
        #expect(throws: DurableError.self) { try third.spec() }
    }

    @Test("a graceful shutdown gives running jobs back to the store, unattempted")
    func shutdownReleases() async throws {
        let setup = try await BlockerSetup()
        let (store, run, worker, started, endings) = (
            setup.store, setup.run, setup.worker, setup.started, setup.endings
        )
        let running = Task { try await worker.run() }
        try await withDeadline(.seconds(30), "the job starts") { await started.waitAsync() }
        worker.shutdown()
        try await withDeadline(.seconds(30), "the worker stops") { try await running.value }
        let record = try await store.record(of: run.jobs[0])
        #expect(record.state == .ready)
        #expect(record.attempts == 0)
        #expect(endings.current == ["b: cancelled"])
        #expect(try await store.snapshot(of: run.id).workers.isEmpty)
    }

    /// A body told to stop that throws an error of its own (a `URLError.cancelled`, "request aborted")
    /// used up an attempt — with `retry: .never`, it failed the job for good.
    @Test("a job that stops with its own error at a shutdown is given back unattempted; at a cancel, cancelled")
    func ownErrorOnStop() async throws {
        let setup = try await BlockerSetup(throwsOwnError: true)
        let running = Task { try await setup.worker.run() }
        try await withDeadline(.seconds(30), "the job starts") { await setup.started.waitAsync() }
        setup.worker.shutdown()
        try await withDeadline(.seconds(30), "the worker stops") { try await running.value }
        let record = try await setup.store.record(of: setup.run.jobs[0])
        #expect(record.state == .ready)
        #expect(record.attempts == 0)

        let cancelled = try await BlockerSetup(throwsOwnError: true)
        let again = Task { try await cancelled.worker.run(until: cancelled.run) }
        try await withDeadline(.seconds(30), "the job starts") { await cancelled.started.waitAsync() }
        try await cancelled.store.cancel(run: cancelled.run.id, reason: "not needed")
        try await withDeadline(.seconds(30), "the run ends") { _ = try await again.value }
        let job = try await cancelled.store.record(of: cancelled.run.jobs[0])
        #expect(job.state == .cancelled, "\(job)")
    }

    /// A job whose body ignores cancellation until `release` opens.
    struct Stubborn: DurableJob {
        static let kind = "test.stubborn"
        let started: Gate
        let release: Gate
        func run(_ label: String, context: DurableJobContext) async throws -> String {
            started.open()
            await release.waitAsync()  // not a cancellable wait
            return label
        }
    }

    /// The worker waited for a body that ignores cancellation for as long as it ran (here, for ever),
    /// renewing its lease all the while: its service group could not stop.
    @Test("a shutdown leaves behind a job that does not stop when cancelled, instead of waiting for it")
    func stuckBodyIsLeftBehind() async throws {
        let store = try SQLiteJobStore.inMemory()
        let (started, release) = (Gate(), Gate())
        defer { release.open() }
        var graph = JobGraph(name: "g")
        graph.add(Stubborn.self, input: "s")
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Stubborn(started: started, release: release)], grace: .zero)
        let running = Task { try await worker.run() }
        try await withDeadline(.seconds(30), "the job starts") { await started.waitAsync() }
        worker.shutdown()
        try await withDeadline(.seconds(30), "the worker stops, leaving the stuck job behind") {
            try await running.value
        }
        let record = try await store.record(of: run.jobs[0])
        #expect(record.state == .running, "its lease runs out; then it runs again")
        #expect(record.attempts == 1)
    }

    /// A job whose output is `count` zero bytes (stored as base64: a third larger), made at once.
    struct Repeat: DurableJob {
        static let kind = "test.repeat"
        func run(_ count: Int, context: DurableJobContext) async throws -> Data { Data(count: count) }
    }

    /// SQLite refused the report of an output past its limit, and the worker retried it at every poll,
    /// for ever: the lease ran out, the job ran again, and a shutdown waited on the report.
    @Test("an output or an input larger than a store keeps fails the job at once, saying so")
    func oversizedValues() async throws {
        let store = try SQLiteJobStore.inMemory()
        var graph = JobGraph(name: "g")
        graph.add(Repeat.self, input: StoredText.valueLimit, retry: .standard)
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Repeat()])
        try await withDeadline(.seconds(120), "the run of a 256 MB output") { try await worker.run(until: run) }
        let job = try await store.explain(run).jobs[0]
        #expect(job.state == .failed)
        #expect(job.attempts == 1)
        #expect(job.lastError?.contains("store large results elsewhere") == true, "\(job.lastError ?? "")")

        let large = GraphSpec(
            name: "large", jobs: [JobSpec(name: "a", kind: Repeat.kind, input: Data(count: StoredText.valueLimit + 1))])
        let error = await #expect(throws: DurableError.self) { _ = try await store.submit(large, uniqueKey: nil) }
        #expect(error?.message.contains("has an input of") == true, "\(error?.message ?? "")")
    }

    @Test("a time limit fails the attempt, and the retry policy decides what follows")
    func timeout() async throws {
        let store = try SQLiteJobStore.inMemory()
        let started = Gate()
        let endings = Protected<[String]>([])
        var graph = JobGraph(name: "g")
        graph.add(Blocker.self, input: "slow", retry: .never, timeout: .milliseconds(20))
        let run = try await store.submit(graph)
        let worker = try makeWorker(store, [Blocker(started: started, endings: endings)])
        try await withDeadline(.seconds(30), "the run") { try await worker.run(until: run) }
        let job = try await store.explain(run).jobs[0]
        #expect(job.state == .failed)
        #expect(job.lastError?.contains("timed out") == true)
    }

    @Test("a worker prunes runs that finished longer ago than its retention")
    func retention() async throws {
        let clock = ManualDurableClock()
        let store = try SQLiteJobStore.inMemory(clock: clock.clock)
        var graph = JobGraph(name: "g")
        graph.add(FetchFeed.self, input: "a")
        let old = try await store.submit(graph, uniqueKey: "old")
        let worker = try DurableWorker(
            store: store, jobs: [FetchFeed()], configuration: .init(id: "w", retention: .seconds(3600)))
        try await withDeadline(.seconds(30), "the run") { try await worker.run(until: old) }
        let recent = try await store.submit(graph, uniqueKey: "recent")
        clock.advance(by: .seconds(3601))
        // A running worker prunes at its next lease renewal (at most once a minute).
        let running = Task { try await worker.run() }
        defer { running.cancel() }
        #expect(await eventually(within: .seconds(30)) { worker.isTakingEvents }, "the worker did not start")
        try await withDeadline(.seconds(30), "a renewal with its prune") { await worker.renewLeases() }
        await #expect(throws: DurableError.self) { try await store.record(of: old.id) }
        _ = try await store.record(of: recent.id)  // kept
    }

    @Test("two workers never run more jobs of a category than its limit")
    func categoriesAcrossWorkers() async throws {
        let store = try SQLiteJobStore.inMemory()
        let running = Protected((now: 0, max: 0))
        var graph = JobGraph(name: "g")
        for index in 0..<60 {
            graph.add(Counted.self, input: index, name: "c\(index)", categories: [.named("db", limit: 2)])
        }
        let run = try await store.submit(graph)
        let first = try makeWorker(store, [Counted(running: running)], id: "w1")
        let second = try makeWorker(store, [Counted(running: running)], id: "w2")
        try await withDeadline(.seconds(60), "the run") {
            async let a = first.run(until: run)
            async let b = second.run(until: run)
            _ = try await (a, b)
        }
        #expect(try await store.explain(run).counts == [.succeeded: 60])
        #expect(running.current.max <= 2)
    }
}

/// Counts the attempts a worker told its instruments it lost the lease of, and the attempts it claimed.
final class LostLeases: JobInstrument, DurableWorkerInstrument {
    private let lost = Protected(0)
    private let claimed = Protected<[Int]>([])
    var count: Int { lost.withLock { $0 } }
    /// The attempt numbers of the attempts claimed, in order.
    var claimedAttempts: [Int] { claimed.withLock { $0 } }
    func attemptClaimed(_ attempt: ClaimedJob, job: Job, worker: DurableWorker) {
        claimed.withLock { $0.append(attempt.attempt) }
    }
    func attemptLostLease(_ attempt: ClaimedJob, job: Job, worker: DurableWorker) {
        lost.withLock { $0 += 1 }
    }
}

/// A job type with an empty kind, which no store could claim for.
struct NoKind: DurableJob {
    static let kind = ""
    func run(_ input: String, context: DurableJobContext) async throws -> String { input }
}

/// A kind no worker of the tests runs.
struct NoWorkerHere: DurableJob {
    static let kind = "test.nobody"
    func run(_ input: String, context: DurableJobContext) async throws -> String { input }
}

/// Passes each log line to `line`.
struct GateLogHandler: LogHandler {
    let line: @Sendable (String) -> Void
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    func log(event: LogEvent) { line(event.message.description) }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}
