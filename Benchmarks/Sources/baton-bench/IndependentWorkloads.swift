import Baton
import Dispatch
import Foundation

/// `independent`: n jobs without dependencies at default width. `serial`: the same on a queue that
/// runs one job at a time. Each body adds one to an atomic counter. Jobs are added one call at a time
/// (`queue.add { … }`, `addOperation { … }`, `async { … }`, `addTask { … }`), as most programs do.
enum IndependentWorkloads {
    static var independent: Workload {
        Workload(
            name: "independent",
            summary: "n jobs, no dependencies, synchronous bodies (one atomic add), added one by one, default width",
            runners: [
                .baton: baton(width: nil), .foundation: foundation(width: nil), .gcd: gcdGlobal, .taskgroup: taskGroup,
            ]
        )
    }

    static var serial: Workload {
        Workload(
            name: "serial",
            summary:
                "as independent, on a serial queue (maxConcurrentJobs 1 / maxConcurrentOperationCount 1 / serial DispatchQueue)",
            runners: [.baton: baton(width: 1), .foundation: foundation(width: 1), .gcd: gcdSerial]
        )
    }

    static func baton(width: Int?) -> (Int) -> Sample {
        { n in
            let counter = Counter()
            var sample = measure {
                let queue = width.map { JobQueue(name: "bench", maxConcurrentJobs: $0) } ?? JobQueue(name: "bench")
                for _ in 0..<n { queue.add { counter.increment() } }
                queue.waitUntilAllJobsAreFinished()
                return queue
            }
            sample.problem = counter.check(n)
            return sample
        }
    }

    static func foundation(width: Int?) -> (Int) -> Sample {
        { n in
            let counter = Counter()
            var sample = measure {
                let queue = OperationQueue()
                if let width { queue.maxConcurrentOperationCount = width }
                for _ in 0..<n { queue.addOperation { counter.increment() } }
                queue.waitUntilAllOperationsAreFinished()
                return queue
            }
            sample.problem = counter.check(n)
            return sample
        }
    }

    /// Raw GCD: blocks on the global concurrent queue, waited for with a `DispatchGroup`.
    static func gcdGlobal(_ n: Int) -> Sample {
        let counter = Counter()
        var sample = measure {
            let group = DispatchGroup()
            let queue = DispatchQueue.global()
            for _ in 0..<n { queue.async(group: group) { counter.increment() } }
            group.wait()
            return group
        }
        sample.problem = counter.check(n)
        return sample
    }

    /// Raw GCD: blocks on a private serial queue, waited for with a final `sync`.
    static func gcdSerial(_ n: Int) -> Sample {
        let counter = Counter()
        var sample = measure {
            let queue = DispatchQueue(label: "bench.serial")
            for _ in 0..<n { queue.async { counter.increment() } }
            queue.sync {}
            return queue
        }
        sample.problem = counter.check(n)
        return sample
    }

    /// Swift concurrency: one child task per job in a `withTaskGroup`.
    static func taskGroup(_ n: Int) -> Sample {
        let counter = Counter()
        var sample = measure {
            blockingWait {
                await withTaskGroup(of: Void.self) { group in
                    for _ in 0..<n { group.addTask { counter.increment() } }
                }
            }
        }
        sample.problem = counter.check(n)
        return sample
    }
}
