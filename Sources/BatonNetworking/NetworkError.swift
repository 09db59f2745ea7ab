public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Why a network job or check failed, in a sentence a person can act on.
///
/// Match on ``code`` in code; show ``description`` to people:
///
/// ```
/// HTTP 503 (service unavailable) from http://example.com/feed.geojson
/// cannot reach 127.0.0.1 port 8080: Connection refused. Check the address and that the server is running.
/// cannot resolve the host name "nonexistent.invalid": Name or service not known. Check the address and your network connection.
/// no complete response from http://127.0.0.1:8080/feed within 2 seconds; the server may be stalled. Try again later.
/// ```
///
/// ## Thread safety
/// A `Sendable` value.
public struct NetworkError: Error, Sendable, CustomStringConvertible {
    /// What went wrong. New codes may be added; do not switch over them exhaustively.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case httpStatus, nameResolution, unreachable, timedOut, transport, file, cancelled, tooLarge
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The server answered with a status code outside the accepted range; see ``NetworkError/statusCode``.
        public static let httpStatus = Code(.httpStatus)
        /// The host name could not be resolved to an address.
        public static let nameResolution = Code(.nameResolution)
        /// The host's address was found but no TCP connection could be made (refused, unreachable, timed out).
        public static let unreachable = Code(.unreachable)
        /// The job's deadline passed before the transfer completed.
        public static let timedOut = Code(.timedOut)
        /// The transfer failed for another reason (connection lost, bad response, …); see ``NetworkError/underlying``.
        public static let transport = Code(.transport)
        /// The downloaded file could not be written or moved into place.
        public static let file = Code(.file)
        /// The task that ran the check was cancelled; ``NetworkError/underlying`` is the `CancellationError`.
        public static let cancelled = Code(.cancelled)
        /// The response was larger than the download's limit (announced so, or found so as it arrived).
        public static let tooLarge = Code(.tooLarge)

        public var description: String { base.rawValue }
    }

    /// What went wrong.
    public let code: Code
    /// The address involved, when there is one.
    public let url: URL?
    /// The HTTP status code, for ``Code/httpStatus``.
    public let statusCode: Int?
    /// The error underneath (a `URLError`, a file-system error), if any.
    public let underlying: (any Error)?
    /// One sentence that says what is wrong and what to do.
    public let description: String

    /// Creates an error. Prefer the static factories, which word the message consistently.
    public init(code: Code, url: URL?, statusCode: Int? = nil, description: String, underlying: (any Error)? = nil) {
        self.code = code
        self.url = url
        self.statusCode = statusCode
        self.description = description
        self.underlying = underlying
    }

    /// `HTTP 503 (service unavailable) from http://…`.
    public static func httpStatus(_ statusCode: Int, url: URL?) -> NetworkError {
        let reason = HTTPURLResponse.localizedString(forStatusCode: statusCode)
        let text = reason.isEmpty ? "" : " (\(reason))"
        return NetworkError(
            code: .httpStatus, url: url, statusCode: statusCode,
            description: "HTTP \(statusCode)\(text) from \(shown(url))"
        )
    }

    /// The limit on a whole transfer passed.
    public static func timedOut(url: URL?, after seconds: Double) -> NetworkError {
        NetworkError(
            code: .timedOut, url: url,
            description:
                "no complete response from \(shown(url)) within \(Self.format(seconds: seconds)); "
                + "the server may be stalled or the connection too slow. Try again later."
        )
    }

    /// No byte arrived for `seconds` (the idle timeout of a transfer).
    public static func stalled(url: URL?, after seconds: Double, received: Int64, expected: Int64?) -> NetworkError {
        let progress =
            received == 0
            ? (expected.map { "the headers came, announcing \(byteCount($0)); no byte of the body yet" }
                ?? "nothing received yet")
            : "\(byteCount(received))\(expected.map { " of \(byteCount($0))" } ?? "") received"
        return NetworkError(
            code: .timedOut, url: url,
            description:
                "no data from \(shown(url)) within \(Self.format(seconds: seconds)) "
                + "(\(progress)); the server or the connection stalled. Try again later, or allow a longer wait."
        )
    }

    /// The session's own request timeout (`timeoutIntervalForRequest`) passed with no data.
    static func sessionTimedOut(url: URL?, after seconds: Double, error: any Error) -> NetworkError {
        NetworkError(
            code: .timedOut, url: url,
            description:
                "no data from \(shown(url)) within the session's request timeout of \(Self.format(seconds: seconds)); "
                + "the server or the connection stalled. Try again later, or allow a longer wait (idleTimeout:).",
            underlying: error
        )
    }

    /// The transfer ended without an HTTP response (a reply Foundation could not take as one, such as a
    /// redirect without a `Location`).
    static func noResponse(url: URL?) -> NetworkError {
        NetworkError(
            code: .transport, url: url,
            description:
                "the request to \(shown(url)) ended without an HTTP response the job could read (a redirect without a "
                + "Location header, say); nothing was kept. Check the address, or ask the server's operator."
        )
    }

    /// The response is larger than `limit` bytes: `announced` by its `Content-Length`, or found so as
    /// it arrived (`announced` nil). The download was stopped and nothing was kept.
    public static func tooLarge(url: URL?, limit: Int64, announced: Int64?) -> NetworkError {
        let size = announced.map { "announces \(byteCount($0))" } ?? "went on past \(byteCount(limit))"
        return NetworkError(
            code: .tooLarge, url: url,
            description:
                "the response from \(shown(url)) \(size), more than the limit of \(byteCount(limit)); "
                + "the download was stopped and nothing was kept. Check the address."
        )
    }

    /// `url` as messages and job names show it: with a password masked (`user:***@host`), since they go
    /// to logs and dashboards.
    public static func shown(_ url: URL?) -> String {
        guard let url else { return "the server" }
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            components.password != nil || components.user != nil
        else { return url.absoluteString }
        if components.password != nil { components.percentEncodedPassword = "***" }
        return components.string ?? url.absoluteString
    }

    static func byteCount(_ bytes: Int64) -> String {
        if bytes < 1024 { return "\(bytes) bytes" }
        if bytes < 1024 * 1024 { return "\(bytes / 1024) KB" }
        return String(format: "%.1f MB", Double(bytes) / 1_048_576)
    }

    /// A transfer failed with `error` (usually a `URLError`).
    public static func transport(url: URL?, error: any Error) -> NetworkError {
        let reason = (error as? URLError).map(Self.describe) ?? String(describing: error)
        return NetworkError(
            code: .transport, url: url,
            description:
                "the request to \(shown(url)) failed: \(reason). Check the address and the connection, then try again.",
            underlying: error
        )
    }

    /// The downloaded data could not be stored at `path`.
    public static func file(url: URL?, path: String, error: any Error) -> NetworkError {
        NetworkError(
            code: .file, url: url,
            description: "could not save the download from \(shown(url)) to \(path): "
                + "\(reason(error)). Check that the folder exists, is writable and the disk is not full.",
            underlying: error
        )
    }

    /// The system's reason for a file error, as a clause to go before ". Check …": without Foundation's
    /// "The operation could not be completed." and without a full stop of its own (which made "There isn't
    /// enough space.. Check").
    private static func reason(_ error: any Error) -> String {
        if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
        let nsError = error as NSError
        if let posix = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        var text = nsError.localizedDescription.trimmingCharacters(in: .whitespaces)
        for prefix in ["The operation could not be completed.", "The operation couldn’t be completed."]
        where text.hasPrefix(prefix) && text.count > prefix.count {
            text = String(text.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces)
        }
        while text.hasSuffix(".") { text.removeLast() }
        return text
    }

    static func describe(_ error: URLError) -> String {
        switch error.code {
        case .cannotConnectToHost: "could not connect to the server (connection refused?)"
        case .cannotFindHost, .dnsLookupFailed: "the host name could not be resolved"
        case .networkConnectionLost: "the connection was lost before the response was complete"
        case .timedOut: "the request timed out"
        case .notConnectedToInternet: "not connected to the internet"
        case .badServerResponse: "the server's response was not valid HTTP"
        default: "\(error.localizedDescription) (URLError \(error.code.rawValue))"
        }
    }

    static func format(seconds: Double) -> String {
        seconds == seconds.rounded() ? "\(Int(seconds)) second\(seconds == 1 ? "" : "s")" : "\(seconds) seconds"
    }
}
