import BatonTesting
import Testing

@testable import Baton

/// A bound on a queue's unfinished jobs (`maxUnfinishedJobs`): producers wait under it
/// (`addWhenRoom`), in the order they asked, or are refused over it (`tryAdd`).
@Suite("Back-pressure")
struct BackPressureTests {
    /// A job that stays unfinished until `gate` opens, holding no thread.
    static func held(_ gate: Gate, _ name: String = "held") -> Job {
        AsyncJob(name: name) { _ in await gate.waitAsync() }
    }

    static func waiting(_ queue: JobQueue, _ count: Int) async -> Bool {
        await eventually { queue.diagnose().waitingProducers == count }
    }

    @Test func aProducerWaitsWhileTheQueueIsFullAndGoesOnWhenAJobFinishes() async throws {
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: 2)
        let first = Gate()
        let second = Gate()
        defer { second.open() }
        try await queue.addWhenRoom(Self.held(first))
        try await queue.addWhenRoom(Self.held(second))
        let added = Gate()
        let producer = Task {
            try await queue.addWhenRoom(BlockJob(name: "third") {})
            added.open()
        }
        #expect(await Self.waiting(queue, 1), "the third job is not waited for: \(queue.diagnose())")
        #expect(!added.isOpen)
        #expect(queue.jobCount == 2)
        #expect("\(queue.diagnose())".contains("(bound 2)"))
        #expect("\(queue.diagnose())".contains("1 producer waiting for room"))
        first.open()
        try await withDeadline(.seconds(30), "the producer let in when a job finished") {
            try await producer.value
        }
        #expect(queue.diagnose().waitingProducers == 0)
    }

    @Test func tryAddRefusesOverTheBoundAndBehindAWaitingProducer() async throws {
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: 2)
        let gate = Gate()
        defer { gate.open() }
        #expect(queue.tryAdd(Self.held(gate)))
        #expect(!queue.tryAdd([Self.held(gate), Self.held(gate)]), "two more do not fit under 2")
        #expect(queue.jobCount == 1, "a refused batch adds none of its jobs")
        // A producer asking for two waits; a single job would fit, but does not overtake it.
        let producer = Task { try await queue.addWhenRoom([Self.held(gate), Self.held(gate)]) }
        #expect(await Self.waiting(queue, 1))
        #expect(!queue.tryAdd(Self.held(gate)), "tryAdd overtook a waiting producer")
        gate.open()
        try await withDeadline(.seconds(30), "the waiting producer") { try await producer.value }
        await queue.waitUntilAllJobsAreFinished()
        #expect(queue.tryAdd(BlockJob {}))
    }

    @Test func producersAreLetInInTheOrderTheyAsked() async throws {
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: 3)
        let gates = (0..<3).map { _ in Gate() }
        defer { for gate in gates { gate.open() } }
        for gate in gates { try await queue.addWhenRoom(Self.held(gate)) }
        let order = Recorder<String>()
        let later = Gate()
        defer { later.open() }
        // The first asks for three, the second for one: the second must not overtake.
        let big = Task {
            try await queue.addWhenRoom([Self.held(later), Self.held(later), Self.held(later)])
            order.record("big")
        }
        #expect(await Self.waiting(queue, 1))
        let small = Task {
            try await queue.addWhenRoom(Self.held(later))
            order.record("small")
        }
        #expect(await Self.waiting(queue, 2))
        gates[0].open()  // room for one: the big one still waits, and the small one behind it
        #expect(await eventually { queue.jobCount == 2 })
        #expect(order.values.isEmpty)
        gates[1].open()
        gates[2].open()  // room for three: the big one
        try await withDeadline(.seconds(30), "the first producer") { try await big.value }
        #expect(order.values == ["big"])
        later.open()
        try await withDeadline(.seconds(30), "the second producer") { try await small.value }
        #expect(order.values == ["big", "small"])
    }

    @Test func aCancelledProducerAddsNothingAndLetsThoseBehindItIn() async throws {
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: 2)
        let gate = Gate()
        defer { gate.open() }
        let other = Gate()
        try await queue.addWhenRoom(Self.held(gate))
        try await queue.addWhenRoom(Self.held(other))
        let cancelled = Task { try await queue.addWhenRoom([Self.held(gate), Self.held(gate)]) }
        #expect(await Self.waiting(queue, 1))
        let behind = Task { try await queue.addWhenRoom(Self.held(gate, "behind")) }
        #expect(await Self.waiting(queue, 2))
        other.open()  // room for one: not for the first (two), so neither goes in
        #expect(await eventually { queue.jobCount == 1 })
        #expect(queue.diagnose().waitingProducers == 2)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        try await withDeadline(.seconds(30), "the producer behind the cancelled one") { try await behind.value }
        #expect(queue.jobs.map(\.name) == ["held", "behind"], "the cancelled producer added nothing")
    }

    /// A producer let in behind one still adding (here held inside `add` by a condition that answers
    /// late) waits for its turn; cancelled then, it throws and adds nothing, as one waiting for room does.
    @Test func aProducerCancelledWhileWaitingForItsTurnAddsNothing() async throws {
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: 1)
        let held = Gate()
        defer { held.open() }
        try await queue.addWhenRoom(Self.held(held))
        let inside = Gate()
        let release = Gate()
        defer { release.open() }
        let slow = BlockJob(name: "slow") {}
        slow.addCondition(
            ClosureCondition(name: "answers late") { _ in
                inside.open()
                return release.wait(timeoutSeconds: 60)
            })
        let first = Task { try await queue.addWhenRoom(slow) }
        #expect(await Self.waiting(queue, 1))
        let second = Task { try await queue.addWhenRoom(BlockJob(name: "second") {}) }
        #expect(await Self.waiting(queue, 2))
        queue.maxUnfinishedJobs = 10  // both let in: the first adds, the second waits for its turn
        try await withDeadline(.seconds(30), "the first producer inside add") { await inside.waitAsync() }
        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        release.open()
        try await withDeadline(.seconds(30), "the first producer") { try await first.value }
        #expect(!queue.jobs.map(\.name).contains("second"), "the cancelled producer added its job")
        #expect(queue.reservedRoomForTesting == 0, "the cancelled producer's room was not given back")
    }

    /// Producers that gave up behind one that cannot get in are swept from the line, not kept until it
    /// gets in.
    @Test func cancelledProducersDoNotPileUpBehindOneThatWaits() async throws {
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: 1)
        let held = Gate()
        defer { held.open() }
        try await queue.addWhenRoom(Self.held(held))
        let front = Task { try await queue.addWhenRoom(BlockJob(name: "front") {}) }
        #expect(await Self.waiting(queue, 1))
        for _ in 0..<200 {
            let gaveUp = Task { try await queue.addWhenRoom(BlockJob {}) }
            #expect(await Self.waiting(queue, 2))
            gaveUp.cancel()
            _ = await gaveUp.result
        }
        #expect(queue.diagnose().waitingProducers == 1)
        #expect(
            queue.linedUpProducersForTesting < 40,
            "cancelled producers kept in line: \(queue.linedUpProducersForTesting)")
        held.open()
        try await withDeadline(.seconds(30), "the front producer") { try await front.value }
    }

    @Test func aProducerCancelledBeforeItAsksAddsNothing() async throws {
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: 1)
        let started = Gate()
        let producer = Task {
            await started.waitAsync()
            try await queue.addWhenRoom(BlockJob {})
        }
        producer.cancel()
        started.open()
        await #expect(throws: CancellationError.self) { try await producer.value }
        #expect(queue.jobCount == 0)
    }

    @Test func aBatchLargerThanTheBoundIsLetInOnceTheQueueIsEmpty() async throws {
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: 2)
        let gate = Gate()
        try await queue.addWhenRoom(Self.held(gate))
        let producer = Task { try await queue.addWhenRoom((0..<5).map { _ in BlockJob {} }) }
        #expect(await Self.waiting(queue, 1))
        gate.open()
        try await withDeadline(.seconds(30), "a batch of 5 under a bound of 2") { try await producer.value }
        await queue.waitUntilAllJobsAreFinished()
    }

    @Test func raisingTheBoundLetsWaitingProducersIn() async throws {
        let queue = JobQueue(name: "bounded", maxUnfinishedJobs: 1)
        let gate = Gate()
        defer { gate.open() }
        try await queue.addWhenRoom(Self.held(gate))
        let producer = Task { try await queue.addWhenRoom(Self.held(gate)) }
        #expect(await Self.waiting(queue, 1))
        queue.maxUnfinishedJobs = 2
        try await withDeadline(.seconds(30), "a producer let in by a raised bound") { try await producer.value }
        #expect(queue.jobCount == 2)
        queue.maxUnfinishedJobs = nil
        #expect(queue.tryAdd(Self.held(gate)), "no bound")
    }

    @Test func producersRacingFinishesNeverPushTheQueueOverItsBound() async throws {
        let bound = 50
        let queue = JobQueue(name: "bounded", maxConcurrentJobs: 4, maxUnfinishedJobs: bound)
        let highest = Protected(0)
        let ran = Protected(0)
        try await withDeadline(.seconds(120), "4 producers of 5,000 jobs each under a bound of 50") {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for producer in 0..<4 {
                    group.addTask {
                        for index in 0..<5_000 {
                            let job = BlockJob(name: "p\(producer)-\(index)") {
                                let count = queue.jobCount
                                highest.withLock { $0 = max($0, count) }
                                ran.withLock { $0 += 1 }
                            }
                            if index % 3 == 0, queue.tryAdd(job) { continue }
                            try await queue.addWhenRoom(job)
                        }
                    }
                }
                try await group.waitForAll()
            }
            await queue.waitUntilAllJobsAreFinished()
        }
        #expect(ran.withLock { $0 } == 20_000)
        #expect(highest.withLock { $0 } <= bound)
    }
}
