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
    private let idleTimeout: Duration?
    private let lock = Lock()
    private var storedFeed: Feed?

    /// Creates a job that parses `input`.
    public init(name: String? = nil, input: Input, parser: FeedParser = FeedParser()) {
        self.input = input
        self.parser = parser
        self.store = nil
        self.noContent = nil
        self.idleTimeout = nil
        super.init(name: name ?? "parse feed")
    }

    /// Creates a job that parses `input` for an import into `store`: the features that `store` already
    /// holds exactly are not decoded (the ``ImportFeedJob`` checks them in its transaction), which makes
    /// re-importing an unchanged feed much faster. The resulting ``feed`` is the same, its
    /// ``Feed/earthquakes`` decoding the skipped features when read.
    ///
    /// `noContent` tells, when the job runs, whether the input is the body of a "204 No Content" response:
    /// then an empty input is a feed of no events.
    ///
    /// `idleTimeout`: how long a feed read from a pipe may go without a byte.
    package init(
        name: String? = nil, input: Input, parser: FeedParser = FeedParser(), store: EarthquakeStore,
        noContent: (@Sendable () -> Bool)? = nil, idleTimeout: Duration? = nil
    ) {
        self.input = input
        self.parser = parser
        self.store = store
        self.noContent = noContent
        self.idleTimeout = idleTimeout
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
            data = try Self.read(url, idleTimeout: idleTimeout) { [unowned self] in self.isCancelled }
        }
        if isCancelled { throw CancellationError() }
        if data.isEmpty, let noContent, noContent() {
            lock.withLock { storedFeed = Feed(metadata: Feed.Metadata(), earthquakes: []) }
            return
        }
        // Reading the store's fingerprints only saves time: when it fails, the feed is parsed in full (and
        // the import reports what is wrong with the store).
        let known = (try? store?.knownFeatures()) ?? KnownFeatures()
        // A cancel (Ctrl-C) stops a big feed's parse within a few hundred features, not at its end.
        let result = Result { () throws(FeedError) -> Feed in
            try parser.parse(data, known: known) { [weak self] in self?.isCancelled ?? true }
        }
        if case .failure(let error) = result, error.code == .cancelled { throw CancellationError() }
        let feed = try result.get()
        lock.withLock { storedFeed = feed }
    }
}

extension ParseFeedJob {
    /// The most a feed read from a pipe or device may hold (the largest USGS feeds are tens of MB):
    /// `--feed /dev/zero` filled memory at 1.5 GB a second.
    package static let maximumStreamedBytes = 512 << 20

    /// The bytes of a feed file: mapped when it is a regular file, read to the end otherwise (a pipe such
    /// as `/dev/stdin` or `<(command)`, which cannot be mapped).
    ///
    /// A pipe is read without blocking, a poll of at most 0.1 s at a time, so that the read stops when
    /// `isCancelled` says so (Ctrl-C) or when no byte came for `idleTimeout` — a stalled command, a FIFO
    /// that no writer opens — and refuses more than ``maximumStreamedBytes``. (A blocking read to the end
    /// could not be cancelled: a stalled pipe ignored Ctrl-C and `--timeout`, and a FIFO with no writer
    /// waited for ever.)
    package static func read(
        _ url: URL, idleTimeout: Duration? = nil, maximumBytes: Int = maximumStreamedBytes,
        isCancelled: () -> Bool = { false }
    ) throws -> Data {
        var status = stat()
        if stat(url.path, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
            return try readStream(
                url.path, idleTimeout: idleTimeout, maximumBytes: maximumBytes, isCancelled: isCancelled)
        }
        do {
            return try Data(contentsOf: url, options: .alwaysMapped)
        } catch {
            throw FeedFileError(path: url.path, error: error)
        }
    }

    private static func readStream(
        _ path: String, idleTimeout: Duration?, maximumBytes: Int, isCancelled: () -> Bool
    ) throws -> Data {
        func failure(_ code: Int32) -> FeedFileError {
            FeedFileError(path: path, reason: String(cString: strerror(code)))
        }
        // Non-blocking: opening a FIFO for reading would otherwise wait for its writer, uncancellably.
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure(errno) }
        defer { close(descriptor) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var lastByte = ContinuousClock.now
        while true {
            if isCancelled() { throw CancellationError() }
            var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&watched, 1, 100)
            if ready < 0 {
                if errno == EINTR { continue }
                throw failure(errno)
            }
            if ready == 0 {
                // (A FIFO that no writer has opened yet reports nothing: it is waited for, as a stall.)
                if let idleTimeout, ContinuousClock.now - lastByte >= idleTimeout {
                    throw FeedFileError(
                        path: path, reason: "no byte came for \(idleTimeout) (the command writing it stalled?)")
                }
                continue
            }
            let count = buffer.withUnsafeMutableBytes { Foundation.read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(buffer, count: count)
                lastByte = .now
                guard data.count <= maximumBytes else {
                    throw FeedFileError(
                        path: path,
                        reason: "it gave more than \(maximumBytes >> 20) MB, more than any USGS feed holds")
                }
            } else if count == 0 {
                return data  // the end (poll said readable or hung up)
            } else if errno != EAGAIN && errno != EINTR {
                throw failure(errno)
            }
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

    /// Creates an error for `path` saying `reason`.
    package init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "could not read the feed file \(path): \(reason)" }
}
