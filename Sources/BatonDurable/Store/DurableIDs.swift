/// The identity of a submitted run (one graph), assigned by the store.
public struct DurableRunID: RawRepresentable, Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "run \(rawValue)" }
}

/// The identity of one durable job in a store, assigned at submission.
public struct DurableJobID: RawRepresentable, Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    public let rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "job \(rawValue)" }
}

/// The proof that a worker holds a job: the job and the token of its current claim.
///
/// Every claim draws a new token. The store accepts a completion, a renewal or a release only with the
/// token of the job's current claim (fencing), so a worker that lost its lease — its process paused,
/// the lease expired and another worker claimed the job — cannot overwrite the newer attempt.
public struct Lease: Hashable, Codable, Sendable, CustomStringConvertible {
    public var job: DurableJobID
    public var token: Int64
    public init(job: DurableJobID, token: Int64) {
        self.job = job
        self.token = token
    }
    public var description: String { "lease \(token) on \(job)" }

    /// A fresh random token (never 0, so 0 can mean "no lease" in a table).
    public static func newToken() -> Int64 {
        var token: Int64 = 0
        while token == 0 { token = Int64.random(in: Int64.min...Int64.max) }
        return token
    }
}
