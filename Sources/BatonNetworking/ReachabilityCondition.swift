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
/// answer in time); ``timeout`` bounds the whole check, resolution included.
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
        if !(0...65_535).contains(port) {
            fatalError("Baton: the reachability condition for \(host) names port \(port); a TCP port is 0...65535.")
        }
        self.host = host
        self.port = port
        self.timeout = timeout
        self.proxy = proxy
    }

    /// A condition that the server of an `http` or `https` URL can be reached (port 80 or 443 unless the
    /// URL names one) or, when `proxies` route the URL through a proxy, that the proxy can be reached;
    /// `nil` for URLs of other schemes, without a host, or with a port outside 0...65535.
    public init?(url: URL, timeout: Duration = .seconds(5), proxies: ProxySettings = ProxySettings()) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else { return nil }
        if let proxy = proxies.proxy(for: url) {
            self.init(host: proxy.host, port: proxy.port, timeout: timeout, proxy: proxy)
            return
        }
        let unbracketed = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        guard (0...65_535).contains(port) else { return nil }  // no server listens there
        self.init(host: unbracketed, port: port, timeout: timeout)
    }

    /// "reachability of HOST port PORT", or "reachability of the proxy HOST port PORT".
    public var name: String { "reachability of \(proxy == nil ? "" : "the proxy ")\(host) port \(port)" }

    /// Checks that the host can be reached.
    ///
    /// Returns as soon as a connection was made; throws as soon as it is clear none can be, and at the
    /// latest after ``timeout``, which counts from the call (resolving the name and connecting share it).
    /// Cancelling the task ends the wait at once.
    ///
    /// - Throws: ``NetworkError`` with code ``NetworkError/Code/nameResolution``,
    ///   ``NetworkError/Code/unreachable``, or ``NetworkError/Code/cancelled`` when the task is cancelled.
    public func check() async throws(NetworkError) {
        try await check(resolve: { host, port, url throws(NetworkError) in
            try HostProbe.resolve(host: host, port: port, url: url)
        })
    }

    /// ``check()`` with another resolver (tests).
    func check(resolve: @escaping HostProbe.Resolver) async throws(NetworkError) {
        let (host, port, seconds) = (host, port, timeout.seconds)
        let url = URL(string: "http://\(host.contains(":") ? "[\(host)]" : host):\(port)")
        let start = DispatchTime.now()
        // (A timeout of centuries, meant as "no limit", is capped where the nanoseconds still fit.)
        let deadline = start.uptimeNanoseconds + UInt64(min(max(0, seconds), 3_155_760_000) * 1e9)
        let once = ResumeOnce<Result<String, NetworkError>>()
        let resolved = Protected(false)
        let result: Result<String, NetworkError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                once.set(continuation)
                // A thread of its own (a serial queue, served by Dispatch's overcommitting pool): getaddrinfo
                // and connect block, and on Linux `DispatchQueue.global()` is Swift concurrency's pool.
                DispatchQueue(label: "BatonNetworking.reachability").async {
                    do throws(NetworkError) {
                        let address = try HostProbe.connect(
                            host: host, port: port, deadline: deadline, timeout: seconds, url: url, resolve: resolve,
                            resolved: { resolved.withLock { $0 = true } })
                        once.resume(.success(address))
                    } catch {
                        once.resume(.failure(error))
                    }
                }
                // getaddrinfo cannot be interrupted; stop waiting for it when the deadline passes. (The
                // connection attempts end at the deadline themselves.) The message names the phase.
                DispatchQueue.global().asyncAfter(deadline: start + seconds + 0.1) {
                    let within = NetworkError.format(seconds: seconds)
                    let error =
                        resolved.withLock({ $0 })
                        ? NetworkError(
                            code: .unreachable, url: url,
                            description: "cannot reach \(host) port \(port): no answer within \(within). "
                                + "Check the address, that the server is running and your network connection.")
                        : NetworkError(
                            code: .nameResolution, url: url,
                            description: "cannot resolve the host name \"\(host)\" within \(within). "
                                + "Check your network connection and DNS settings.")
                    once.resume(.failure(error))
                }
            }
        } onCancel: {
            once.resume(
                .failure(
                    NetworkError(
                        code: .cancelled, url: url,
                        description: "the reachability check of \(host) port \(port) was cancelled.",
                        underlying: CancellationError())))
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

/// Resumes a continuation once, whichever of several racing callers comes first — also when the first
/// comes before the continuation is set (a task cancelled before it waited): the value is kept for it.
private final class ResumeOnce<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `continuation`, `early` and `done` are guarded by `lock`.
    private let lock = Lock()
    private var continuation: CheckedContinuation<Value, Never>?
    private var early: Value?
    private var done = false

    init() {}

    func set(_ continuation: CheckedContinuation<Value, Never>) {
        let value: Value? = lock.withLock {
            guard let early else {
                self.continuation = continuation
                return nil
            }
            self.early = nil
            return early
        }
        if let value { continuation.resume(returning: value) }
    }

    func resume(_ value: Value) {
        let continuation: CheckedContinuation<Value, Never>? = lock.withLock {
            guard !done else { return nil }
            done = true
            guard let continuation = self.continuation else {
                early = value
                return nil
            }
            self.continuation = nil
            return continuation
        }
        continuation?.resume(returning: value)
    }
}
