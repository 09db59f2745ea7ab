public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A job that downloads a URL to a file, atomically: the file at ``destination`` is either the whole,
/// successful response body or untouched — never a partial file.
///
/// ```swift
/// let download = HTTPDownloadJob(url: feedURL, to: cacheFolder.appendingPathComponent("feed.geojson"),
///                                timeout: .seconds(30))
/// queue.add(download)
/// try await download.outcome.get()     // HTTP errors, timeouts and cancellation throw here
/// ```
///
/// The body is written, as it arrives, to a hidden temporary file in the destination's folder (see
/// ``URLSessionTaskJob``). When the transfer completes with an accepted status, that file is flushed
/// to disk (`fsync`; an error writing or closing it fails the job), given the permissions of the file
/// it replaces, if any, and renamed over ``destination`` with `rename(2)`, which replaces it in one
/// step; the folder is then flushed too (best effort). On a failure, a timeout or
/// cancellation, the temporary file is removed and an existing file at ``destination`` is left as it was.
///
/// - Important: The destination's folder must exist and be writable.
///
/// ## Thread safety
/// Like ``URLSessionTaskJob``: every property and method may be called from any thread.
public final class HTTPDownloadJob: URLSessionTaskJob, @unchecked Sendable {
    // @unchecked Sendable: `destination` is immutable; the superclass guards its own state.

    /// Where the body is written.
    public let destination: URL

    /// Creates a job that downloads `url` to `destination`.
    ///
    /// - Parameters:
    ///   - name: For diagnostics; defaults to "download <url>".
    ///   - url: What to download.
    ///   - destination: The file to write; replaced if it exists, only once the download succeeded.
    ///   - session: The session that runs the task.
    ///   - acceptableStatusCodes: Status codes that count as success; `200..<300` by default.
    ///   - timeout: A limit on the whole transfer; `nil` for none.
    ///   - idleTimeout: How long the transfer may go without receiving a byte; `nil` for no limit.
    ///   - clock: The clock both limits are measured on; the continuous clock by default.
    ///   - maximumBytes: The largest body accepted (`NetworkError.tooLarge` past it); `nil` for no limit.
    ///   - progress: Told how many bytes arrived; see ``URLSessionTaskJob/ProgressHandler``.
    public init(
        name: String? = nil,
        url: URL,
        to destination: URL,
        session: URLSession = .shared,
        acceptableStatusCodes: Range<Int>? = 200..<300,
        timeout: Duration? = nil,
        idleTimeout: Duration? = nil,
        clock: any Clock<Duration> = ContinuousClock(),
        maximumBytes: Int64? = nil,
        progress: ProgressHandler? = nil
    ) {
        self.destination = destination
        super.init(
            name: name ?? "download \(NetworkError.shown(url))",
            request: URLRequest(url: url),
            kind: .download(directory: destination.deletingLastPathComponent()),
            session: session,
            acceptableStatusCodes: acceptableStatusCodes,
            timeout: timeout,
            idleTimeout: idleTimeout,
            clock: clock,
            maximumBytes: maximumBytes,
            progress: progress
        )
    }

    override func pathForMessages(directory: URL) -> String { destination.path }

    override func keepDownload(at location: URL, in directory: URL) throws -> URL {
        // A destination that exists keeps its permissions (a 0600 file stays private): the new file
        // takes them before it replaces the old one.
        var existing = stat()
        if stat(destination.path, &existing) == 0, chmod(location.path, existing.st_mode & 0o7777) != 0 {
            let error = POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            throw NetworkError.file(url: request.url, path: destination.path, error: error)
        }
        // `location` is the hidden file the body was written to, in the destination's folder:
        // rename(2) replaces the destination in one step.
        guard rename(location.path, destination.path) == 0 else {
            let error = POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            throw NetworkError.file(url: request.url, path: destination.path, error: error)
        }
        return destination
    }
}
