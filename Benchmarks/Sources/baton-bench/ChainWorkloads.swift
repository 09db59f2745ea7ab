import Baton
import Dispatch
import Foundation

/// `chain`: n jobs, each depending on the one before, at default width. `chain-serial`: the same at
/// width 1. All jobs are created and linked first, then added at once; each body stamps its finish
/// ticket, and the run is checked to have run every job after its dependency.
enum ChainWorkloads {
    static var chain: Workload {
        Workload(
            name: "chain",
            summary: "n jobs, job i depends on job i-1, built then added at once, default width",
            runners: [.baton: baton(width: nil), .foundation: foundation(width: nil), .gcd: gcd(serial: false)],
            skipReason: skipLongFoundationChains
        )
    }

    static var chainSerial: Workload {
        Workload(
            name: "chain-serial",
            summary: "as chain, on a width-1 queue (GCD: work-item notify chain on a serial queue)",
            runners: [.baton: baton(width: 1), .foundation: foundation(width: 1), .gcd: gcd(serial: true)],
            skipReason: skipLongFoundationChains
        )
    }

    /// Every hop crosses a queue: the cost of waking the other queue's worker, against the same hop
    /// handed over within one queue (`chain`).
    static var chainCross: Workload {
        Workload(
            name: "chain-cross",
            summary:
                "as chain, jobs alternating between two queues (GCD: notify chain alternating two serial queues)",
            runners: [.baton: batonCross, .foundation: foundationCross, .gcd: gcdCross],
            skipReason: skipLongFoundationChains
        )
    }

    static func skipLongFoundationChains(_ peer: Peer, _ n: Int, _ limits: Limits) -> String? {
        guard peer == .foundation, n > limits.foundationGraph else { return nil }
        return
            "Foundation chains > \(limits.foundationGraph): quadratic at default width, and releasing a finished chain of ~40k+ crashes (stack overflow)"
    }

    static func check(_ tickets: Tickets) -> String? {
        tickets.check { $0 > 0 ? [$0 - 1] : [] }
    }

    /// n Baton jobs, each depending on the one before and stamping its ticket (built in the timed part).
    static func batonChain(_ n: Int, _ tickets: Tickets) -> [Job] {
        chain(n, make: { index in BlockJob { tickets.stamp(index) } }, link: { $0.addDependency($1) })
    }

    /// The same chain of Foundation operations.
    static func foundationChain(_ n: Int, _ tickets: Tickets) -> [Operation] {
        chain(n, make: { index in BlockOperation { tickets.stamp(index) } }, link: { $0.addDependency($1) })
    }

    /// n items made by `make`, each linked by `link(item, previous)` to the one before.
    @inline(__always)
    private static func chain<Item>(
        _ n: Int, make: (Int) -> Item, link: (Item, Item) -> Void
    ) -> [Item] {
        var items: [Item] = []
        items.reserveCapacity(n)
        for index in 0..<n {
            let item = make(index)
            if index > 0 { link(item, items[index - 1]) }
            items.append(item)
        }
        return items
    }

    /// The even-numbered and the odd-numbered elements, for the two queues of `chain-cross`.
    static func evensAndOdds<T>(_ items: [T]) -> [[T]] {
        [
            stride(from: 0, to: items.count, by: 2).map { items[$0] },
            stride(from: 1, to: items.count, by: 2).map { items[$0] },
        ]
    }

    static func baton(width: Int?) -> (Int) -> Sample {
        { n in
            let tickets = Tickets(count: n)
            var sample = measure {
                let queue = width.map { JobQueue(name: "chain", maxConcurrentJobs: $0) } ?? JobQueue(name: "chain")
                let jobs = batonChain(n, tickets)
                queue.add(jobs)
                queue.waitUntilAllJobsAreFinished()
                return (queue, jobs)
            }
            sample.problem = check(tickets)
            return sample
        }
    }

    static func batonCross(_ n: Int) -> Sample {
        let tickets = Tickets(count: n)
        var sample = measure {
            let queues = [JobQueue(name: "chain-a"), JobQueue(name: "chain-b")]
            let jobs = batonChain(n, tickets)
            for (queue, share) in zip(queues, evensAndOdds(jobs)) { queue.add(share) }
            for queue in queues { queue.waitUntilAllJobsAreFinished() }
            return (queues, jobs)
        }
        sample.problem = check(tickets)
        return sample
    }

    static func foundationCross(_ n: Int) -> Sample {
        let tickets = Tickets(count: n)
        var sample = measure {
            let queues = [OperationQueue(), OperationQueue()]
            let operations = foundationChain(n, tickets)
            for (queue, share) in zip(queues, evensAndOdds(operations)) {
                queue.addOperations(share, waitUntilFinished: false)
            }
            for queue in queues { queue.waitUntilAllOperationsAreFinished() }
            return (queues, operations)
        }
        sample.problem = check(tickets)
        return sample
    }

    static func gcdCross(_ n: Int) -> Sample {
        let tickets = Tickets(count: n)
        var sample = measure {
            let queues = [DispatchQueue(label: "bench.chain-a"), DispatchQueue(label: "bench.chain-b")]
            let items = (0..<n).map { index in DispatchWorkItem { tickets.stamp(index) } }
            for index in 0..<(n - 1) { items[index].notify(queue: queues[(index + 1) % 2], execute: items[index + 1]) }
            let done = DispatchSemaphore(value: 0)
            items[n - 1].notify(queue: queues[0]) { done.signal() }
            queues[0].async(execute: items[0])
            done.wait()
            return items
        }
        sample.problem = check(tickets)
        return sample
    }

    static func foundation(width: Int?) -> (Int) -> Sample {
        { n in
            let tickets = Tickets(count: n)
            var sample = measure {
                let queue = OperationQueue()
                if let width { queue.maxConcurrentOperationCount = width }
                let operations = foundationChain(n, tickets)
                queue.addOperations(operations, waitUntilFinished: false)
                queue.waitUntilAllOperationsAreFinished()
                return (queue, operations)
            }
            sample.problem = check(tickets)
            return sample
        }
    }

    /// Raw GCD: one `DispatchWorkItem` per job; each item's `notify` submits the next.
    static func gcd(serial: Bool) -> (Int) -> Sample {
        { n in
            let tickets = Tickets(count: n)
            var sample = measure {
                let queue = serial ? DispatchQueue(label: "bench.chain") : DispatchQueue.global()
                let items = (0..<n).map { index in DispatchWorkItem { tickets.stamp(index) } }
                for index in 0..<(n - 1) { items[index].notify(queue: queue, execute: items[index + 1]) }
                let done = DispatchSemaphore(value: 0)
                items[n - 1].notify(queue: queue) { done.signal() }
                queue.async(execute: items[0])
                done.wait()
                return items
            }
            sample.problem = check(tickets)
            return sample
        }
    }
}
