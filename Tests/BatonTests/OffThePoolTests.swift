import BatonTesting
import Testing

/// The test kit's `offThePool`: blocking work there never waits for a thread, however much of it runs.
@Suite(.timeLimit(.minutes(1))) struct OffThePoolTests {
    /// 24 blocking calls, each waiting until all 24 are inside, all run at once. On
    /// `DispatchQueue.global()` (what the tests used before) this took ~20 s on Linux with 2 cores:
    /// one thread per core, then about one more per second. The deadline is each call's own bounded
    /// wait, on its own thread, so a starved Swift concurrency pool cannot postpone it.
    @Test func blockingCallsEachGetAThread() async {
        let count = 24
        let inside = ConcurrencyGauge()
        let allInside = Gate()
        let met = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<count {
                group.addTask {
                    await offThePool {
                        if inside.enter() == count { allInside.open() }
                        return allInside.wait(timeoutSeconds: 10)
                    }
                }
            }
            return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(met == count, "\(count - met) of \(count) blocking calls waited 10 s for the others to start")
        #expect(inside.highest == count)
    }
}
