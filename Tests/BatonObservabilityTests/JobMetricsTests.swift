import Baton
import BatonObservability
import BatonTesting
import MetricsTestKit
import Testing

/// The metrics of small known graphs, counted exactly.
@Suite(.timeLimit(.minutes(1))) struct JobMetricsTests {
    struct Boom: Error {}

    @Test func countsEveryOutcomeStartAndRetryOfAKnownGraphExactly() async throws {
        let metrics = TestMetrics()
        let queue = JobQueue(name: "graph", instruments: [JobMetrics(factory: metrics)])
        let a = BlockJob(name: "a") {}
        let b = BlockJob(name: "b") {}
        let c = BlockJob(name: "c") { throw Boom() }
        b.addDependency(a)
        c.addDependency(a)
        let cancelled = BlockJob(name: "cancelled") {}
        cancelled.cancel()
        let retry = RetryJob(name: "retry", maxAttempts: 3) { attempt in
            BlockJob(name: "attempt \(attempt)") { if attempt == 1 { throw Boom() } }
        }
        queue.add([a, b, c, cancelled, retry])
        await queue.waitUntilAllJobsAreFinished()

        func total(_ label: String, _ queue: String, _ kind: String) -> Int64 {
            metrics.counterTotal(label: label, dimensions: [("queue", queue), ("kind", kind)])
        }
        typealias Name = JobMetrics.Name
        #expect(total(Name.started, "graph", "BlockJob") == 3)
        #expect(total(Name.succeeded, "graph", "BlockJob") == 2)
        #expect(total(Name.failed, "graph", "BlockJob") == 1)
        #expect(total(Name.cancelled, "graph", "BlockJob") == 1)
        #expect(total(Name.started, "graph", "RetryJob") == 1)
        #expect(total(Name.succeeded, "graph", "RetryJob") == 1)
        #expect(total(Name.retried, "graph", "RetryJob") == 1)
        // The attempts ran on the retry job's child queue.
        #expect(total(Name.started, "retry.children", "BlockJob") == 2)
        #expect(total(Name.failed, "retry.children", "BlockJob") == 1)
        #expect(total(Name.succeeded, "retry.children", "BlockJob") == 1)
        // Every job that ran was waited for and timed once; the cancelled one was neither.
        let dimensions = [("queue", "graph"), ("kind", "BlockJob")]
        #expect(try metrics.expectTimer(Name.waitDuration, dimensions).values.count == 3)
        #expect(try metrics.expectTimer(Name.runDuration, dimensions).values.count == 3)
        #expect(try metrics.expectTimer(Name.runDuration, dimensions).values.allSatisfy { $0 >= 0 })
        // Nothing is left ready or running.
        #expect(try metrics.expectMeter(Name.ready, [("queue", "graph")]).lastValue == 0)
        #expect(try metrics.expectMeter(Name.running, [("queue", "graph")]).lastValue == 0)
    }

    @Test func gaugesShowReadyJobsWaitingForTheOneSlot() async throws {
        let metrics = TestMetrics()
        // Dedicated threads: the holder's wait never holds a thread of Swift concurrency's pool.
        let queue = JobQueue(
            name: "serial", maxConcurrentJobs: 1, instruments: [JobMetrics(factory: metrics)],
            workerThreads: .dedicated)
        let gate = Gate()
        let entered = Gate()
        let holder = BlockJob(name: "holder") {
            entered.open()
            gate.wait()
        }
        let others = (1...3).map { BlockJob(name: "job \($0)") {} }
        queue.add([holder] + others)
        await entered.waitAsync()
        let ready = try metrics.expectMeter(JobMetrics.Name.ready, [("queue", "serial")])
        let running = try metrics.expectMeter(JobMetrics.Name.running, [("queue", "serial")])
        // All four became ready together; the holder runs; three wait for the slot.
        #expect(ready.values.max() == 4)
        #expect(ready.lastValue == 3)
        #expect(running.lastValue == 1)
        gate.open()
        await queue.waitUntilAllJobsAreFinished()
        #expect(ready.lastValue == 0)
        #expect(running.values.max() == 1)
        #expect(running.lastValue == 0)
        #expect(metrics.counterTotal(label: JobMetrics.Name.succeeded) == 4)
    }

    @Test func aKindFunctionAndAQueueNameFunctionChooseTheLabels() async {
        let metrics = TestMetrics()
        let instrument = JobMetrics(factory: metrics, kind: { $0.name.hasPrefix("fetch") ? "fetch" : "other" }) {
            $0.name.hasSuffix(".children") ? "groups" : $0.name
        }
        let queue = JobQueue(name: "labels", instruments: [instrument])
        let group = GroupJob(name: "g", children: [BlockJob(name: "fetch 1") {}, BlockJob(name: "fetch 2") {}])
        queue.add([group, BlockJob(name: "plain") {}])
        await queue.waitUntilAllJobsAreFinished()
        let started = JobMetrics.Name.started
        #expect(metrics.counterTotal(label: started, dimensions: [("queue", "groups"), ("kind", "fetch")]) == 2)
        #expect(metrics.counterTotal(label: started, dimensions: [("queue", "labels"), ("kind", "other")]) == 2)
    }

    @Test func withoutABackendTheInstrumentIsLeftOutOfQueues() {
        // No test bootstraps the global metrics system, so it is swift-metrics' no-op one.
        #expect(!JobMetrics().isEnabled)
        #expect(JobQueue(name: "plain", instruments: [JobMetrics()]).instruments.isEmpty)
        #expect(JobMetrics(factory: TestMetrics()).isEnabled)
    }

    @Test func theKindIsTheTypeNameWithoutGenericArguments() {
        #expect(JobMetrics.typeName(BlockJob {}) == "BlockJob")
        #expect(JobMetrics.typeName(ValueJob<Int> { _ in 1 }) == "ValueJob")
    }
    /// The review: each unnamed group's child queue (`GroupJob#123.children`) got metrics of its own, and
    /// the instrument kept every queue's handles for ever: a server making a group per request grew
    /// without bound. Now they share the label `GroupJob.children`, and released queues are forgotten.
    @Test func unnamedGroupsShareOneLabelAndReleasedQueuesAreForgotten() async throws {
        let metrics = TestMetrics()
        let instrument = JobMetrics(factory: metrics)
        let queue = JobQueue(name: "groups", instruments: [instrument])
        for _ in 0..<20 {
            queue.add((0..<50).map { _ in GroupJob(children: [BlockJob {}]) })
            try await withDeadline(.seconds(30), "50 groups finish") { await queue.waitUntilAllJobsAreFinished() }
        }
        let succeeded = JobMetrics.Name.succeeded
        #expect(
            metrics.counterTotal(label: succeeded, dimensions: [("queue", "GroupJob.children"), ("kind", "BlockJob")])
                == 1000)
        let labels = Set(metrics.counters.compactMap { counter in counter.dimensions.first { $0.0 == "queue" }?.1 })
        #expect(labels == ["groups", "GroupJob.children"], "\(labels.count) queue labels")
        let cached = instrument.cachedEntries
        #expect(cached.labels == 2, "\(cached)")
        #expect(cached.gauges == 2, "\(cached)")
        #expect(cached.shortcuts <= 512, "\(cached): the shortcuts of released queues are kept")
    }

    @Test func theStableQueueNameLeavesOutInstanceNumbersOnly() {
        #expect(JobMetrics.stableQueueName("GroupJob#123.children") == "GroupJob.children")
        #expect(JobMetrics.stableQueueName("RetryJob#7.children") == "RetryJob.children")
        #expect(
            JobMetrics.stableQueueName("GroupJob#1.children.GroupJob#22.children")
                == "GroupJob.children.GroupJob.children")
        #expect(JobMetrics.stableQueueName("retry.children") == "retry.children")
        #expect(JobMetrics.stableQueueName("issue #12a") == "issue #12a")
        #expect(JobMetrics.stableQueueName("a#") == "a#")
    }
}
