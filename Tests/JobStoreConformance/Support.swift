import Baton
public import BatonDurable
public import Foundation

/// A wall clock that moves only when a test says so, for stores under test.
///
/// ## Thread safety
/// All methods may be called from any thread.
public final class ManualDurableClock: Sendable {
    private let current: Protected<Date>

    /// Starts at a fixed, round date so that failures print readable times.
    public init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Protected(start) }

    public var now: Date { current.current }

    /// The clock to give a store.
    public var clock: DurableClock {
        let current = current
        return DurableClock { current.current }
    }

    public func advance(by duration: Duration) {
        current.withLock { $0 = $0.addingTimeInterval(duration / .seconds(1)) }
    }
}

/// A failed conformance check: what was expected and where.
public struct ConformanceFailure: Error, CustomStringConvertible {
    public let message: String
    public let file: String
    public let line: UInt
    public init(message: String, file: String = #fileID, line: UInt = #line) {
        self.message = message
        self.file = file
        self.line = line
    }
    public var description: String { "\(file):\(line): \(message)" }
}

func expect(
    _ condition: Bool, _ message: @autoclosure () -> String, file: String = #fileID, line: UInt = #line
) throws {
    if !condition { throw ConformanceFailure(message: message(), file: file, line: line) }
}

func expectEqual<T: Equatable>(
    _ actual: T, _ expected: T, _ what: String, file: String = #fileID, line: UInt = #line
) throws {
    if actual != expected {
        throw ConformanceFailure(message: "\(what): expected \(expected), got \(actual)", file: file, line: line)
    }
}

/// The value, or a failure naming what was missing.
func unwrap<T>(_ value: T?, _ what: String, file: String = #fileID, line: UInt = #line) throws -> T {
    guard let value else { throw ConformanceFailure(message: "\(what): missing", file: file, line: line) }
    return value
}

/// Expects `body` to throw a ``DurableError`` with `code`, and returns it.
@discardableResult
func expectDurableError(
    _ code: DurableError.Code, file: String = #fileID, line: UInt = #line, _ body: () async throws -> Void
) async throws -> DurableError {
    do {
        try await body()
    } catch let error as DurableError {
        try expectEqual(error.code, code, "error code of '\(error.message)'", file: file, line: line)
        return error
    }
    throw ConformanceFailure(message: "expected a DurableError \(code), nothing was thrown", file: file, line: line)
}

/// Builders for graphs in the checks.
enum Build {
    static func job(
        _ name: String, kind: String = "k", after dependencies: [Int] = [], regardless: [Int] = [],
        afterAll: [Int] = [], inputFrom: Int? = nil, priority: Int = 2, retry: RetryPolicy = .never,
        categories: [DurableCategory] = [], notBefore: Date? = nil
    ) -> JobSpec {
        JobSpec(
            name: name, kind: kind, input: inputFrom == nil ? Data("\"\(name)\"".utf8) : nil, inputFrom: inputFrom,
            dependencies: dependencies.map { JobSpec.Dependency(index: $0) }
                + regardless.map { JobSpec.Dependency(index: $0, runRegardless: true) }
                + afterAll.map { JobSpec.Dependency(index: $0, includingAdded: true) },
            priority: priority, retry: retry, categories: categories, notBefore: notBefore)
    }

    static func graph(_ name: String = "g", _ jobs: JobSpec...) -> GraphSpec { GraphSpec(name: name, jobs: jobs) }
}

extension JobStore {
    func claimAll(
        _ kinds: [String] = ["k"], worker: String = "w1", limit: Int = 100, lease: Duration = .seconds(30)
    )
        async throws -> [ClaimedJob]
    {
        try await claim(worker: worker, kinds: kinds, limit: limit, lease: lease)
    }

    func succeed(_ job: ClaimedJob, output: String = "\"done\"") async throws -> FinishResult {
        try await finish([AttemptReport(lease: job.lease, outcome: .succeeded(output: Data(output.utf8)))])[0]
    }

    func fail(_ job: ClaimedJob, _ message: String = "boom", retryable: Bool = true) async throws -> FinishResult {
        try await finish([AttemptReport(lease: job.lease, outcome: .failed(message: message, retryable: retryable))])[0]
    }

    /// Claims every claimable job of kind `k`, 500 at a time, and fails each attempt as retryable;
    /// throws unless every failure is accepted as a retry.
    func failEveryClaimable() async throws {
        while true {
            let claimed = try await claimAll(limit: 500)
            if claimed.isEmpty { return }
            let reports = claimed.map {
                AttemptReport(lease: $0.lease, outcome: .failed(message: "down", retryable: true))
            }
            try expect(try await finish(reports).allSatisfy { $0 == .accepted(.ready) }, "the failures are retried")
        }
    }

    func states(_ run: SubmittedRun) async throws -> [DurableJobState] {
        try await snapshot(of: run.run).jobs.map(\.state)
    }
}
