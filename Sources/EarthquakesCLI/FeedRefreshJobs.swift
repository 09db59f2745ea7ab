import Baton
import BatonDurable
import BatonNetworking
import EarthquakesKit
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Step 1 of a feed in a durable refresh: downloads an http(s) feed to a file next to the database
/// (a feed that is already a file is used where it is). The file stays until the whole refresh has
/// finished, so a refresh resumed after a crash parses and imports it without downloading it again.
struct FetchFeed: DurableJob {
    static let kind = "earthquakes.fetch"

    struct Input: Codable, Sendable {
        /// What the user gave: an http(s) address, a file URL or a path.
        var feed: String
        /// Where to download an http(s) feed.
        var file: String
    }

    struct Output: Codable, Sendable {
        var feed: String
        /// The feed's file: the download, or the user's own file.
        var file: String
    }

    let session: URLSession
    let timeout: Duration
    let totalTimeout: Duration?
    /// Shows the download's progress (on a terminal).
    var display: FeedsProgressDisplay?
    /// Told of each attempt that fails (`watch` says so as it goes), with the feed.
    var onFailure: (@Sendable (_ feed: String, _ error: any Error) -> Void)?

    /// The feed a "204 No Content" response stands for.
    static let noEvents = #"{"type":"FeatureCollection","features":[]}"#

    func run(_ input: Input, context: DurableJobContext) async throws -> Output {
        do {
            return try await fetch(input)
        } catch {
            if !Task.isCancelled { onFailure?(input.feed, error) }
            throw error
        }
    }

    private func fetch(_ input: Input) async throws -> Output {
        guard case .url(let url) = try EarthquakesCLI.source(input.feed) else {
            throw CLIError("--feed \(input.feed): use an http(s) address or a file path")
        }
        let destination = URL(fileURLWithPath: input.file)
        if url.isFileURL {
            try EarthquakesCLI.checkFeedFile(url.path)
            // A pipe (`<(command)`, `/dev/stdin`) can be read once: its bytes are kept as a download is, for
            // the parse and the import that both read the file.
            var status = stat()
            guard stat(url.path, &status) == 0, status.st_mode & S_IFMT != S_IFREG else {
                return Output(feed: input.feed, file: url.path)
            }
            // Read off Swift's pool (a poll loop), stopped by a cancel of this attempt (Ctrl-C).
            let cancelled = Protected(false)
            let bytes = try await withTaskCancellationHandler {
                try await offThePool {
                    try ParseFeedJob.read(url, idleTimeout: timeout) { cancelled.withLock { $0 } }
                }
            } onCancel: {
                cancelled.withLock { $0 = true }
            }
            try FileManager.default.createDirectory(
                at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
            try bytes.write(to: destination, options: .atomic)
            return Output(feed: input.feed, file: destination.path)
        }
        try FileManager.default.createDirectory(
            at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        var progress: URLSessionTaskJob.ProgressHandler?
        if let display {
            let feed = input.feed
            progress = { received, expected in display.downloading(feed, received: received, expected: expected) }
        }
        let download = FeedDownload.job(
            url: url, to: destination, session: session, timeout: totalTimeout, idleTimeout: timeout,
            progress: progress)
        defer { display?.downloaded(input.feed) }
        let queue = JobQueue(name: "fetch \(input.feed)")
        queue.add(download)
        switch await download.outcomeCancellingWithTask() {
        case .succeeded:
            // "204 No Content" from an FDSN event query (it matched no event): a feed of no events.
            if download.statusCode == 204, isFDSNEventQuery(url) {
                try Data(FetchFeed.noEvents.utf8).write(to: destination, options: .atomic)
            }
            return Output(feed: input.feed, file: destination.path)
        case .failed(let error) where isFDSNNoData(error, url: url):
            // The same with `nodata=404`: "404 Not Found" when it matched no event.
            try Data(FetchFeed.noEvents.utf8).write(to: destination, options: .atomic)
            return Output(feed: input.feed, file: destination.path)
        case .failed(let error):
            let advised = EarthquakesCLI.withAdvice(error)
            throw Self.isFinal(error) ? PermanentFailure(advised) : advised
        case .cancelled(let reason): throw reason
        }
    }

    /// Whether trying the download again now cannot help: a status that says the request is wrong (4xx
    /// but 408) or that the client asks too often (429: three tries within a second and a half answered a
    /// server's `Retry-After: 120`; the next refresh or watch check asks again), a time limit that passed
    /// (the limits given are for the feed,
    /// not for each try: three tries of a stalled server took three times `--total-timeout`), a
    /// response over the size limit, a file that cannot be written. Connection failures and 5xx are
    /// tried again.
    static func isFinal(_ error: any Error) -> Bool {
        guard let network = error as? NetworkError else { return false }
        switch network.code {
        case .httpStatus:
            guard let status = network.statusCode else { return false }
            return (400..<500).contains(status) && status != 408
        case .timedOut, .tooLarge, .file: return true
        default: return false
        }
    }
}

/// Step 2: parses the downloaded file, so that a feed that is not GeoJSON fails before any import.
/// Its output is small (the file and its counts): the import parses the file again rather than
/// storing every earthquake in the job store.
struct ParseFeed: DurableJob {
    static let kind = "earthquakes.parse"
    typealias Input = FetchFeed.Output

    struct Output: Codable, Sendable {
        var feed: String
        var file: String
        var events: Int
        var skipped: Int
    }

    let strict: Bool
    /// Told of each attempt that fails, with the feed.
    var onFailure: (@Sendable (_ feed: String, _ error: any Error) -> Void)?

    func run(_ input: Input, context: DurableJobContext) async throws -> Output {
        let strict = strict
        let feed: Feed
        do {
            feed = try await Self.stoppably { isCancelled in
                try Self.read(input.file, strict: strict, isCancelled: isCancelled)
            }
        } catch let error as FeedError {
            // The file that was downloaded is what it is: parsing it again gives the same answer.
            onFailure?(input.feed, error)
            throw PermanentFailure(error)
        } catch {
            // A cancel (Ctrl-C) stops the parse: nothing went wrong with the feed.
            if !(error is CancellationError) { onFailure?(input.feed, error) }
            throw error
        }
        await EarthquakesCLI.testPause("parsed")
        return Output(
            feed: input.feed, file: input.file, events: feed.earthquakes.count, skipped: feed.skippedFeatures.count)
    }

    /// The feed in the file at `path`; parsed for an import into `store` when given (the features it holds
    /// exactly are not decoded, and the others are fingerprinted with its key).
    /// `isCancelled` stops the parse within a few hundred features (`CancellationError`).
    static func read(
        _ path: String, strict: Bool, for store: EarthquakeStore? = nil, isCancelled: (@Sendable () -> Bool)? = nil
    ) throws -> Feed {
        let data = try ParseFeedJob.read(URL(fileURLWithPath: path))
        guard let store else { return try FeedParser(strict: strict).parse(data, isCancelled: isCancelled) }
        return try store.parseForImport(data, parser: FeedParser(strict: strict), isCancelled: isCancelled)
    }

    /// Runs `body` off Swift's pool, its `isCancelled` saying yes once this task is cancelled: a parse of a
    /// big feed (seconds) stops at a Ctrl-C instead of holding the worker's shutdown until it ends.
    static func stoppably<T: Sendable>(
        _ body: @escaping @Sendable (_ isCancelled: @escaping @Sendable () -> Bool) throws -> T
    ) async throws -> T {
        let cancelled = Protected(false)
        return try await withTaskCancellationHandler {
            try await offThePool { try body { cancelled.withLock { $0 } } }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
    }
}

/// Step 3: imports the feed in the transaction that records the job's completion (both in the
/// database), so a feed is imported once per refresh whatever is killed when. The import is an upsert
/// all the same: the same feed imported by another refresh leaves the same rows. Runs in the exclusivity
/// category ``FeedRefresh/importCategory`` (limit 1), so imports of a refresh never wait on each other's
/// database lock.
struct ImportFeed: DurableJob {
    static let kind = "earthquakes.import"
    typealias Input = ParseFeed.Output

    struct Output: Codable, Sendable {
        var feed: String
        var inserted: Int
        var updated: Int
        var unchanged: Int
        var duplicates: Int
        /// The ids repeated (optional: outputs recorded by older versions have none).
        var duplicateIDs: [String]?
        var skipped: Int
        var otherTypes: [String: Int]
        var warnings: [String]
        /// Whether the feed itself holds sample events (a saved sample feed).
        var hasSample: Bool
        /// Events marked deleted, and stored copies removed (optional: outputs recorded by older versions
        /// have neither).
        var deleted: Int?
        var removed: Int?
        /// Stored rows of events now listed under another id, replaced (optional, as above).
        var merged: Int?

        var summary: ImportSummary {
            ImportSummary(
                inserted: inserted, updated: updated, unchanged: unchanged, duplicates: duplicates,
                duplicateIDs: duplicateIDs ?? [], skipped: skipped,
                otherTypes: otherTypes, deleted: deleted ?? 0, removed: removed ?? 0, merged: merged ?? 0)
        }
    }

    let store: EarthquakeStore
    let strict: Bool
    let now: @Sendable () -> Date
    /// The imports of this process (what a Ctrl-C needs to know of them).
    var imports = RefreshImports()
    /// Told of each attempt that fails (not of a cancelled one), with the feed.
    var onFailure: (@Sendable (_ feed: String, _ error: any Error) -> Void)?

    func run(_ input: Input, context: DurableJobContext) async throws -> Output {
        do {
            return try await importFeed(input, context: context)
        } catch {
            if !(error is CancellationError) { onFailure?(input.feed, error) }
            throw error
        }
    }

    private func importFeed(_ input: Input, context: DurableJobContext) async throws -> Output {
        let (store, strict, now, imports) = (store, strict, now, imports)
        // Cancelling the attempt (Ctrl-C stops the worker) rolls the import back, unless it had begun to
        // commit: then it ends, and `imports` knows it is in even if the worker never records it.
        let gate = ImportCommitGate()
        imports.began(gate)
        defer { imports.ended(gate) }
        return try await withTaskCancellationHandler {
            let feed = try await ParseFeed.stoppably { isCancelled in
                try ParseFeed.read(input.file, strict: strict, for: store, isCancelled: isCancelled)
            }
            // The import, its line in the refresh log and this job's completion are one transaction of the
            // database (the job store lives in it): a refresh killed at any moment has imported the feed and
            // recorded it, or neither. A cancel reaches the transaction through the gate only: not through
            // the task, whose cancellation would make GRDB interrupt a `COMMIT` the gate had let begin.
            let committing = Protected(false)
            let transaction = Task {
                try await context.complete { db -> Output in
                    let summary = try store.importFeed(feed, in: db, commitGate: gate)
                    // A feed none of whose features could be read fails its refresh (the report says so): it
                    // is not recorded as one, as a single feed's is not.
                    if EarthquakesCLI.unreadableFeed(summary, feed: input.feed) == nil {
                        try store.recordRefresh(
                            RefreshRecord(date: now(), source: input.feed, summary: summary), in: db)
                    }
                    TestPause.at("before-commit")
                    // The last moment a cancel rolls the import back; from here on it is too late.
                    guard gate.beginCommit() else { throw CancellationError() }
                    committing.withLock { $0 = true }
                    return Output(
                        feed: input.feed, inserted: summary.inserted, updated: summary.updated,
                        unchanged: summary.unchanged, duplicates: summary.duplicates,
                        duplicateIDs: summary.duplicateIDs, skipped: summary.skipped, otherTypes: summary.otherTypes,
                        warnings: feed.warnings.map(\.description),
                        hasSample: feed.containsEarthquake(ofNetwork: "sample"), deleted: summary.deleted,
                        removed: summary.removed, merged: summary.merged)
                }
            }
            do {
                let output = try await transaction.value
                gate.endCommit(succeeded: true)
                await EarthquakesCLI.testPause("committed")
                imports.committed(output)
                return output
            } catch {
                if committing.withLock({ $0 }) { gate.endCommit(succeeded: false) }
                if error is CancellationError || (error as? StoreError)?.code == .cancelled {
                    throw CancellationError()
                }
                throw error
            }
        } onCancel: {
            gate.cancel()
        }
    }
}

/// The imports of a refresh of several feeds in this process: the one running (a second Ctrl-C waits
/// for its commit to end, if it began, before ending the process) and those that committed (a Ctrl-C
/// can stop the worker before it records an import that committed: it is in all the same).
///
/// ## Thread safety
/// `Sendable`: one lock guards the state; gates are told outside it.
final class RefreshImports: Sendable {
    private struct State {
        var running: [ObjectIdentifier: ImportCommitGate] = [:]
        var committed: [String: ImportFeed.Output] = [:]
    }

    private let state = Protected(State())

    func began(_ gate: ImportCommitGate) {
        state.withLock { $0.running[ObjectIdentifier(gate)] = gate }
    }

    func ended(_ gate: ImportCommitGate) {
        _ = state.withLock { $0.running.removeValue(forKey: ObjectIdentifier(gate)) }
    }

    func committed(_ output: ImportFeed.Output) {
        state.withLock { $0.committed[output.feed] = output }
    }

    /// The imports that committed in this process, by feed.
    var committedOutputs: [String: ImportFeed.Output] { state.withLock { $0.committed } }

    /// Runs `body` once every running import's outcome is known (see ``ImportCommitGate/whenSettled(_:)``),
    /// with whether one of them committed.
    func whenSettled(_ body: @escaping @Sendable (_ committedAny: Bool) -> Void) {
        let gates = state.withLock { Array($0.running.values) }
        let remaining = Protected((count: gates.count, committed: false))
        guard !gates.isEmpty else { return body(false) }
        for gate in gates {
            gate.whenSettled { settlement in
                let done = remaining.withLock { left -> Bool? in
                    left.count -= 1
                    left.committed = left.committed || settlement == .committed
                    return left.count == 0 ? left.committed : nil
                }
                if let done { body(done) }
            }
        }
    }
}

/// Runs blocking work (parsing, a database transaction that may wait for another process's lock) on a
/// thread of its own, not on one of the few threads of Swift concurrency's pool. Not on
/// `DispatchQueue.global()` either: on Linux that *is* the pool. A serial queue made for the call is
/// served by Dispatch's overcommitting pool, which gives it a thread at once.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue(label: "earthquakes.blocking").async { continuation.resume(with: Result { try body() }) }
    }
}
