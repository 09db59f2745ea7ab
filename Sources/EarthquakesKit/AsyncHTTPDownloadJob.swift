#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
public import Baton
public import BatonNetworking
public import Foundation
import NIOCore
import NIOHTTP1

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
/// Fails with `NetworkError`: `httpStatus` for another status, `timedOut` when no byte came for
/// `idleTimeout` ("no data from … within 30 seconds (12 KB received)") or the whole transfer took longer
/// than `timeout`, `transport` when the connection failed, `file` when the body cannot be written. Cancelling
/// the job stops the transfer at once (`CancellationError`).
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
    private let progressHandler: URLSessionTaskJob.ProgressHandler?
    private let status = Protected<Int?>(nil)

    public var statusCode: Int? { status.current }

    /// Creates a job that downloads `url` to `destination` (whose folder must exist).
    public init(
        url: URL, to destination: URL, timeout: Duration? = nil, idleTimeout: Duration? = nil,
        proxy: ProxySettings.Proxy? = nil, progress: URLSessionTaskJob.ProgressHandler? = nil
    ) {
        self.url = url
        self.destination = destination
        self.timeout = timeout
        self.idleTimeout = idleTimeout
        self.proxy = proxy
        self.progressHandler = progress
        super.init(name: "download \(url.absoluteString)")
    }

    public override func perform() async throws {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = HTTPClient.Configuration.Timeout(
            connect: idleTimeout.map(Self.timeAmount), read: idleTimeout.map(Self.timeAmount))
        configuration.redirectConfiguration = .follow(max: 5, allowCycles: false)
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
        let writer = BodyWriter(url: url, file: file, status: status, received: received, progress: progressHandler)
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
        return NetworkError.transport(url: url, error: error)
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

    init(
        url: URL, file: TemporaryFile, status: Protected<Int?>, received: Protected<(bytes: Int64, expected: Int64?)>,
        progress: URLSessionTaskJob.ProgressHandler?
    ) {
        self.url = url
        self.file = file
        self.status = status
        self.received = received
        self.progress = progress
    }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let code = Int(head.status.code)
        status.withLock { $0 = code }
        guard (200..<300).contains(code) else {
            return task.eventLoop.makeFailedFuture(NetworkError.httpStatus(code, url: url))
        }
        let expected = head.headers.first(name: "Content-Length").flatMap { Int64($0) }
        received.withLock { $0.expected = expected }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
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
