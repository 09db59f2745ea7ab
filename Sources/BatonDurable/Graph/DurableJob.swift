import Baton
public import Foundation
public import Logging

/// A job that can be stored: a stable kind name, a `Codable` input and output, and the code that turns
/// one into the other, which every worker that runs this kind registers.
///
/// ```swift
/// struct FetchFeed: DurableJob {
///     static let kind = "earthquakes.fetch"
///     func run(_ url: URL, context: DurableJobContext) async throws -> FeedFile { … }
/// }
/// ```
///
/// Execution is at least once: an attempt may run again after a crash, a lost lease or a retry, so
/// make its effects idempotent (``DurableJobContext/idempotencyKey`` is the same for every attempt).
/// Its completion is recorded exactly once. Cancellation arrives as Swift task cancellation
/// (`Task.isCancelled`, `try Task.checkCancellation()`), within one lease renewal.
///
/// Inputs and outputs are stored as JSON. Rename a field and stored values stop decoding: the job
/// then fails with a ``DurableError`` (``DurableError/Code/decoding``) that names it and the field;
/// give new fields defaults (or a custom `init(from:)`) to keep old values readable.
public protocol DurableJob: Sendable {
    associatedtype Input: Codable & Sendable
    associatedtype Output: Codable & Sendable

    /// The stable name stored with each job of this type. Never change it once graphs use it.
    static var kind: String { get }

    /// Runs one attempt.
    func run(_ input: Input, context: DurableJobContext) async throws -> Output
}

/// What a running durable job knows about itself.
public struct DurableJobContext: Sendable {
    public let job: DurableJobID
    public let run: DurableRunID
    public let name: String
    /// This attempt's number, from 1.
    public let attempt: Int
    public let maxAttempts: Int
    /// The worker running this attempt.
    public let worker: String
    /// A key that is the same for every attempt of this job, for making effects idempotent.
    public var idempotencyKey: String { "baton-durable/run-\(run.rawValue)/job-\(job.rawValue)" }
    /// A logger with the job's identity in its metadata.
    public var logger: Logger { loggerSource.logger(job: job, name: name, attempt: attempt) }
    let loggerSource: JobLoggerSource
    /// Where ``complete(returning:writes:)`` records the attempt: nil for a context made by hand.
    package let completion: AttemptCompletion?

    /// A context whose `logger` is `logger`, as given (for calling a job's `run` directly, in tests: it
    /// belongs to no worker's attempt, so `complete(returning:writes:)` throws).
    public init(
        job: DurableJobID, run: DurableRunID, name: String, attempt: Int, maxAttempts: Int, worker: String,
        logger: Logger
    ) {
        self.init(
            job: job, run: run, name: name, attempt: attempt, maxAttempts: maxAttempts, worker: worker,
            loggerSource: JobLoggerSource(ready: logger), completion: nil)
    }

    init(
        job: DurableJobID, run: DurableRunID, name: String, attempt: Int, maxAttempts: Int, worker: String,
        loggerSource: JobLoggerSource, completion: AttemptCompletion?
    ) {
        self.job = job
        self.run = run
        self.name = name
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.worker = worker
        self.loggerSource = loggerSource
        self.completion = completion
    }

    /// The attempt's completion, or the error of a context made by hand.
    package func attemptCompletion() throws -> AttemptCompletion {
        guard let completion else { throw AttemptCompletion.noAttempt(name) }
        return completion
    }
}

/// A job's logger, made when the job first asks for it: most jobs never log, and adding the job's
/// identity to a logger's metadata costs as much as a no-op job's whole run (swift-log's stream
/// handler renders all of its metadata on each change).
final class JobLoggerSource: Sendable {
    private let base: Logger
    /// Whether `base` still lacks the job's metadata.
    private let addsMetadata: Bool
    private let made = Protected<Logger?>(nil)

    /// `base` as it is.
    init(ready base: Logger) {
        self.base = base
        addsMetadata = false
    }

    /// `base` with the job's `durable.job`, `durable.name` and `durable.attempt` metadata.
    init(adding base: Logger) {
        self.base = base
        addsMetadata = true
    }

    func logger(job: DurableJobID, name: String, attempt: Int) -> Logger {
        guard addsMetadata else { return base }
        if let logger = made.withLock({ $0 }) { return logger }
        // Made outside the lock (the handler is user code); if two tasks race, the first stored wins.
        var logger = base
        var metadata = logger.handler.metadata
        metadata["durable.job"] = "\(job.rawValue)"
        metadata["durable.name"] = "\(name)"
        metadata["durable.attempt"] = "\(attempt)"
        logger.handler.metadata = metadata
        let stored = made.withLock { stored -> Logger in
            if let stored { return stored }
            stored = logger
            return logger
        }
        return stored
    }
}

/// The JSON coding of inputs and outputs, the same on every side.
///
/// Dates are written as Foundation writes them by default — seconds since 2001 as a JSON number, the
/// exact value, so a `Date` comes back equal to the one stored — and read from that, or from the
/// ISO 8601 text (whole seconds) that earlier versions wrote.
public enum DurableCoding {
    public static func encode<Value: Encodable>(_ value: Value) throws -> Data {
        try encoder.encode(value)
    }

    /// One encoder and one decoder for every job (their settings never change after this; both types
    /// may be used from any thread), rather than one made and configured for every input and output.
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .deferredToDate
        return encoder
    }()

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom(decodeDate)
        return decoder
    }()

    /// Reads a date as ``encode(_:)`` writes it, or as ISO 8601 text.
    static func decodeDate(_ decoder: any Decoder) throws -> Date {
        let container = try decoder.singleValueContainer()
        if let seconds = try? container.decode(Double.self) { return Date(timeIntervalSinceReferenceDate: seconds) }
        let text = try container.decode(String.self)
        for style in [
            Date.ISO8601FormatStyle(), Date.ISO8601FormatStyle(includingFractionalSeconds: true),
        ] {
            if let date = try? style.parse(text) { return date }
        }
        throw DecodingError.dataCorruptedError(
            in: container, debugDescription: "'\(text)' is not a date (seconds since 2001, or ISO 8601)")
    }

    /// Decodes a stored value, with an error that names the job, the type and what did not match.
    public static func decode<Value: Decodable>(
        _ type: Value.Type, from data: Data, what: String, job: String, kind: String
    ) throws(DurableError) -> Value {
        do {
            return try decoder.decode(type, from: data)
        } catch {
            let notJSON = (try? JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed)) == nil
            let advice =
                notJSON
                ? "It was not stored as JSON: give durable jobs their inputs through JobGraph (or JSON-encode a JobSpec's input)."
                : "It was written by a different version of the job's type; give renamed or new fields defaults, or resubmit the graph."
            throw DurableError(
                code: .decoding, jobs: [job],
                message:
                    "the stored \(what) of job '\(job)' (kind '\(kind)') does not decode as \(Value.self): \(notJSON ? "the bytes are not valid JSON" : describe(error)). \(advice)",
                underlying: error)
        }
    }

    /// What did not match, as a phrase without a final period.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return trimmed("\(error)") }
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "the top level" : "'" + keys.joined(separator: ".") + "'"
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "field '\(key.stringValue)' is missing at \(path(context))"
        case .typeMismatch(let type, let context): return "\(path(context)) is not \(expected(type))"
        case .valueNotFound(let type, let context): return "\(path(context)) is null, not \(expected(type))"
        case .dataCorrupted(let context): return "\(path(context)): \(trimmed(context.debugDescription))"
        @unknown default: return trimmed("\(error)")
        }
    }

    /// What a value of `type` looks like in JSON, for messages: "a number", "a string", "an array" ….
    static func expected(_ type: Any.Type) -> String {
        let name = "\(type)"
        switch name {
        case "Int", "Int8", "Int16", "Int32", "Int64", "UInt", "UInt8", "UInt16", "UInt32", "UInt64":
            return "a whole number"
        case "Double", "Float", "Decimal": return "a number"
        case "String": return "a string"
        case "Bool": return "true or false"
        default:
            if name.hasPrefix("Array<") { return "an array" }
            if name.hasPrefix("Dictionary<") { return "an object" }
            return "a value of type \(name)"
        }
    }

    /// `text` without a trailing period (the message adds its own).
    static func trimmed(_ text: String) -> String {
        var text = text
        while text.hasSuffix(".") { text.removeLast() }
        return text
    }
}

/// Thrown from a durable job's `run` to fail its job now, without the attempts its retry policy has
/// left: for what no later attempt can change (a file that is not in the expected format, a record
/// that is gone, input that a person has to correct). The job's last error is the wrapped error's text
/// (a ``DurableError``'s or `JobError`'s message, else its description), and its dependents are
/// cancelled as for any failed job. A cancellation request or a lost lease still counts first: this
/// only changes what a failure of the attempt means.
///
/// ```swift
/// struct ParseReport: DurableJob {
///     static let kind = "reports.parse"
///     func run(_ path: String, context: DurableJobContext) async throws -> Int {
///         let data = try Data(contentsOf: URL(fileURLWithPath: path))  // an I/O error is retried
///         guard let text = String(data: data, encoding: .utf8) else {
///             throw PermanentFailure("\(path) is not UTF-8 text; no retry will change that")
///         }
///         return text.split(separator: "\n").count
///     }
/// }
/// ```
///
/// Other errors fail the attempt, to be retried while the job's ``RetryPolicy`` allows — except an input
/// that does not decode (``DurableError/Code/decoding``), which fails the job at once as well.
public struct PermanentFailure: Error, Sendable, CustomStringConvertible {
    /// The error that no retry can change.
    public let underlying: any Error

    /// Wraps `error`: the job fails with its text, without retries.
    public init(_ error: any Error) { underlying = (error as? PermanentFailure)?.underlying ?? error }

    /// A failure that says `message`.
    public init(_ message: String) { underlying = Message(text: message) }

    public var description: String { "\(underlying)" }

    private struct Message: Error, CustomStringConvertible {
        let text: String
        var description: String { text }
    }
}

/// Thrown from a durable job's `run` to put its job back, to run again after `wait`, without spending
/// an attempt of its retry policy: for a job that finds it cannot do its work yet (a rate limit to wait
/// out, a file not there yet, a service in maintenance). It is not a failure: the job's last error,
/// its dependents and its retry policy's backoff are as they were.
///
/// Every claim still gets its own attempt number, so a snooze raises both the job's attempt count and
/// its ``DurableJobContext/maxAttempts`` by one (up to 2,147,483,647): a job of 3 attempts that snoozed twice runs its
/// attempts 3, 4 and 5 of 5 as it would have run 1, 2 and 3 (as River and Oban count a snooze). Its
/// attempt history lists the snoozes, each with its wait. The job waits out of claims' way, as a retry
/// backing off does; a cancellation request or a lost lease still counts first.
///
/// ```swift
/// struct SendDigest: DurableJob {
///     static let kind = "mail.digest"
///     func run(_ user: Int, context: DurableJobContext) async throws -> Bool {
///         // Quiet hours: try again in an hour, without using up an attempt.
///         if Calendar.current.component(.hour, from: Date()) < 7 { throw Snooze(for: .seconds(3_600)) }
///         return true
///     }
/// }
/// ```
///
/// A wait below zero, or one so long the stores cannot keep it (over ``maximumWait``), fails the
/// attempt instead, with a message that says so.
public struct Snooze: Error, Sendable, CustomStringConvertible {
    /// How long the job waits before its next attempt.
    public let wait: Duration

    /// The longest wait a store keeps: 100 years.
    public static let maximumWait: Duration = .seconds(100 * 365 * 24 * 3_600)

    /// Puts the job back to run again after `wait` (`.zero`: as soon as a worker claims it).
    public init(for wait: Duration) { self.wait = wait }

    public var description: String { "snoozed for \(Snooze.text(wait))" }

    /// Why `wait` cannot be kept, or nil when it can.
    var refusal: String? {
        if wait < .zero { return "Snooze(for:) was given \(Snooze.text(wait)); a snooze waits zero seconds or more" }
        if wait > Snooze.maximumWait {
            return
                "Snooze(for:) was given \(Snooze.text(wait)), over the \(Snooze.text(Snooze.maximumWait)) a store keeps"
        }
        return nil
    }

    /// `wait` within what a store keeps (a store given a report with another wait keeps this one).
    package static func storable(_ wait: Duration) -> Duration { min(max(wait, .zero), maximumWait) }

    /// `wait` as people read it: "90 s", "1.5 s", "0.25 s".
    static func text(_ wait: Duration) -> String {
        let seconds = wait.seconds
        return seconds == seconds.rounded() && abs(seconds) < 1e15 ? "\(Int64(seconds)) s" : "\(seconds) s"
    }
}
