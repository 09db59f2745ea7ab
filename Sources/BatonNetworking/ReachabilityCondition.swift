public import Baton
import Dispatch
public import Foundation

/// A condition that a host can be reached, so a network job fails fast with a clear error instead of
/// waiting for a transfer that cannot happen.
///
/// ```swift
/// let reachable = ReachabilityCondition(url: feedURL)!
/// try await reachable.check()   // throws NetworkError: "cannot reach example.com port 443 (…)"
/// ```
///
/// The check resolves the host name with `getaddrinfo` and opens (then closes) a TCP connection to
/// the port with a non-blocking `connect` bounded by ``timeout``, on a background thread. It works
/// the same on Linux and Apple platforms and needs no system reachability service. A failure is a
/// ``NetworkError`` with code ``NetworkError/Code/nameResolution`` (the name is unknown, or resolving
/// it took longer than the timeout) or ``NetworkError/Code/unreachable`` (refused, unreachable, or no
/// answer in time).
///
/// When the URL's requests go through a proxy (``ProxySettings``, from `http_proxy`, `https_proxy` and
/// `no_proxy` by default), the condition checks that the proxy can be reached instead: the feed's
/// server need not be resolvable from this machine, and a proxy that is down is named as such.
///
/// ## Thread safety
/// A `Sendable` value; ``check()`` may run from many tasks at once.
public struct ReachabilityCondition: JobCondition {
    /// The host name or address to reach: the server, or the proxy requests go through.
    public let host: String
    /// The TCP port to connect to.
    public let port: Int
    /// The longest the whole check (resolution and connection) may take.
    public let timeout: Duration
    /// The proxy being checked in place of the server, if any.
    public let proxy: ProxySettings.Proxy?

    /// A condition that `host` accepts TCP connections on `port`.
    public init(host: String, port: Int, timeout: Duration = .seconds(5)) {
        self.init(host: host, port: port, timeout: timeout, proxy: nil)
    }

    private init(host: String, port: Int, timeout: Duration, proxy: ProxySettings.Proxy?) {
        self.host = host
        self.port = port
        self.timeout = timeout
        self.proxy = proxy
    }

    /// A condition that the server of an `http` or `https` URL can be reached (port 80 or 443 unless the
    /// URL names one) or, when `proxies` route the URL through a proxy, that the proxy can be reached;
    /// `nil` for URLs of other schemes or without a host.
    public init?(url: URL, timeout: Duration = .seconds(5), proxies: ProxySettings = ProxySettings()) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else { return nil }
        if let proxy = proxies.proxy(for: url) {
            self.init(host: proxy.host, port: proxy.port, timeout: timeout, proxy: proxy)
            return
        }
        let unbracketed = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        self.init(host: unbracketed, port: url.port ?? (scheme == "https" ? 443 : 80), timeout: timeout)
    }

    /// "reachability of HOST port PORT", or "reachability of the proxy HOST port PORT".
    public var name: String { "reachability of \(proxy == nil ? "" : "the proxy ")\(host) port \(port)" }

    /// Checks that the host can be reached.
    ///
    /// Returns as soon as a connection was made; throws as soon as it is clear none can be, and at the
    /// latest after ``timeout``. Task cancellation is not observed: the check is short by construction.
    ///
    /// - Throws: ``NetworkError`` with code ``NetworkError/Code/nameResolution`` or ``NetworkError/Code/unreachable``.
    public func check() async throws(NetworkError) {
        let result: Result<String, NetworkError> = await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            let (host, port, seconds) = (host, port, timeout.seconds)
            let url = URL(string: "http://\(host.contains(":") ? "[\(host)]" : host):\(port)")
            // A thread of its own (a serial queue, served by Dispatch's overcommitting pool): getaddrinfo
            // and connect block, and on Linux `DispatchQueue.global()` is Swift concurrency's pool.
            DispatchQueue(label: "BatonNetworking.reachability").async {
                do throws(NetworkError) {
                    once.resume(.success(try HostProbe.connect(host: host, port: port, timeout: seconds, url: url)))
                } catch {
                    once.resume(.failure(error))
                }
            }
            // getaddrinfo cannot be interrupted; stop waiting for it when the deadline passes.
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds + 0.1) {
                once.resume(
                    .failure(
                        NetworkError(
                            code: .nameResolution, url: url,
                            description:
                                "cannot resolve the host name \"\(host)\" within \(NetworkError.format(seconds: seconds)). "
                                + "Check your network connection and DNS settings."
                        )))
            }
        }
        do {
            _ = try result.get()
        } catch {
            guard let proxy else { throw error }
            throw NetworkError(
                code: error.code, url: error.url,
                description: "the proxy set by \(proxy.variable) cannot be used: \(error.description) "
                    + "Check the proxy, or unset \(proxy.variable) (or list the host in no_proxy) to connect directly.",
                underlying: error)
        }
    }

    /// `ConditionResult.satisfied` when ``check()`` succeeds, otherwise `ConditionResult.failed(_:)` with its error.
    public func evaluate(for job: Job) async -> ConditionResult {
        do {
            try await check()
            return .satisfied
        } catch {
            return .failed(error)
        }
    }
}

/// Resumes a continuation once, whichever of several racing callers comes first.
private final class ResumeOnce<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `continuation` is guarded by `lock`.
    private let lock = Lock()
    private var continuation: CheckedContinuation<Value, Never>?

    init(_ continuation: CheckedContinuation<Value, Never>) {
        self.continuation = continuation
    }

    func resume(_ value: Value) {
        let continuation = lock.withLock {
            defer { self.continuation = nil }
            return self.continuation
        }
        continuation?.resume(returning: value)
    }
}
