public import Baton
public import BatonNetworking
public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Gets earthquakes into a store: download → parse → import, as jobs.
///
/// ```swift
/// let get = GetEarthquakes(source: .url(feedURL), store: store, timeout: .seconds(30))
/// let summary = try await get.run()     // "1349 earthquakes: 1349 inserted, 0 updated, 0 unchanged"
/// ```
///
/// For an `http`/`https` source it runs, in order:
/// 1. a reachability check of the server (``ReachabilityCondition``), which fails fast with
///    "cannot reach HOST port PORT (…)" or "cannot resolve the host name …";
/// 2. an ``HTTPDownloadJob`` with the deadline ``timeout`` ("no complete response … within N seconds"),
///    that fails on an HTTP error status ("HTTP 503 (…) from http://…") and writes a temporary file
///    atomically in ``workFolder``;
/// 3. a ``ParseFeedJob`` (a ``FeedError`` says where the feed broke);
/// 4. an ``ImportFeedJob`` on ``ImportFeedJob/serialQueue``, so only one import runs at a time in the
///    process and a second refresh waits for the first one's import (a ``StoreError`` on failure).
///
/// A file URL or in-memory data skips steps 1 and 2. When a step does not succeed, the later steps
/// are cancelled before they start, so a failed or cancelled refresh never touches the store; and
/// because the import is one transaction, the store is either fully updated or exactly as it was.
/// The downloaded file is deleted when ``run()`` returns.
///
/// - Note: Temporary shape. Once Baton's conditions, exclusivity and timeouts are merged, this becomes a
///   group job whose download has the reachability condition and whose import is mutually exclusive.
///
/// ## Thread safety
/// ``run()`` may be called once, from any task; ``cancel()`` from any thread at any time.
public final class GetEarthquakes: Sendable {
    /// Where the feed comes from.
    ///
    /// ## Thread safety
    /// A `Sendable` value.
    public enum Source: Sendable, CustomStringConvertible {
        /// An `http`/`https` address (downloaded) or a `file` URL (read).
        case url(URL)
        /// Bytes in memory, with a label for messages (for example "the sample feed").
        case data(Data, label: String)

        public var description: String {
            switch self {
            case .url(let url): url.isFileURL ? url.path : url.absoluteString
            case .data(_, let label): label
            }
        }
    }

    /// What a refresh is doing, for a progress display.
    ///
    /// ## Thread safety
    /// A `Sendable` value.
    public enum Progress: Sendable, Equatable {
        /// Checking that the server can be reached.
        case checkingHost(String)
        /// Bytes downloaded so far, and the total when the server announced it.
        case downloading(received: Int64, expected: Int64?)
        /// Parsing the feed.
        case parsing
        /// Importing this many earthquakes, in one transaction. Called on the import queue.
        case importing(count: Int)
        /// The import committed.
        case imported(ImportSummary)
    }

    /// Where the feed comes from.
    public let source: Source
    /// The store that receives the earthquakes.
    public let store: EarthquakeStore
    /// The deadline of the download, from its start.
    public let timeout: Duration
    /// The folder the download is written to (and removed from when ``run()`` returns).
    public let workFolder: URL
    private let ownsWorkFolder: Bool

    private let reachability: AsyncJob?
    private let download: HTTPDownloadJob?
    private let parse: ParseFeedJob
    private let importer: ImportFeedJob
    private let queue: JobQueue
    private let importQueue: JobQueue

    /// The session used by default: ephemeral, so a refresh never answers from a cache.
    public static let defaultSession = URLSession(configuration: .ephemeral)

    /// Prepares a refresh; nothing happens until ``run()``.
    ///
    /// - Parameters:
    ///   - source: An http(s) or file URL, or bytes.
    ///   - store: Where to import.
    ///   - timeout: The deadline of the download (and the longest the reachability check may take).
    ///   - session: The session that downloads.
    ///   - workFolder: Where the download is written; a new folder in the temporary directory by default.
    ///   - importQueue: Where the import runs; ``ImportFeedJob/serialQueue`` by default.
    ///   - activity: Added to the network jobs, to count them while they run.
    ///   - progress: Told what happens; called from background threads, never under a lock.
    public init(
        source: Source,
        store: EarthquakeStore,
        timeout: Duration = .seconds(30),
        session: URLSession = GetEarthquakes.defaultSession,
        workFolder: URL? = nil,
        importQueue: JobQueue = ImportFeedJob.serialQueue,
        activity: NetworkActivityObserver? = nil,
        progress: (@Sendable (Progress) -> Void)? = nil
    ) {
        self.source = source
        self.store = store
        self.timeout = timeout
        self.workFolder =
            workFolder
            ?? FileManager.default.temporaryDirectory.appendingPathComponent(
                "baton-earthquakes-\(UUID().uuidString)", isDirectory: true)
        self.ownsWorkFolder = workFolder == nil
        self.queue = JobQueue(name: "get earthquakes", maxConcurrentJobs: 2)
        self.importQueue = importQueue

        let input: ParseFeedJob.Input
        switch source {
        case .url(let url) where !url.isFileURL:
            let condition = ReachabilityCondition(url: url, timeout: min(timeout, .seconds(10)))
            let host = condition.map { "\($0.host) port \($0.port)" } ?? url.absoluteString
            reachability = condition.map { condition in
                AsyncJob(name: condition.name) { _ in
                    progress?(.checkingHost(host))
                    try await condition.check()
                }
            }
            let file = self.workFolder.appendingPathComponent("feed.geojson")
            var downloadProgress: URLSessionTaskJob.ProgressHandler?
            if let progress {
                downloadProgress = { received, expected in
                    progress(.downloading(received: received, expected: expected))
                }
            }
            let download = HTTPDownloadJob(
                url: url, to: file, session: session, timeout: timeout, progress: downloadProgress)
            if let reachability { download.addDependency(reachability) }
            self.download = download
            input = .file(file)
        case .url(let url):
            reachability = nil
            download = nil
            input = .file(url)
        case .data(let data, _):
            reachability = nil
            download = nil
            input = .data(data)
        }

        parse = ParseFeedJob(input: input)
        if let download { parse.addDependency(download) }
        if let progress { parse.onStart { _ in progress(.parsing) } }
        var willImport: (@Sendable (Int) -> Void)?
        if let progress { willImport = { count in progress(.importing(count: count)) } }
        let importer = ImportFeedJob(store: store, parse: parse, willImport: willImport)
        if let progress {
            importer.onFinish { _ in
                if let summary = importer.summary { progress(.imported(summary)) }
            }
        }
        self.importer = importer
        if let activity {
            reachability?.addObserver(activity)
            download?.addObserver(activity)
        }

        // A step that did not succeed cancels the next one before it starts (its dependents are released
        // only after its observers ran), which cancels the one after, and so on.
        let steps = self.steps
        for (step, next) in zip(steps, steps.dropFirst()) {
            step.onFinish { outcome in
                if !outcome.isSucceeded { next.cancel(reason: CancellationError()) }
            }
        }
    }

    private var steps: [Job] {
        [reachability, download].compactMap { $0 } + [parse, importer]
    }

    /// The jobs of the refresh, in order (reachability check and download for http sources, then parse
    /// and import), for example to observe them.
    public var jobs: [Job] { steps }

    /// The parsed feed (with its metadata and warnings), once parsing succeeded.
    public var feed: Feed? { parse.feed }

    /// Runs the refresh and returns what the import did.
    ///
    /// Cancelling the calling task cancels the refresh.
    ///
    /// - Throws: The error of the first step that failed: a ``NetworkError`` (unreachable, HTTP status,
    ///   timeout), a ``FeedError`` or ``FeedFileError``, a ``StoreError``; `CancellationError` if cancelled.
    /// - Precondition: Called once.
    public func run() async throws -> ImportSummary {
        if download != nil {
            try FileManager.default.createDirectory(at: workFolder, withIntermediateDirectories: true)
        }
        defer { removeDownload() }
        queue.add(steps.dropLast())
        importQueue.add(importer)
        await withTaskCancellationHandler {
            for step in steps { _ = await step.outcome }
        } onCancel: {
            self.cancel()
        }
        for step in steps {
            switch step.finishedOutcome {
            case .succeeded?: continue
            case .failed(let error)?: throw error
            case .cancelled(let reason)?: throw reason
            case nil: throw CancellationError()
            }
        }
        guard let summary = importer.summary else { throw CancellationError() }
        return summary
    }

    /// Cancels the refresh: a running download stops, and no later step starts.
    public func cancel() {
        for step in steps { step.cancel(reason: CancellationError()) }
    }

    private func removeDownload() {
        guard let download else { return }
        // The caller's folder is left in place; a folder of our own goes entirely.
        try? FileManager.default.removeItem(at: ownsWorkFolder ? workFolder : download.destination)
    }
}
