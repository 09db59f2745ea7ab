import BatonTesting
import Foundation
import Testing

@testable import Baton

/// Issue 30: the arbiter's work per claim stays flat as its lines grow, in the two loads that were
/// quadratic (claims that gave up behind a blocked one; many claims waiting in a wide line). Counted
/// in window moves (`ExclusivityStateMachine.moves`), not timed; at 4× the size (times the stress
/// scale) a claim must cost no more than at 1×.
@Suite struct ClaimLineScalingTests {
    /// Makes tickets, each for a job of its own.
    final class TicketMaker {
        var made = 0
        func callAsFunction(_ categories: [ExclusivityCategory]) -> ClaimTicket {
            made += 1
            return ClaimTicket(job: BlockJob(name: "\(made)") {}, categories: categories)
        }
    }

    /// Moves per claim: a blocked {x (limit 3), y} claim at the front of x's line, `n` x-claims that wait
    /// behind it (two jobs hold x's other units) and give up, then `n` x-only claims that come and go.
    static func deadEntries(_ n: Int) -> Double {
        var m = ExclusivityStateMachine()
        let ticket = TicketMaker()
        let x = ExclusivityCategory("x", limit: 3)
        let holder = ticket(["y"])
        _ = m.request(holder)
        _ = m.request(ticket([x, "y"]))
        let hogs = [ticket([x]), ticket([x])]
        for hog in hogs { _ = m.request(hog) }
        let gaveUp = (0..<n).map { _ in ticket([x]) }
        for claim in gaveUp { _ = m.request(claim) }
        for claim in gaveUp { _ = m.release(claim) }
        for hog in hogs { _ = m.release(hog) }
        let before = m.moves
        var missed = 0
        for _ in 0..<n {
            let claim = ticket([x])
            if m.request(claim) != .granted { missed += 1 }
            _ = m.release(claim)
        }
        #expect(missed == 0, "x-only claims not granted at once")
        return Double(m.moves - before) / Double(n)
    }

    /// Moves per claim: `n / 5` {io, db} claims wait while db is held (io's limit above that), then `n`
    /// io-only claims come and go, then db is let go and the waiters run.
    static func wideLine(_ n: Int) -> Double {
        var m = ExclusivityStateMachine()
        let ticket = TicketMaker()
        let io = ExclusivityCategory("io", limit: n / 5 + 1_000)
        let holder = ticket(["db"])
        _ = m.request(holder)
        let waiters = (0..<n / 5).map { _ in ticket([io, "db"]) }
        for claim in waiters { _ = m.request(claim) }
        var missed = 0
        for _ in 0..<n {
            let claim = ticket([io])
            if m.request(claim) != .granted { missed += 1 }
            _ = m.release(claim)
        }
        var current = holder
        for claim in waiters {
            if m.release(current).count != 1 { missed += 1 }
            current = claim
        }
        #expect(missed == 0, "claims not granted when they should be")
        return Double(m.moves) / Double(n + n / 5)
    }

    @Test(arguments: ["dead entries", "wide line"])
    func workPerClaimStaysFlat(load: String) {
        let n = 10_000 * RandomGraphStressTests.scale
        let measure = load == "dead entries" ? Self.deadEntries : Self.wideLine
        let small = measure(n)
        let large = measure(4 * n)
        #expect(large <= small * 1.1 + 0.01, "\(load): \(small) moves per claim at \(n), \(large) at \(4 * n)")
        #expect(small <= 4, "\(load): \(small) moves per claim")
    }
}
