import Baton
import Dispatch
import Foundation

/// `cancel-all`: add n jobs to a suspended queue, cancel them all, resume, and wait until every one
/// finished. The whole sequence is timed. No body may run.
enum CancelWorkload {
    static var cancelAll: Workload {
        Workload(
            name: "cancel-all",
            summary: "add n jobs to a suspended queue, cancel all, resume, wait until all finished (no body runs)",
            runners: [.baton: baton, .foundation: foundation, .gcd: gcd]
        )
    }

    static func baton(_ n: Int) -> Sample {
        let counter = Counter()
        var sample = measure {
            let queue = JobQueue(name: "cancel-all")
            queue.isSuspended = true
            for _ in 0..<n { queue.add { counter.increment() } }
            queue.cancelAll()
            queue.isSuspended = false
            queue.waitUntilAllJobsAreFinished()
            return queue
        }
        sample.problem = counter.check(0, "cancelled bodies ran")
        return sample
    }

    static func foundation(_ n: Int) -> Sample {
        let counter = Counter()
        var sample = measure {
            let queue = OperationQueue()
            queue.isSuspended = true
            for _ in 0..<n { queue.addOperation { counter.increment() } }
            queue.cancelAllOperations()
            queue.isSuspended = false
            queue.waitUntilAllOperationsAreFinished()
            return queue
        }
        sample.problem = counter.check(0, "cancelled bodies ran")
        return sample
    }

    /// Raw GCD: `DispatchWorkItem`s on a suspended private concurrent queue, each cancelled, then the
    /// queue resumed and the group waited for.
    static func gcd(_ n: Int) -> Sample {
        let counter = Counter()
        var sample = measure {
            let queue = DispatchQueue(label: "bench.cancel-all", attributes: .concurrent)
            queue.suspend()
            let group = DispatchGroup()
            let items = (0..<n).map { _ in DispatchWorkItem { counter.increment() } }
            for item in items { queue.async(group: group, execute: item) }
            for item in items { item.cancel() }
            queue.resume()
            group.wait()
            return (queue, items)
        }
        sample.problem = counter.check(0, "cancelled bodies ran")
        return sample
    }
}
