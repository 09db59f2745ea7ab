import Baton
import BatonTesting
import Dispatch
import Testing

/// Random graphs whose edges go both ways (so cycles are common), added in random batches from two
/// threads at once: every cycle must be found (an undetected one would never drain), and the only
/// failures are cycle errors that name jobs which really wait for each other.
@Suite struct CycleStressTests {
    @Test(arguments: [21, 22, 23, 24])
    func everyCycleIsFoundWhateverTheOrderOfAdding(seed: UInt64) async throws {
        var rng = SeededRandom(seed: seed)
        let count = 600 * RandomGraphStressTests.scale
        let jobs = (0..<count).map { BlockJob(name: "j\($0)") {} }
        var edges: [(Int, Int)] = []
        for i in 0..<count {
            for _ in 0..<Int(1 + rng.next() % 4) {
                let j = Int(rng.next() % UInt64(count))
                // Backwards (like real graphs) and, half as often, forwards: forward edges close cycles.
                if j != i && (j < i || rng.next() % 2 == 0) {
                    jobs[i].addDependency(jobs[j])
                    edges.append((i, j))
                }
            }
        }
        let shuffled = jobs.shuffled(using: &rng)
        let queues = [JobQueue(name: "a"), JobQueue(name: "b", maxConcurrentJobs: 2)]
        let split = shuffled.count / 2
        let halves = [Array(shuffled[..<split]), Array(shuffled[split...])]
        let batchSizes = (0..<2).map { _ in 1 + Int(rng.next() % 50) }
        DispatchQueue.concurrentPerform(iterations: 2) { side in
            var start = 0
            let half = halves[side]
            while start < half.count {
                let end = min(half.count, start + batchSizes[side])
                queues[side].add(Array(half[start..<end]))
                start = end
            }
        }
        try await withStallDeadline(
            stalledFor: .seconds(30), atMost: .seconds(600),
            "the graph draining (a missed cycle would keep it waiting)",
            progress: { queues.reduce(0) { $0 + $1.jobCount } },
            report: { queues.map { $0.diagnose().description }.joined(separator: "\n") }
        ) {
            for queue in queues { await queue.waitUntilAllJobsAreFinished() }
        }
        let dependsOn = Dictionary(grouping: edges, by: \.0).mapValues { Set($0.map(\.1)) }
        var cycleFailures = 0
        for job in jobs {
            guard case .failed(let error)? = job.outcomeIfDecided else { continue }
            let jobError = try #require(error as? JobError)
            #expect(jobError.code == .dependencyCycle)
            // The named cycle is real: each job waits for the next.
            let names = jobError.jobs.map { Int($0.dropFirst())! }
            for (a, b) in zip(names, names.dropFirst() + names.prefix(1)) {
                #expect(dependsOn[a]?.contains(b) == true, "j\(a) does not wait for j\(b)")
            }
            cycleFailures += 1
        }
        let cyclic = hasCycle(count: count, edges: edges)
        #expect(cyclic)  // dense enough that every seed makes cycles
        #expect(cycleFailures > 0)
    }
}

/// Whether the graph has a cycle (Kahn's algorithm: a cycle leaves nodes that never reach in-degree 0).
func hasCycle(count: Int, edges: [(Int, Int)]) -> Bool {
    var waitingFor = [Int](repeating: 0, count: count)
    var dependents = [[Int]](repeating: [], count: count)
    for (job, dependency) in edges {
        waitingFor[job] += 1
        dependents[dependency].append(job)
    }
    var ready = (0..<count).filter { waitingFor[$0] == 0 }
    var done = 0
    while let next = ready.popLast() {
        done += 1
        for dependent in dependents[next] {
            waitingFor[dependent] -= 1
            if waitingFor[dependent] == 0 { ready.append(dependent) }
        }
    }
    return done < count
}
