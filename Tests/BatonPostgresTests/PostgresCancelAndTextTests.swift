import Baton
import BatonDurable
import BatonTesting
import Foundation
import PostgresNIO
import Testing

@testable import BatonPostgres

/// A cancellation racing a claim, and messages PostgreSQL's text cannot hold as they are.
@Suite("PostgreSQL cancellation races and stored text", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresCancelAndTextTests {
    struct Fails: DurableJob {
        static let kind = "test.pg-fails-with-nul"
        struct Failure: Error, CustomStringConvertible {
            var description: String { "bad\0byte" }
        }
        func run(_ input: String, context: DurableJobContext) async throws -> String { throw Failure() }
    }

    @Test("a job failing with a NUL character in its error is recorded as failed, and the worker goes on")
    func failureMessageWithNul() async throws {
        try await TestPostgres.withStore("nulmessage") { store, _ in
            var graph = JobGraph(name: "g")
            let failing = graph.add(Fails.self, input: "x", retry: .never)
            let echo = graph.add(PostgresRoundTrip.Echo.self, input: "fine")
            let run = try await store.submit(graph)
            let worker = try DurableWorker(
                store: store, jobs: [Fails(), PostgresRoundTrip.Echo()],
                configuration: .init(id: "nul", pollInterval: .milliseconds(50)))
            try await withDeadline(.seconds(30), "the run with a NUL in a failure message") {
                let counts = try await worker.run(until: run).counts
                #expect(counts == [.succeeded: 1, .failed: 1])
            }
            #expect(try await store.record(of: run[failing]).lastError == "bad\u{FFFD}byte")
            #expect(try await store.output(of: echo, in: run) == "fine")
        }
    }

    @Test(
        "a failure cascading to 2,000 dependents takes longer than the operation timeout and still completes in one attempt"
    )
    func longCascadeIsNotAbandoned() async throws {
        try await withDeadline(.seconds(300), "a cascade through 2,000 dependents") {
            try await TestPostgres.withStore("cascade") { store, configuration in
                var jobs = [JobSpec(name: "root", kind: "k", input: Data("1".utf8), retry: .never)]
                for index in 0..<2_000 {
                    jobs.append(
                        JobSpec(
                            name: "d\(index)", kind: "k", input: Data("1".utf8),
                            dependencies: [JobSpec.Dependency(index: 0)]))
                }
                let run = try await store.submit(GraphSpec(name: "fan-out", jobs: jobs), uniqueKey: nil)
                let root = try await store.claim(worker: "w", kinds: ["k"], limit: 1, lease: .seconds(600))
                #expect(root.map(\.name) == ["root"])
                // The cascade takes seconds (four statements a dependent); every statement is answered at
                // once. No time to retry in: an abandoned attempt fails the call.
                var short = configuration
                short.operationTimeout = .seconds(1)
                short.reconnectDeadline = .seconds(1)
                // Opening gives up as soon, too: on a server that other tests keep busy (too many clients
                // for a moment) it is tried again, up to 60 times.
                var opened: PostgresJobStore?
                for attempt in 1...60 where opened == nil {
                    do {
                        opened = try await PostgresJobStore(configuration: short, logger: TestPostgres.logger)
                    } catch let error as DurableError where error.code == .storeFailure && attempt < 60 {}
                }
                let impatient = try #require(opened)
                defer { impatient.close() }
                let results = try await impatient.finish(
                    root.map { AttemptReport(lease: $0.lease, outcome: .failed(message: "no", retryable: false)) })
                #expect(results == [.accepted(.failed)])
                let states = try await store.snapshot(of: run.run).jobs.map(\.state)
                #expect(states.first == .failed)
                #expect(states.dropFirst().allSatisfy { $0 == .cancelled })
            }
        }
    }
}
