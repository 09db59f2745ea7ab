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
/// It is one `GroupJob` (``job``) whose children are, for an `http`/`https` source:
/// 1. a download job (``FeedDownload``: AsyncHTTPClient on Linux, `URLSession` elsewhere) guarded by a
///    `ReachabilityCondition` (it fails fast with "cannot reach
///    HOST port PORT (…)" or "cannot resolve the host name …" before any transfer; through a proxy named
///    by `http_proxy`/`https_proxy` it checks the proxy), with the idle timeout ``timeout`` ("no data
///    from … within N seconds") and the optional ``totalTimeout``, failing on an HTTP error status
///    ("HTTP 503 (…) from http://…") and writing a temporary file atomically in ``workFolder``;
/// 2. a ``ParseFeedJob`` (a ``FeedError`` says where the feed broke), which does not decode the features
///    the store already holds exactly (see ``EarthquakeStore/importFeed(_:whileWaiting:commitGate:)-(Feed,_,_)``), so
///    re-importing an unchanged feed costs little more than reading it;
/// 3. an ``ImportFeedJob``, which holds the ``EarthquakeImport`` exclusivity category, so only one
///    import runs at a time in its `ExclusivityScope` and a second refresh waits for the first one's
///    import (a ``StoreError`` on failure).
///
/// A file URL or in-memory data skips the download. When a step does not succeed, the later steps are
/// cancelled before they start, so a failed or cancelled refresh never touches the store; and because
/// the import is one transaction, the store is either fully updated or exactly as it was. The
/// downloaded file is deleted when ``run()`` returns.
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

        /// The address, for a URL.
        var address: URL? { if case .url(let url) = self { url } else { nil } }

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
        /// The import waits for another process that is writing to the same database (usually another
        /// refresh of it). Reported once per wait; ``importing(count:)`` is not repeated afterwards.
        case waitingForDatabase
        /// The import committed.
        case imported(ImportSummary)
    }

    /// Where the feed comes from.
    public let source: Source
    /// The store that receives the earthquakes.
    public let store: EarthquakeStore
    /// How long the download may go without receiving a byte (a slow but steady download is never cut).
    public let timeout: Duration
    /// A limit on the whole download, from its start; `nil` (the default) for none.
    public let totalTimeout: Duration?
    /// The folder the download is written to (and removed from when ``run()`` returns).
    public let workFolder: URL
    private let ownsWorkFolder: Bool

    private let download: (any FeedDownloading)?
    private let parse: ParseFeedJob
    private let importer: ImportFeedJob
    /// The refresh as one group job of the steps above.
    public let job: GroupJob
    private let queue: JobQueue

    /// The session used by default: ephemeral, so a refresh never answers from a cache.
    public static let defaultSession = URLSession(configuration: .ephemeral)

    /// Prepares a refresh; nothing happens until ``run()``.
    ///
    /// - Parameters:
    ///   - source: An http(s) or file URL, or bytes.
    ///   - store: Where to import.
    ///   - timeout: How long the download may go without receiving a byte (the reachability check takes
    ///     at most this long too, and at most 10 seconds).
    ///   - totalTimeout: A limit on the whole download; `nil` for none.
    ///   - proxies: The proxies the download goes through (by default from `http_proxy`, `https_proxy` and
    ///     `no_proxy`): the reachability check then checks the proxy, not the feed's server.
    ///   - session: The session that downloads.
    ///   - workFolder: Where the download is written; a new folder in the temporary directory by default.
    ///   - exclusivityScope: Where imports take turns; process-wide by default.
    ///   - activity: Added to the network jobs, to count them while they run.
    ///   - strict: `true` to reject a feed with any unreadable feature (see ``FeedParser``); by default
    ///     such features are skipped and listed in ``Feed/warnings``.
    ///   - progress: Told what happens; called from background threads, never under a lock.
    ///   - instruments: What watches the jobs (metrics, traces, a timeline; see `JobInstrument`).
    ///     Defaults to `JobQueue.defaultInstruments`.
    public init(
        source: Source,
        store: EarthquakeStore,
        timeout: Duration = .seconds(30),
        totalTimeout: Duration? = nil,
        proxies: ProxySettings = ProxySettings(),
        session: URLSession = GetEarthquakes.defaultSession,
        workFolder: URL? = nil,
        exclusivityScope: ExclusivityScope = .processWide,
        activity: NetworkActivityObserver? = nil,
        strict: Bool = false,
        progress: (@Sendable (Progress) -> Void)? = nil,
        instruments: [any JobInstrument]? = nil
    ) {
        self.source = source
        self.store = store
        self.timeout = timeout
        self.totalTimeout = totalTimeout
        self.workFolder =
            workFolder
            ?? FileManager.default.temporaryDirectory.appendingPathComponent(
                "baton-earthquakes-\(UUID().uuidString)", isDirectory: true)
        self.ownsWorkFolder = workFolder == nil
        // Dedicated threads: parsing and the SQLite import are synchronous bodies that block on I/O (and
        // on the file's lock), which must not hold a thread of Swift concurrency's pool — on Linux that
        // is Dispatch's global queue, which `.shared` runs bodies on.
        self.queue = JobQueue(
            name: "get earthquakes", exclusivityScope: exclusivityScope, instruments: instruments,
            workerThreads: .dedicated)

        let input: ParseFeedJob.Input
        switch source {
        case .url(let url) where !url.isFileURL:
            let file = self.workFolder.appendingPathComponent("feed.geojson")
            var downloadProgress: URLSessionTaskJob.ProgressHandler?
            if let progress {
                downloadProgress = { received, expected in
                    progress(.downloading(received: received, expected: expected))
                }
            }
            // AsyncHTTPClient on Linux, where URLSession keeps a core busy while a download trickles.
            let download = FeedDownload.job(
                url: url, to: file, session: session, timeout: totalTimeout, idleTimeout: timeout, proxies: proxies,
                progress: downloadProgress)
            if let reachability = ReachabilityCondition(url: url, timeout: min(timeout, .seconds(10)), proxies: proxies)
            {
                download.addCondition(ReportingReachability(reachability: reachability, progress: progress))
            }
            self.download = download
            input = .file(file)
        case .url(let url):
            download = nil
            input = .file(url)
        case .data(let data, _):
            download = nil
            input = .data(data)
        }

        // An FDSN event query that matches no event is answered "204 No Content": no events, not an error.
        var noContent: (@Sendable () -> Bool)?
        if let download = self.download {
            let url: URL? = if case .url(let url) = source { url } else { nil }
            noContent = { download.statusCode == 204 && isFDSNEventQuery(url) }
        }
        parse = ParseFeedJob(
            input: input, parser: FeedParser(strict: strict), store: store, noContent: noContent, idleTimeout: timeout)
        if let download { parse.addDependency(download) }
        if let progress { parse.onStart { _ in progress(.parsing) } }
        var willImport: (@Sendable (Int) -> Void)?
        var whileWaiting: (@Sendable () -> Void)?
        if let progress {
            willImport = { count in progress(.importing(count: count)) }
            whileWaiting = { progress(.waitingForDatabase) }
        }
        let importer = ImportFeedJob(store: store, parse: parse, willImport: willImport, whileWaiting: whileWaiting)
        if let progress {
            importer.onFinish { _ in
                if let summary = importer.summary { progress(.imported(summary)) }
            }
        }
        self.importer = importer
        if let activity { download?.addObserver(activity) }

        // A step that did not succeed cancels the next one before it starts (its dependents are released
        // only after its observers ran), which cancels the one after, and so on.
        let steps = [download].compactMap { $0 } + [parse, importer]
        job = GroupJob(name: "get earthquakes from \(source)", children: steps)
        for (step, next) in zip(steps, steps.dropFirst()) {
            step.onFinish { outcome in
                if !outcome.didSucceed { next.cancel(reason: CancellationError()) }
            }
        }
    }

    private var steps: [Job] {
        [download].compactMap { $0 } + [parse, importer]
    }

    /// The steps of the refresh, in order (the download for http sources, then parse and import), for
    /// example to observe them.
    public var jobs: [Job] { steps }

    /// The parsed feed (with its metadata and warnings), once parsing succeeded.
    public var feed: Feed? { parse.feed }

    /// Runs the refresh and returns what the import did.
    ///
    /// Cancelling the calling task cancels the refresh.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/readOnly`` before anything else when the
    ///   database cannot be written; then the error of the first step that failed: a `NetworkError` (unreachable, HTTP status,
    ///   timeout), a ``FeedError`` or ``FeedFileError``, a ``StoreError``; `CancellationError` if cancelled.
    /// - Precondition: Called once.
    public func run() async throws -> ImportSummary {
        // A database that cannot be written is reported before anything is downloaded.
        try store.checkWritable()
        if download != nil {
            try FileManager.default.createDirectory(at: workFolder, withIntermediateDirectories: true)
        }
        defer { removeDownload() }
        queue.add(job)
        _ = await job.outcomeCancellingWithTask()
        for step in steps {
            switch step.outcomeIfDecided {
            case .succeeded?: continue
            case .failed(let error)? where step === download && isFDSNNoData(error, url: source.address):
                return ImportSummary()  // an FDSN query that matched no event, with `nodata=404`
            case .failed(let error as JobError)? where error.code == .conditionFailed && error.underlying != nil:
                throw error.underlying!  // a failed reachability check: its own error says what is wrong
            case .failed(let error)?: throw error
            case .cancelled(let reason)?: throw reason
            case nil: throw CancellationError()
            }
        }
        guard let summary = importer.summary else { throw CancellationError() }
        return summary
    }

    /// Cancels the refresh: a running download stops, no later step starts, and a running import rolls
    /// back — unless it had already begun to commit (see ``ImportCommitGate``).
    ///
    /// - Returns: ``ImportCommitGate/CancelResult/willRollBack`` when the store is left as it was (``run()``
    ///   throws `CancellationError`), ``ImportCommitGate/CancelResult/tooLate`` when the import had begun
    ///   to commit (``run()`` returns its summary).
    @discardableResult
    public func cancel() -> ImportCommitGate.CancelResult {
        let result = importer.commitGate.cancel()
        job.cancel(reason: CancellationError())
        return result
    }

    /// Decides between a cancel and the import's commit; ``ImportCommitGate/whenSettled(_:)`` says
    /// whether the import committed, once it is known.
    public var commitGate: ImportCommitGate { importer.commitGate }

    private func removeDownload() {
        guard let download else { return }
        // The caller's folder is left in place; a folder of our own goes entirely.
        try? FileManager.default.removeItem(at: ownsWorkFolder ? workFolder : download.destination)
    }
}

/// The reachability check, telling the progress display first.
private struct ReportingReachability: JobCondition {
    let reachability: ReachabilityCondition
    let progress: (@Sendable (GetEarthquakes.Progress) -> Void)?

    var name: String { reachability.name }

    func evaluate(for job: Job) async -> ConditionResult {
        progress?(.checkingHost("\(reachability.host) port \(reachability.port)"))
        return await reachability.evaluate(for: job)
    }
}

/// Whether `url` is an FDSN event web service query (`…/fdsnws/event/1/query?…`), which answers
/// "204 No Content" when no event matches: a feed of no events. From any other address (a USGS summary
/// feed, a proxy or portal in the way) a 204 is no feed, and the refresh fails.
package func isFDSNEventQuery(_ url: URL?) -> Bool {
    url?.path.contains("/fdsnws/event/") == true
}

/// Whether `error` is an FDSN event query's answer that it matched no event, when the query asked for
/// "404 Not Found" (`nodata=404`) rather than the service's "204 No Content": a feed of no events.
package func isFDSNNoData(_ error: any Error, url: URL?) -> Bool {
    guard isFDSNEventQuery(url), let url, let error = error as? NetworkError, error.code == .httpStatus,
        error.statusCode == 404
    else { return false }
    let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
    return items.contains { $0.name.lowercased() == "nodata" && $0.value == "404" }
}
