public import Baton
public import Foundation

/// A job that reads a USGS feed (bytes in memory or a file) and parses it with ``FeedParser``.
///
/// ```swift
/// let parse = ParseFeedJob(input: .file(downloadedFile))
/// queue.add(parse)
/// try await parse.outcome.get()        // FeedError or FeedFileError on failure
/// print(parse.feed!.earthquakes.count)
/// ```
///
/// The job fails with the ``FeedError`` of the parser (which says where the feed broke), or with a
/// ``FeedFileError`` when the file cannot be read. A job cancelled before it runs does not read anything.
///
/// ## Thread safety
/// Every property may be read from any thread; the result is guarded by a lock.
public final class ParseFeedJob: Job, @unchecked Sendable {
    // @unchecked Sendable: `input` and `parser` are immutable; `storedFeed` is guarded by `lock`.

    /// Where the feed comes from.
    ///
    /// ## Thread safety
    /// A `Sendable` value.
    public enum Input: Sendable {
        /// The bytes of the feed.
        case data(Data)
        /// A file holding the feed, read when the job runs (so it may be written by a job this one depends on).
        case file(URL)
    }

    /// Where the feed comes from.
    public let input: Input
    private let parser: FeedParser
    /// The store the feed will be imported into: its fingerprinted rows are read before parsing, so that
    /// the features it already holds are not decoded (see ``FeedParser/parse(_:known:)``).
    private let store: EarthquakeStore?
    /// Whether the server answered "204 No Content" (an FDSN event query that matched no event): then an
    /// empty input is a feed of no events, not a failed download.
    private let noContent: (@Sendable () -> Bool)?
    private let lock = Lock()
    private var storedFeed: Feed?

    /// Creates a job that parses `input`.
    public init(name: String? = nil, input: Input, parser: FeedParser = FeedParser()) {
        self.input = input
        self.parser = parser
        self.store = nil
        self.noContent = nil
        super.init(name: name ?? "parse feed")
    }

    /// Creates a job that parses `input` for an import into `store`: the features that `store` already
    /// holds exactly are not decoded (the ``ImportFeedJob`` checks them in its transaction), which makes
    /// re-importing an unchanged feed much faster. The resulting ``feed`` is the same, its
    /// ``Feed/earthquakes`` decoding the skipped features when read.
    ///
    /// `noContent` tells, when the job runs, whether the input is the body of a "204 No Content" response:
    /// then an empty input is a feed of no events.
    package init(
        name: String? = nil, input: Input, parser: FeedParser = FeedParser(), store: EarthquakeStore,
        noContent: (@Sendable () -> Bool)? = nil
    ) {
        self.input = input
        self.parser = parser
        self.store = store
        self.noContent = noContent
        super.init(name: name ?? "parse feed")
    }

    /// The parsed feed, once the job succeeded.
    public var feed: Feed? { lock.withLock { storedFeed } }

    public override func execute() throws {
        let data: Data
        switch input {
        case .data(let bytes):
            data = bytes
        case .file(let url):
            data = try Self.read(url)
        }
        if isCancelled { throw CancellationError() }
        if data.isEmpty, let noContent, noContent() {
            lock.withLock { storedFeed = Feed(metadata: Feed.Metadata(), earthquakes: []) }
            return
        }
        // Reading the store's fingerprints only saves time: when it fails, the feed is parsed in full (and
        // the import reports what is wrong with the store).
        let known = (try? store?.knownFeatures()) ?? KnownFeatures()
        let feed = try parser.parse(data, known: known)
        lock.withLock { storedFeed = feed }
    }
}

extension ParseFeedJob {
    /// The bytes of a feed file: mapped when it is a regular file, read to the end otherwise (a pipe such
    /// as `/dev/stdin` or `<(command)`, which cannot be mapped).
    package static func read(_ url: URL) throws -> Data {
        do {
            var status = stat()
            if stat(url.path, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
                let handle = try FileHandle(forReadingFrom: url)
                defer { try? handle.close() }
                return try handle.readToEnd() ?? Data()
            }
            return try Data(contentsOf: url, options: .alwaysMapped)
        } catch {
            throw FeedFileError(path: url.path, error: error)
        }
    }
}

/// A feed file that could not be read.
///
/// ## Thread safety
/// A `Sendable` value.
public struct FeedFileError: Error, Sendable, CustomStringConvertible {
    /// The file.
    public let path: String
    /// What the file system said.
    public let reason: String

    /// Creates an error for `path` from the error of the failed read.
    public init(path: String, error: any Error) {
        self.path = path
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain
        {
            self.reason = String(cString: strerror(Int32(underlying.code)))
        } else if nsError.domain == NSCocoaErrorDomain && nsError.code == NSFileReadNoSuchFileError {
            self.reason = "no such file"
        } else {
            self.reason = nsError.localizedDescription
        }
    }

    public var description: String { "could not read the feed file \(path): \(reason)" }
}
