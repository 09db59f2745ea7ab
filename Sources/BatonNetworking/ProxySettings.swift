public import Foundation

/// The HTTP proxies a program is told to use by the standard environment variables, as curl, wget and
/// (on Linux) `URLSession` read them: `http_proxy`, `https_proxy`, `all_proxy` (or their upper-case
/// forms) and `no_proxy`.
///
/// ```swift
/// let proxies = ProxySettings()                       // from the process's environment
/// proxies.proxy(for: URL(string: "https://earthquake.usgs.gov/feed")!)
/// // Proxy(host: "proxy.example", port: 3128, variable: "https_proxy")
/// ```
///
/// - A value is a URL (`http://user:password@proxy.example:3128/`) or `host:port`; without a port,
///   1080 (curl's default).
/// - `no_proxy` is a comma-separated list of host names, domain suffixes (`example.com` and
///   `.example.com` both match `a.example.com`), IP addresses, or `*` for every host; a `:port` after
///   an entry is ignored.
///
/// ## Thread safety
/// A `Sendable` value.
public struct ProxySettings: Sendable, Equatable {
    /// A proxy server.
    ///
    /// ## Thread safety
    /// A `Sendable` value.
    public struct Proxy: Sendable, Equatable, CustomStringConvertible {
        /// The proxy's host name or address.
        public var host: String
        /// The proxy's port.
        public var port: Int
        /// The environment variable that named it, for messages.
        public var variable: String

        public var description: String { "\(host) port \(port) (from \(variable))" }
    }

    /// The proxy for `http` URLs.
    public var http: Proxy?
    /// The proxy for `https` URLs.
    public var https: Proxy?
    /// Hosts reached directly (the entries of `no_proxy`, lower-cased, without leading dots).
    public var noProxy: [String]

    /// Reads the settings from `environment`.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        func value(_ name: String) -> (String, String)? {
            for key in [name, name.uppercased()] {
                if let text = environment[key]?.trimmingCharacters(in: .whitespaces), !text.isEmpty {
                    return (key, text)
                }
            }
            return nil
        }
        let all = value("all_proxy").flatMap { Self.parse($0.1, variable: $0.0) }
        http = value("http_proxy").flatMap { Self.parse($0.1, variable: $0.0) } ?? all
        https = value("https_proxy").flatMap { Self.parse($0.1, variable: $0.0) } ?? all
        noProxy = (value("no_proxy")?.1 ?? "").split(separator: ",").compactMap { entry in
            var text = entry.trimmingCharacters(in: .whitespaces).lowercased()
            while text.hasPrefix(".") { text.removeFirst() }
            if text.hasPrefix("["), let end = text.firstIndex(of: "]") {
                text = String(text[text.index(after: text.startIndex)..<end])
            } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
                text = String(text[..<colon])
            }
            return text.isEmpty && entry.trimmingCharacters(in: .whitespaces) != "*" ? nil : text
        }
    }

    /// No proxies.
    public static let none = ProxySettings(environment: [:])

    /// The proxy a request for `url` goes through, or `nil` when it goes directly.
    public func proxy(for url: URL) -> Proxy? {
        guard let scheme = url.scheme?.lowercased(), var host = url.host?.lowercased() else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let proxy: Proxy?
        switch scheme {
        case "http": proxy = http
        case "https": proxy = https
        default: proxy = nil
        }
        guard let proxy else { return nil }
        for entry in noProxy {
            if entry == "*" || host == entry || host.hasSuffix("." + entry) { return nil }
        }
        return proxy
    }

    private static func parse(_ text: String, variable: String) -> Proxy? {
        let withScheme = text.contains("://") ? text : "http://" + text
        guard let components = URLComponents(string: withScheme), let host = components.host, !host.isEmpty else {
            return nil
        }
        let unbracketed = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return Proxy(host: unbracketed, port: components.port ?? 1080, variable: variable)
    }
}
