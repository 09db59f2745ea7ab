import Dispatch
import Synchronization

// Small tools shared by the workloads: counters and finish tickets that job bodies touch (so the
// optimizer cannot drop the work, and so each run can be checked after the clock stopped), a seeded
// random number generator and the random DAG.

/// Counts job bodies that ran. One relaxed atomic add per body, the same for every peer.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    @inline(__always)
    func increment() { value.wrappingAdd(1, ordering: .relaxed) }

    var count: Int { value.load(ordering: .acquiring) }

    /// `nil` if exactly `expected` bodies ran, otherwise a message for the report.
    func check(_ expected: Int, _ what: String = "bodies ran") -> String? {
        let count = self.count
        return count == expected ? nil : "\(count) \(what), expected \(expected)"
    }
}

/// One finish ticket per job: a job's body stamps its slot with the next number of a shared atomic
/// counter. After a run, a dependency must hold a smaller ticket than its dependent, and every slot
/// must be stamped. Slots are written by one body each and read only after the run, so the writes
/// need no lock; the run's wait orders them before the check.
final class Tickets: @unchecked Sendable {
    // @unchecked Sendable: each slot is written by exactly one job body; slots are read only after
    // the run finished and the waiting thread synchronised with every body (queue/group wait).
    let count: Int
    private let slots: UnsafeMutablePointer<Int>
    private let next = Atomic<Int>(0)

    init(count: Int) {
        self.count = count
        slots = .allocate(capacity: count)
        slots.initialize(repeating: 0, count: count)
    }

    deinit { slots.deallocate() }

    @inline(__always)
    func stamp(_ index: Int) {
        slots[index] = next.wrappingAdd(1, ordering: .relaxed).newValue
    }

    subscript(index: Int) -> Int { slots[index] }

    /// `nil` if every job ran once and after each of its dependencies, otherwise a message.
    func check(dependencies: (Int) -> [Int]) -> String? {
        for job in 0..<count {
            guard slots[job] > 0 else { return "job \(job) never ran" }
            for dependency in dependencies(job) where slots[dependency] >= slots[job] {
                return "job \(job) ran before its dependency \(dependency)"
            }
        }
        let stamped = next.load(ordering: .acquiring)
        return stamped == count ? nil : "\(stamped) bodies ran, expected \(count)"
    }
}

/// A trivial body for `async` jobs: an opaque `async` call that does not suspend.
@inline(never)
func trivialAsyncBody(_ counter: Counter) async {
    counter.increment()
}

/// SplitMix64: a tiny, fast, seeded generator, so the random DAG is the same in every run.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_4761_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A random DAG: job `i` depends on `min(i, 4)` distinct jobs chosen uniformly among `0..<i`.
/// Stored as compressed rows (`offsets`, `edges`) so that a million jobs cost two flat arrays.
struct RandomDAG: Sendable {
    static let dependenciesPerJob = 4
    static let seed: UInt64 = 0xBA70_2025

    let count: Int
    /// Job `i`'s dependencies are `edges[offsets[i]..<offsets[i + 1]]`.
    let offsets: [Int32]
    let edges: [Int32]

    init(count: Int) {
        var generator = SplitMix64(seed: RandomDAG.seed)
        var offsets: [Int32] = [0]
        var edges: [Int32] = []
        offsets.reserveCapacity(count + 1)
        edges.reserveCapacity(count * RandomDAG.dependenciesPerJob)
        for job in 0..<count {
            let start = edges.count
            let wanted = min(job, RandomDAG.dependenciesPerJob)
            while edges.count - start < wanted {
                let candidate = Int32(Int.random(in: 0..<job, using: &generator))
                if !edges[start...].contains(candidate) { edges.append(candidate) }
            }
            offsets.append(Int32(edges.count))
        }
        self.count = count
        self.offsets = offsets
        self.edges = edges
    }

    func dependencies(of job: Int) -> ArraySlice<Int32> {
        edges[Int(offsets[job])..<Int(offsets[job + 1])]
    }

    /// The reverse edges (who waits for each job), also as compressed rows. Peers that release
    /// dependents themselves (raw GCD) need them; building them is part of their timed work.
    func dependents() -> (offsets: [Int32], edges: [Int32]) {
        var counts = [Int32](repeating: 0, count: count + 1)
        for edge in edges { counts[Int(edge) + 1] += 1 }
        for index in 1..<counts.count { counts[index] += counts[index - 1] }
        var fill = counts
        var reverse = [Int32](repeating: 0, count: edges.count)
        for job in 0..<count {
            for dependency in dependencies(of: job) {
                reverse[Int(fill[Int(dependency)])] = Int32(job)
                fill[Int(dependency)] += 1
            }
        }
        return (counts, reverse)
    }
}

/// Drops `value` inside a call the optimizer cannot see through, so that the release happens here and
/// not at some earlier or later point of the caller.
@inline(never)
func release<T>(_ value: consuming T) {
    _ = consume value
}
