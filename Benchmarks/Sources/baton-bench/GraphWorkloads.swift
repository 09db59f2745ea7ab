import Baton
import Dispatch
import Foundation
import Synchronization

/// `fan-in`: one job that depends on n independent jobs. `dag`: a random DAG of n jobs, each depending
/// on ~4 earlier jobs (fixed seed). Bodies stamp finish tickets, checked after the run.
enum GraphWorkloads {
    static var fanIn: Workload {
        Workload(
            name: "fan-in",
            summary: "1 job depending on n independent jobs (n + 1 jobs), built then added at once, default width",
            runners: [.baton: batonFanIn, .foundation: foundationFanIn, .gcd: gcdFanIn, .taskgroup: taskGroupFanIn],
            skipReason: { peer, n, limits in
                guard peer == .foundation, n > limits.foundationFanIn else { return nil }
                return "Foundation fan-in > \(limits.foundationFanIn): superlinear (~2.7 s at 100k), minutes at 1M"
            }
        )
    }

    static var dag: Workload {
        Workload(
            name: "dag",
            summary:
                "random DAG, job i depends on min(i, 4) distinct jobs among 0..<i (SplitMix64, fixed seed), default width",
            runners: [.baton: batonDAG, .foundation: foundationDAG, .gcd: gcdDAG],
            skipReason: { peer, n, limits in
                guard peer == .foundation, n > limits.foundationGraph else { return nil }
                return "Foundation DAGs > \(limits.foundationGraph): quadratic (~23 s at 10k)"
            }
        )
    }

    // MARK: Fan-in

    /// Job `n` (the sink) must run after jobs `0..<n`.
    static func checkFanIn(_ tickets: Tickets) -> String? {
        let sink = tickets.count - 1
        return tickets.check { $0 == sink ? Array(0..<sink) : [] }
    }

    static func batonFanIn(_ n: Int) -> Sample {
        let tickets = Tickets(count: n + 1)
        var sample = measure {
            let queue = JobQueue(name: "fan-in")
            var jobs: [Job] = (0..<n).map { index in BlockJob { tickets.stamp(index) } }
            let sink = BlockJob { tickets.stamp(n) }
            sink.addDependencies(jobs)
            jobs.append(sink)
            queue.add(jobs)
            queue.waitUntilAllJobsAreFinished()
            return (queue, jobs)
        }
        sample.problem = checkFanIn(tickets)
        return sample
    }

    static func foundationFanIn(_ n: Int) -> Sample {
        let tickets = Tickets(count: n + 1)
        var sample = measure {
            let queue = OperationQueue()
            var operations: [Operation] = (0..<n).map { index in BlockOperation { tickets.stamp(index) } }
            let sink = BlockOperation { tickets.stamp(n) }
            for operation in operations { sink.addDependency(operation) }
            operations.append(sink)
            queue.addOperations(operations, waitUntilFinished: false)
            queue.waitUntilAllOperationsAreFinished()
            return (queue, operations)
        }
        sample.problem = checkFanIn(tickets)
        return sample
    }

    /// Raw GCD: the n blocks in one group; the sink runs from the group's `notify`.
    static func gcdFanIn(_ n: Int) -> Sample {
        let tickets = Tickets(count: n + 1)
        var sample = measure {
            let group = DispatchGroup()
            let queue = DispatchQueue.global()
            for index in 0..<n { queue.async(group: group) { tickets.stamp(index) } }
            let done = DispatchSemaphore(value: 0)
            group.notify(queue: queue) {
                tickets.stamp(n)
                done.signal()
            }
            done.wait()
            return group
        }
        sample.problem = checkFanIn(tickets)
        return sample
    }

    /// Swift concurrency: n child tasks, then the sink's body once the group is done.
    static func taskGroupFanIn(_ n: Int) -> Sample {
        let tickets = Tickets(count: n + 1)
        var sample = measure {
            blockingWait {
                await withTaskGroup(of: Void.self) { group in
                    for index in 0..<n { group.addTask { tickets.stamp(index) } }
                }
                tickets.stamp(n)
            }
        }
        sample.problem = checkFanIn(tickets)
        return sample
    }

    // MARK: Random DAG

    static func checkDAG(_ tickets: Tickets, _ dag: RandomDAG) -> String? {
        tickets.check { dag.dependencies(of: $0).map(Int.init) }
    }

    static func batonDAG(_ n: Int) -> Sample {
        let dag = RandomDAG(count: n)
        let tickets = Tickets(count: n)
        var sample = measure {
            let queue = JobQueue(name: "dag")
            var jobs: [Job] = []
            jobs.reserveCapacity(n)
            for index in 0..<n {
                let job = BlockJob { tickets.stamp(index) }
                for dependency in dag.dependencies(of: index) { job.addDependency(jobs[Int(dependency)]) }
                jobs.append(job)
            }
            queue.add(jobs)
            queue.waitUntilAllJobsAreFinished()
            return (queue, jobs)
        }
        sample.problem = checkDAG(tickets, dag)
        return sample
    }

    static func foundationDAG(_ n: Int) -> Sample {
        let dag = RandomDAG(count: n)
        let tickets = Tickets(count: n)
        var sample = measure {
            let queue = OperationQueue()
            var operations: [Operation] = []
            operations.reserveCapacity(n)
            for index in 0..<n {
                let operation = BlockOperation { tickets.stamp(index) }
                for dependency in dag.dependencies(of: index) { operation.addDependency(operations[Int(dependency)]) }
                operations.append(operation)
            }
            queue.addOperations(operations, waitUntilFinished: false)
            queue.waitUntilAllOperationsAreFinished()
            return (queue, operations)
        }
        sample.problem = checkDAG(tickets, dag)
        return sample
    }

    /// Raw GCD: one `DispatchGroup` per job, entered once per dependency; a job runs from its group's
    /// `notify` and, when done, leaves the group of each job that depends on it. The reverse edges
    /// this needs are computed inside the timed region (Baton and Foundation keep them themselves).
    static func gcdDAG(_ n: Int) -> Sample {
        let dag = RandomDAG(count: n)
        let tickets = Tickets(count: n)
        var sample = measure {
            let (offsets, edges) = dag.dependents()
            let dependents = GCDGraph(offsets: offsets, edges: edges, groups: (0..<n).map { _ in DispatchGroup() })
            for index in 0..<n {
                for _ in dag.dependencies(of: index) { dependents.groups[index].enter() }
            }
            let all = DispatchGroup()
            let queue = DispatchQueue.global()
            for index in 0..<n {
                all.enter()
                dependents.groups[index].notify(queue: queue) {
                    tickets.stamp(index)
                    dependents.leaveDependents(of: index)
                    all.leave()
                }
            }
            all.wait()
            return dependents
        }
        sample.problem = checkDAG(tickets, dag)
        return sample
    }
}

/// The reverse edges and groups of the GCD DAG runner; immutable once built.
final class GCDGraph: Sendable {
    let offsets: [Int32]
    let edges: [Int32]
    let groups: [DispatchGroup]

    init(offsets: [Int32], edges: [Int32], groups: [DispatchGroup]) {
        self.offsets = offsets
        self.edges = edges
        self.groups = groups
    }

    func leaveDependents(of job: Int) {
        for edge in Int(offsets[job])..<Int(offsets[job + 1]) { groups[Int(edges[edge])].leave() }
    }
}
