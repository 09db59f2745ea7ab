import Testing

@testable import BatonDurable

/// What a retry changes in a run, computed without a store.
@Suite("Retry plans")
struct RetryPlanTests {
    typealias Job = RetryPlan.Job
    typealias Edge = RetryPlan.Edge

    @Test("a dependent that another failed job would cancel again stays cancelled, with its own dependents")
    func blockedDependentStays() throws {
        // 1 and 2 failed; 3 needs both; 4 needs 3; 5 needs only 1.
        let jobs: [Int64: Job] = [
            1: Job(name: "a", state: .failed, remaining: 0), 2: Job(name: "b", state: .failed, remaining: 0),
            3: Job(name: "c", state: .cancelled, remaining: 2), 4: Job(name: "d", state: .cancelled, remaining: 1),
            5: Job(name: "e", state: .cancelled, remaining: 1),
        ]
        let edges = [
            Edge(dependency: 1, job: 3, runRegardless: false), Edge(dependency: 2, job: 3, runRegardless: false),
            Edge(dependency: 3, job: 4, runRegardless: false), Edge(dependency: 1, job: 5, runRegardless: false),
        ]
        let plan = try RetryPlan.make(targets: [1], jobs: jobs, edges: edges)
        #expect(plan.restarted.map(\.id) == [1, 5])
        #expect(plan.restarted.map(\.state) == [.ready, .pending])
        #expect(plan.failed == 1 && plan.cancelled == 1)
        // Both together: everything runs again, 3 waiting for two and 4 for one.
        let both = try RetryPlan.make(targets: [1, 2], jobs: jobs, edges: edges)
        #expect(both.restarted.map(\.id) == [1, 2, 3, 4, 5])
        #expect(both.restarted.map(\.remaining) == [0, 0, 2, 1, 1])
        #expect(RetryPlan.roots(jobs: jobs, edges: edges) == [1, 2])
    }

    @Test("a dependency still running counts as unfinished; one that succeeded does not")
    func remainingCountsUnfinishedDependencies() throws {
        let jobs: [Int64: Job] = [
            1: Job(name: "a", state: .failed, remaining: 0), 2: Job(name: "b", state: .running, remaining: 0),
            3: Job(name: "c", state: .succeeded, remaining: 0), 4: Job(name: "d", state: .cancelled, remaining: 1),
        ]
        let edges = [
            Edge(dependency: 1, job: 4, runRegardless: false), Edge(dependency: 2, job: 4, runRegardless: false),
            Edge(dependency: 3, job: 4, runRegardless: false),
        ]
        let plan = try RetryPlan.make(targets: [1], jobs: jobs, edges: edges)
        #expect(plan.restarted.last == RetryPlan.Change(id: 4, state: .pending, remaining: 2))
    }

    @Test("a job whose own dependency failed is refused, naming the dependency to retry instead")
    func blockedTargetIsRefused() throws {
        let jobs: [Int64: Job] = [
            1: Job(name: "fetch", state: .failed, remaining: 0), 2: Job(name: "parse", state: .cancelled, remaining: 1),
        ]
        let error = #expect(throws: DurableError.self) {
            try RetryPlan.make(
                targets: [2], jobs: jobs, edges: [Edge(dependency: 1, job: 2, runRegardless: false)])
        }
        #expect(error?.code == .misuse)
        #expect(error?.message.contains("Retry 'fetch' instead") == true)
    }
}
