import Baton
import BatonTesting
import Foundation

@testable import BatonDurable

// Jobs the worker tests run. Their kinds are distinct so one worker can register all of them.

struct FeedFile: Codable, Sendable, Equatable {
    var url: String
    var bytes: Int
}

struct FetchFeed: DurableJob {
    static let kind = "test.fetch"
    func run(_ url: String, context: DurableJobContext) async throws -> FeedFile {
        FeedFile(url: url, bytes: url.count * 100)
    }
}

struct ParseFeed: DurableJob {
    static let kind = "test.parse"
    func run(_ file: FeedFile, context: DurableJobContext) async throws -> [Int] {
        Array(0..<(file.bytes / 100))
    }
}

struct ImportFeed: DurableJob {
    static let kind = "test.import"
    let imported: Protected<[Int]>
    func run(_ rows: [Int], context: DurableJobContext) async throws -> Int {
        imported.withLock { $0 += rows }
        return rows.count
    }
}

/// Returns the metadata of its context's logger, as text.
struct LoggerMetadata: DurableJob {
    static let kind = "test.logger-metadata"
    func run(_ input: Int, context: DurableJobContext) async throws -> [String: String] {
        let logger = context.logger
        return ["durable.job", "durable.name", "durable.attempt", "given"].reduce(into: [:]) { result, key in
            result[key] = logger[metadataKey: key].map { "\($0)" }
        }
    }
}

/// Fails until its attempt number reaches `succeedOn`, recording the attempts it saw.
struct Flaky: DurableJob {
    static let kind = "test.flaky"
    let attempts: Protected<[Int]>
    func run(_ succeedOn: Int, context: DurableJobContext) async throws -> String {
        attempts.withLock { $0.append(context.attempt) }
        if context.attempt < succeedOn { throw FlakyError(attempt: context.attempt) }
        return "ok on \(context.attempt)"
    }
}

/// Fails every attempt: with a ``PermanentFailure`` for the input "permanent", else with a plain error.
struct Refuses: DurableJob {
    static let kind = "test.refuses"
    let attempts: Protected<[String]>
    func run(_ input: String, context: DurableJobContext) async throws -> String {
        attempts.withLock { $0.append(input) }
        if input == "permanent" { throw PermanentFailure(RecordGone()) }
        throw FlakyError(attempt: context.attempt)
    }

    struct RecordGone: Error, CustomStringConvertible {
        var description: String { "the record is gone; no retry brings it back" }
    }
}

struct FlakyError: Error, CustomStringConvertible {
    let attempt: Int
    var description: String { "flaky failure on attempt \(attempt)" }
}

/// Opens `started`, then waits until cancelled; records how it ended, then opens `ended`.
struct Blocker: DurableJob {
    static let kind = "test.blocker"
    let started: Gate
    let endings: Protected<[String]>
    var ended = Gate()
    /// Stops with an error of its own when cancelled, as a library does ("request aborted").
    var throwsOwnError = false
    struct Aborted: Error {}
    func run(_ label: String, context: DurableJobContext) async throws -> String {
        started.open()
        do {
            try await Task.sleep(for: .seconds(3600))  // until cancelled: the test never waits for this
        } catch {
            endings.withLock { $0.append("\(label): cancelled") }
            ended.open()
            if throwsOwnError { throw Aborted() }
            throw error
        }
        return label
    }
}

/// Counts how many of its kind run at once.
struct Counted: DurableJob {
    static let kind = "test.counted"
    let running: Protected<(now: Int, max: Int)>
    func run(_ index: Int, context: DurableJobContext) async throws -> Int {
        running.withLock {
            $0.now += 1
            $0.max = max($0.max, $0.now)
        }
        await Task.yield()
        await Task.yield()
        running.withLock { $0.now -= 1 }
        return index
    }
}

/// A store in memory and a worker with short intervals.
func makeWorker(
    _ store: any JobStore, _ jobs: [any DurableJob], id: String = "worker-1", lease: Duration = .seconds(8),
    renew: Duration = .seconds(2), grace: Duration = .seconds(10), hooks: DurableWorker.Hooks = .init(),
    instruments: [any JobInstrument]? = nil
) throws -> DurableWorker {
    try DurableWorker(
        store: store, jobs: jobs,
        configuration: .init(
            id: id, maxConcurrentJobs: 8, leaseDuration: lease, renewInterval: renew, pollInterval: .milliseconds(200),
            shutdownGracePeriod: grace, instruments: instruments), hooks: hooks)
}

/// An in-memory store holding one run of one `Blocker` job ("b"), and a worker for it (no grace
/// period unless given): what the worker tests that stop, cancel or close around a running job share.
struct BlockerSetup {
    let store: SQLiteJobStore
    let run: DurableRun
    let worker: DurableWorker
    let started: Gate
    let endings: Protected<[String]>

    init(
        renew: Duration = .seconds(2), grace: Duration = .zero, instruments: [any JobInstrument]? = nil,
        throwsOwnError: Bool = false
    ) async throws {
        store = try SQLiteJobStore.inMemory()
        started = Gate()
        endings = Protected<[String]>([])
        var graph = JobGraph(name: "g")
        graph.add(Blocker.self, input: "b")
        run = try await store.submit(graph)
        worker = try makeWorker(
            store, [Blocker(started: started, endings: endings, throwsOwnError: throwsOwnError)], renew: renew,
            grace: grace, instruments: instruments)
    }
}

/// Opens `started`, then runs until cancelled and goes on for `input` milliseconds after (a body slow
/// to stop: the time is the work it finishes, not a wait for another task).
struct SlowToStop: DurableJob {
    static let kind = "test.slow-to-stop"
    let started: Gate
    func run(_ input: Int, context: DurableJobContext) async throws -> String {
        started.open()
        try? await Task.sleep(for: .seconds(3600))  // until cancelled
        // Work that does not stop when cancelled (a cancelled task's own sleep would end at once).
        await withCheckedContinuation { continuation in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(input)) { continuation.resume() }
        }
        throw CancellationError()
    }
}
