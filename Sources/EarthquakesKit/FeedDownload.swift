public import Baton
public import BatonNetworking
public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A job that downloads a feed to a file, atomically: the file at ``destination`` is the whole,
/// successful response body or is left as it was. ``FeedDownload/job(url:to:session:timeout:idleTimeout:proxies:maximumBytes:progress:)``
/// makes one.
///
/// ## Thread safety
/// Every property may be read from any thread.
public protocol FeedDownloading: Job {
    /// Where the body is written.
    var destination: URL { get }
    /// The response's status, once its head arrived.
    var statusCode: Int? { get }
}

extension HTTPDownloadJob: FeedDownloading {}

/// Chooses how a feed is downloaded.
///
/// On Linux, `URLSession` (swift-corelibs-foundation over libcurl) keeps about three quarters of a core
/// busy for as long as a slow download trickles in (measured at 50 KB/s: 0.93 of a core), which a tool
/// run every few minutes must not. There the download uses AsyncHTTPClient (SwiftNIO's event loop waits
/// in `epoll` at no cost): ``AsyncHTTPDownloadJob``, with the same timeouts, progress, cancellation and
/// errors (`NetworkError`) as `HTTPDownloadJob`. An `https` feed through a proxy goes through it with
/// `CONNECT`. A plain `http` feed through a proxy, and every download on other systems, uses
/// `HTTPDownloadJob` (`URLSession`), whose proxies send such a request in the absolute form that HTTP
/// proxies expect (many refuse `CONNECT` to port 80).
///
/// ## Thread safety
/// Stateless.
public enum FeedDownload {
    /// The largest feed downloaded: 512 MB, as for a feed read from a pipe. (The USGS's largest feed, a
    /// month of every event, is about 10 MB; an FDSN query is limited to 20,000 events.) A server that
    /// sends more, or never ends its body, is stopped there.
    public static let maximumBytes: Int64 = 512 << 20

    /// A job that downloads `url` to `destination`.
    ///
    /// - Parameters:
    ///   - url: What to download (`http` or `https`).
    ///   - destination: The file to write; replaced only once the download succeeded. Its folder must exist.
    ///   - session: The session of a `URLSession` download (see ``FeedDownload``).
    ///   - timeout: A limit on the whole transfer; `nil` for none.
    ///   - idleTimeout: How long the transfer may go without receiving a byte; `nil` for no limit.
    ///   - proxies: The proxies to go through (by default from `http_proxy`, `https_proxy`, `no_proxy`).
    ///   - maximumBytes: The largest body kept (``maximumBytes`` by default); past it the download fails
    ///     with `NetworkError.tooLarge` and nothing is kept.
    ///   - progress: Told how many bytes arrived, and how many are expected when the server said.
    public static func job(
        url: URL, to destination: URL, session: URLSession, timeout: Duration?, idleTimeout: Duration?,
        proxies: ProxySettings = ProxySettings(), maximumBytes: Int64 = maximumBytes,
        progress: URLSessionTaskJob.ProgressHandler? = nil
    ) -> any FeedDownloading {
        #if canImport(AsyncHTTPClient)
        let proxy = proxies.proxy(for: url)
        if proxy == nil || url.scheme?.lowercased() == "https" {
            return AsyncHTTPDownloadJob(
                url: url, to: destination, timeout: timeout, idleTimeout: idleTimeout, proxy: proxy,
                maximumBytes: maximumBytes, progress: progress)
        }
        #endif
        return HTTPDownloadJob(
            url: url, to: destination, session: session, timeout: timeout, idleTimeout: idleTimeout,
            maximumBytes: maximumBytes, progress: progress)
    }
}
