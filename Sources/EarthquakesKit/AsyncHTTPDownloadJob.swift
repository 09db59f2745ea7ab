#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
public import Baton
public import BatonNetworking
public import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTPCompression

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Downloads a URL to a file with AsyncHTTPClient: what ``FeedDownload`` uses on Linux, where a
/// `URLSession` download keeps a core busy while it trickles. Like `HTTPDownloadJob`: the body goes to a
/// hidden temporary file in the destination's folder, which is flushed (`fsync`) and renamed over
/// ``destination`` once the whole body arrived with a 2xx status; on any failure it is removed and the
/// destination left as it was.
///
/// The request asks for a compressed body (`Accept-Encoding: gzip, deflate`), which is decompressed as
/// it arrives. A body over ``maximumBytes`` (512 MB unless said), announced or decompressed, stops the
/// transfer: a server that never ends its body, or a small compressed one that inflates without end,
/// cannot fill the disk.
///
/// Fails with `NetworkError`: `httpStatus` for another status, `timedOut` when no byte came for
/// `idleTimeout` ("no data from … within 30 seconds (12 KB received)") or the whole transfer took longer
/// than `timeout`, `tooLarge` over ``maximumBytes``, `transport` when the connection failed, `file` when
/// the body cannot be written. Cancelling the job stops the transfer at once (`CancellationError`).
///
/// ## Thread safety
/// Every property may be read from any thread: the status is guarded by a lock; the rest is immutable.
public final class AsyncHTTPDownloadJob: AsyncJob, FeedDownloading, @unchecked Sendable {
    // @unchecked Sendable: every stored property is immutable except `status`, which a `Protected` guards.

    /// What is downloaded.
    public let url: URL
    public let destination: URL
    /// A limit on the whole transfer; `nil` for none.
    public let timeout: Duration?
    /// How long the transfer may go without receiving a byte; `nil` for no limit.
    public let idleTimeout: Duration?
    /// The HTTP proxy the transfer goes through (`CONNECT`), if any.
    public let proxy: ProxySettings.Proxy?
    /// The largest body kept, in bytes (decompressed).
    public let maximumBytes: Int64
    private let progressHandler: URLSessionTaskJob.ProgressHandler?
    private let status = Protected<Int?>(nil)

    public var statusCode: Int? { status.current }

    /// Creates a job that downloads `url` to `destination` (whose folder must exist).
    public init(
        url: URL, to destination: URL, timeout: Duration? = nil, idleTimeout: Duration? = nil,
        proxy: ProxySettings.Proxy? = nil, maximumBytes: Int64 = 512 << 20,
        progress: URLSessionTaskJob.ProgressHandler? = nil
    ) {
        self.url = url
        self.destination = destination
        self.timeout = timeout
        self.idleTimeout = idleTimeout
        self.proxy = proxy
        self.maximumBytes = maximumBytes
        self.progressHandler = progress
        super.init(name: "download \(url.absoluteString)")
    }

    public override func perform() async throws {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = HTTPClient.Configuration.Timeout(
            connect: idleTimeout.map(Self.timeAmount), read: idleTimeout.map(Self.timeAmount))
        configuration.redirectConfiguration = .follow(max: 5, allowCycles: false)
        // Sends `Accept-Encoding: deflate, gzip` and inflates the body before the delegate sees it: a
        // USGS feed comes about ten times smaller. (The delegate's own count bounds what is kept; this
        // bounds what one compressed chunk may inflate to.)
        configuration.decompression = .enabled(limit: .size(Int(maximumBytes)))
        if let proxy { configuration.proxy = .server(host: proxy.host, port: proxy.port) }
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let file = try TemporaryFile(beside: destination, url: url)
        var kept = false
        defer { if !kept { file.remove() } }
        let received = Protected<(bytes: Int64, expected: Int64?)>((0, nil))
        let result: Result<Void, any Error>
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.transfer(client, into: file, received: received) }
                if let timeout = self.timeout {
                    group.addTask {
                        try await Task.sleep(for: timeout)  // the limit itself, not a wait for other work
                        throw TotalTimeout()
                    }
                }
                try await group.next()
                group.cancelAll()
            }
            result = .success(())
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        switch result {
        case .success:
            try file.keep(as: destination)
            kept = true
        case .failure(let error):
            throw translated(error, received: received.current)
        }
    }

    /// The request and its body, written to `file` as it arrives.
    ///
    /// The body is written by the delegate, on the event loop that receives it, not by this task: a
    /// buffer read here after the event loop handed it over may have its memory reused by the event
    /// loop's receive-buffer pool once this task lets go of it, a hand-back that ThreadSanitizer cannot
    /// see (it goes through Swift's reference counts) and reported as a race in CI. Each write is a
    /// `write(2)` of one received chunk (at most a few tens of kilobytes) to a local file.
    private func transfer(
        _ client: HTTPClient, into file: TemporaryFile, received: Protected<(bytes: Int64, expected: Int64?)>
    ) async throws {
        var request = try HTTPClient.Request(url: url.absoluteString)
        request.headers.add(name: "User-Agent", value: "baton-earthquakes")
        let writer = BodyWriter(
            url: url, file: file, status: status, received: received, maximumBytes: maximumBytes,
            progress: progressHandler)
        let task = client.execute(request: request, delegate: writer)
        try await withTaskCancellationHandler {
            try await task.futureResult.get()
        } onCancel: {
            task.cancel()
        }
    }

    private func translated(_ error: any Error, received: (bytes: Int64, expected: Int64?)) -> any Error {
        if error is NetworkError { return error }
        if error is TotalTimeout, let timeout {
            return NetworkError.timedOut(url: url, after: timeout.seconds)
        }
        if let client = error as? HTTPClientError, client == .readTimeout, let idleTimeout {
            return NetworkError.stalled(
                url: url, after: idleTimeout.seconds, received: received.bytes, expected: received.expected)
        }
        if let client = error as? HTTPClientError, client == .connectTimeout, let idleTimeout {
            return NetworkError.timedOut(url: url, after: idleTimeout.seconds)
        }
        if error is CancellationError || isCancelled || (error as? HTTPClientError) == .cancelled {
            return CancellationError()
        }
        if let file = error as? TemporaryFile.WriteError {
            return NetworkError.file(url: url, path: destination.path, error: file.error)
        }
        if error is NIOHTTPDecompression.ExtraDecompressionError {
            // `truncatedData` (the compressed body ended before its end) or `invalidTrailingData`.
            return NetworkError(
                code: .transport, url: url,
                description:
                    "the compressed response from \(url.absoluteString) is cut short or damaged; try again, and check the address",
                underlying: error)
        }
        if let decompression = error as? NIOHTTPDecompression.DecompressionError {
            if decompression == .limit { return NetworkError.tooLarge(url: url, limit: maximumBytes, announced: nil) }
            return NetworkError(
                code: .transport, url: url,
                description:
                    "the compressed response from \(url.absoluteString) could not be decompressed (it is damaged, or not what its Content-Encoding says); try again, and check the address",
                underlying: error)
        }
        if let reason = Self.reason(error) {
            return NetworkError(
                code: .transport, url: url,
                description: "the request to \(url.absoluteString) failed: \(reason)", underlying: error)
        }
        return NetworkError.transport(url: url, error: error)
    }

    /// A sentence for the errors of AsyncHTTPClient and SwiftNIO that users meet (their own descriptions
    /// are type and case names: `HTTPClientError.redirectCycleDetected`, `unknown (http_parser error)`).
    private static func reason(_ error: any Error) -> String? {
        if let client = error as? HTTPClientError {
            switch client {
            case .redirectCycleDetected: return "the server's redirects go round in a circle"
            case .redirectLimitReached: return "the server redirected more than 5 times"
            case .remoteConnectionClosed: return "the server closed the connection before the response was complete"
            case .invalidURL, .emptyHost, .emptyScheme:
                return "the address (or one the server redirected to) is not an http(s) address"
            case .bodyLengthMismatch: return "the response was shorter or longer than the server said"
            case .uncleanShutdown: return "the connection was cut before the response was complete"
            default: return nil
            }
        }
        if let parser = error as? HTTPParserError {
            // The connection closed in the middle of the body (shorter than its Content-Length, or a
            // chunked body without its last chunk): the parser's end-of-file state.
            if case .invalidEOFState = parser { return "the connection was cut before the response was complete" }
            return "the server's response is not valid HTTP"
        }
        if let io = error as? IOError {
            return "the connection failed (\(String(cString: strerror(io.errnoCode))))"
        }
        return nil
    }

    private static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// The whole transfer took longer than ``timeout``.
    private struct TotalTimeout: Error {}
}

/// Receives a download's response on its event loop: fails the transfer on a status outside 2xx, and
/// writes each chunk of the body to the file as it arrives.
private final class BodyWriter: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    private let url: URL
    private let file: TemporaryFile
    private let status: Protected<Int?>
    private let received: Protected<(bytes: Int64, expected: Int64?)>
    private let progress: URLSessionTaskJob.ProgressHandler?
    private let maximumBytes: Int64

    init(
        url: URL, file: TemporaryFile, status: Protected<Int?>, received: Protected<(bytes: Int64, expected: Int64?)>,
        maximumBytes: Int64, progress: URLSessionTaskJob.ProgressHandler?
    ) {
        self.url = url
        self.file = file
        self.status = status
        self.received = received
        self.maximumBytes = maximumBytes
        self.progress = progress
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let code = Int(head.status.code)
        status.withLock { $0 = code }
        guard (200..<300).contains(code) else {
            return task.eventLoop.makeFailedFuture(NetworkError.httpStatus(code, url: url))
        }
        let announced = head.headers.first(name: "Content-Length").flatMap { Int64($0) }
        // A compressed body's length is not that of the bytes written (which are decompressed).
        let compressed = head.headers.contains(name: "Content-Encoding")
        if let announced, !compressed, announced > maximumBytes {
            return task.eventLoop.makeFailedFuture(
                NetworkError.tooLarge(url: url, limit: maximumBytes, announced: announced))
        }
        received.withLock { $0.expected = compressed ? nil : announced }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let total = received.current.bytes + Int64(buffer.readableBytes)
        guard total <= maximumBytes else {
            return task.eventLoop.makeFailedFuture(NetworkError.tooLarge(url: url, limit: maximumBytes, announced: nil))
        }
        do {
            try file.write(buffer)
        } catch {
            return task.eventLoop.makeFailedFuture(error)
        }
        let (count, expected) = received.withLock { received in
            received.bytes += Int64(buffer.readableBytes)
            return (received.bytes, received.expected)
        }
        progress?(count, expected)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {}
}

/// The hidden file a download is written to, beside its destination.
private final class TemporaryFile: @unchecked Sendable {
    // @unchecked Sendable: written by one thread at a time (the transfer's event loop, one chunk after
    // the other), then kept or removed by the job once the transfer ended.
    let path: String
    private let descriptor: Int32
    private let url: URL
    private var closed = false

    /// A write failed: the system's error.
    struct WriteError: Error {
        var error: POSIXError
    }

    init(beside destination: URL, url: URL) throws {
        self.url = url
        path =
            destination.deletingLastPathComponent()
            .appendingPathComponent(".baton-download-\(UUID().uuidString)").path
        descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw NetworkError.file(url: url, path: destination.path, error: Self.lastError())
        }
    }

    func write(_ buffer: ByteBuffer) throws {
        try buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw WriteError(error: Self.lastError())
                }
                offset += written
            }
        }
    }

    /// Flushes the file to disk and renames it over `destination` (keeping the permissions of a file it
    /// replaces); the folder is flushed too, best effort.
    func keep(as destination: URL) throws {
        var existing = stat()
        if stat(destination.path, &existing) == 0 { fchmod(descriptor, existing.st_mode & 0o7777) }
        guard fsync(descriptor) == 0, close(descriptor) == 0, rename(path, destination.path) == 0 else {
            closed = true
            throw NetworkError.file(url: url, path: destination.path, error: Self.lastError())
        }
        closed = true
        let folder = open(destination.deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            _ = fsync(folder)
            close(folder)
        }
    }

    func remove() {
        if !closed { close(descriptor) }
        closed = true
        unlink(path)
    }

    private static func lastError() -> POSIXError {
        POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
}
#endif
