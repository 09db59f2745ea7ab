import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Blocking checks that a host can be reached: name resolution with `getaddrinfo`, then a
/// non-blocking TCP connect to each address, bounded by a timeout. Works on Linux and Darwin.
///
/// Used by ``ReachabilityCondition`` on a background thread.
enum HostProbe {
    /// Resolves a host name and port to a list of addresses that the caller frees with `freeaddrinfo`.
    typealias Resolver =
        @Sendable (_ host: String, _ port: Int, _ url: URL?) throws(NetworkError) ->
        UnsafeMutablePointer<addrinfo>

    /// Resolves `host` and connects to `port` on one of its addresses, all before `deadline` (uptime
    /// nanoseconds, taken before the name is resolved: the timeout covers the whole check); returns the
    /// address that answered, as text. `resolved` is called once the name is resolved, if that was before
    /// the deadline.
    ///
    /// - Throws: ``NetworkError`` with code ``NetworkError/Code/nameResolution`` (also when resolving
    ///   left no time to connect) or ``NetworkError/Code/unreachable``.
    static func connect(
        host: String, port: Int, deadline: UInt64, timeout: Double, url: URL?,
        resolve: Resolver = { host, port, url throws(NetworkError) in
            try HostProbe.resolve(host: host, port: port, url: url)
        },
        resolved: () -> Void = {}
    ) throws(NetworkError) -> String {
        let addresses = try resolve(host, port, url)
        defer { freeaddrinfo(addresses) }
        // Resolved in time or not at all: a name resolved past the deadline is reported as such by
        // whichever of this thread and the caller's watchdog speaks first.
        if Int64(deadline) - Int64(DispatchTime.now().uptimeNanoseconds) <= 0 {
            throw NetworkError(
                code: .nameResolution, url: url,
                description:
                    "resolving the host name \"\(host)\" took longer than the timeout (\(NetworkError.format(seconds: timeout))), "
                    + "leaving no time to connect. Check your network connection and DNS settings.")
        }
        resolved()
        var failures: [String] = []
        var candidate: UnsafeMutablePointer<addrinfo>? = addresses
        while let info = candidate {
            candidate = info.pointee.ai_next
            let address = text(of: info)
            let remaining = Int64(deadline) - Int64(DispatchTime.now().uptimeNanoseconds)
            guard remaining > 0 else {
                failures.append("\(address): timed out")
                break
            }
            if let problem = tryConnect(info, timeoutMilliseconds: Int32(clamping: remaining / 1_000_000)) {
                failures.append("\(address): \(problem)")
            } else {
                return address
            }
        }
        let why = failures.isEmpty ? "no usable address" : failures.joined(separator: "; ")
        throw NetworkError(
            code: .unreachable, url: url,
            description: "cannot reach \(host) port \(port) (\(why)). Check the address, that the server is running "
                + "and your network connection."
        )
    }

    /// `getaddrinfo` for a TCP stream. The caller frees the list.
    static func resolve(
        host: String, port: Int, url: URL?
    ) throws(NetworkError) -> UnsafeMutablePointer<addrinfo> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
        hints.ai_socktype = SOCK_STREAM
        #else
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var result: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &result)
        guard status == 0, let result else {
            let reason = status == 0 ? "no addresses" : String(cString: gai_strerror(status))
            throw NetworkError(
                code: .nameResolution, url: url,
                description:
                    "cannot resolve the host name \"\(host)\": \(reason). Check the address and your network connection."
            )
        }
        return result
    }

    /// Connects without blocking longer than `timeoutMilliseconds`; returns `nil` on success or a
    /// description of the failure.
    private static func tryConnect(_ info: UnsafeMutablePointer<addrinfo>, timeoutMilliseconds: Int32) -> String? {
        let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
        guard fd >= 0 else { return errorText(errno) }
        defer { close(fd) }
        let flags = fcntl(fd, F_GETFL, 0)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else { return errorText(errno) }

        if systemConnect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return nil }
        guard errno == EINPROGRESS else { return errorText(errno) }

        var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        while true {
            let ready = poll(&descriptor, 1, timeoutMilliseconds)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 { return errorText(errno) }
            if ready == 0 { return "no answer within \(timeoutMilliseconds) ms" }
            break
        }
        var socketError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &socketError, &length) == 0 else { return errorText(errno) }
        return socketError == 0 ? nil : errorText(socketError)
    }

    private static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    /// The numeric address of an `addrinfo`, such as `127.0.0.1` or `::1`.
    private static func text(of info: UnsafeMutablePointer<addrinfo>) -> String {
        var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let status = getnameinfo(
            info.pointee.ai_addr, info.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST)
        guard status == 0 else { return "an address" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// `connect(2)`, named so it does not clash with `HostProbe.connect(host:port:deadline:timeout:url:resolve:resolved:)`.
private func systemConnect(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>!, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}
