public import BatonDurable
public import Foundation
public import Hummingbird
public import Logging

/// The web dashboard of a job store: runs, a run's jobs, timeline and graph, a job's attempts,
/// workers and schedules, as server-rendered HTML (no framework, no CDN; one small script polls the
/// page while what it shows can change). What `baton dashboard` serves.
///
/// Safe by default: it listens on 127.0.0.1 unless told otherwise, and is read-only unless
/// ``Configuration/allowActions``. Actions (cancel, retry, delete, pause, resume) are POSTs carrying the
/// page's CSRF token (a random value of this server's, checked in constant time) from the dashboard's own
/// origin. With ``Configuration/token`` every request needs it, as a bearer token or as the cookie that
/// opening `/?token=…` once sets. Every value from the store is HTML-escaped, and pages are sent with a
/// content security policy that allows no inline script.
///
/// ## Thread safety
/// A `Sendable` value; its server handles requests concurrently, each reading the store on its own.
public struct Dashboard: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        /// Whether the pages offer, and the server accepts, cancel, retry, delete, pause and resume.
        public var allowActions: Bool
        /// The secret every request must carry (bearer token or cookie), or nil for none.
        public var token: String?
        /// The time zone of the times shown.
        public var timeZone: TimeZone

        public init(
            host: String = "127.0.0.1", port: Int = 8080, allowActions: Bool = false, token: String? = nil,
            timeZone: TimeZone = .current
        ) {
            self.host = host
            self.port = port
            self.allowActions = allowActions
            self.token = token
            self.timeZone = timeZone
        }

        /// Whether `host` is a loopback address (reachable from this machine only): `localhost`, `::1` or
        /// an IPv4 address 127.x.y.z.
        public var isLoopback: Bool { Self.isLoopback(host) }

        static func isLoopback(_ host: String) -> Bool {
            if host == "localhost" || host == "::1" || host == "[::1]" { return true }
            let octets = host.split(separator: ".", omittingEmptySubsequences: false)
            return octets.count == 4 && octets[0] == "127"
                && octets.allSatisfy { octet in UInt8(octet).map { "\($0)" == octet } ?? false }
        }
    }

    public let store: any JobStore
    /// What the header says the store is (`sqlite:…`, `postgres://…`, without a password).
    public let storeName: String
    public let configuration: Configuration
    /// The CSRF token of this server's forms.
    let csrf: String
    let now: @Sendable () -> Date

    public init(
        store: any JobStore, storeName: String, configuration: Configuration,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.storeName = storeName
        self.configuration = configuration
        self.now = now
        var generator = SystemRandomNumberGenerator()
        csrf = (0..<4).map { _ in String(generator.next(), radix: 16) }.joined(separator: "-")
    }

    /// The server, ready to run (`runService()`), or to test.
    public func application(
        logger: Logger = Logger(label: "baton.dashboard"),
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let router = Router()
        router.add(middleware: Guard(token: configuration.token, loopbackOnly: configuration.isLoopback))
        let pages = Pages(dashboard: self)
        router.get("/") { request, _ in await pages.respond { try await pages.runs(request) } }
        router.get("/runs/:id") { request, context in
            await pages.respond { try await pages.run(try Self.number(context, of: "run"), request) }
        }
        router.get("/jobs/:id") { request, context in
            await pages.respond { try await pages.job(try Self.number(context, of: "job"), request) }
        }
        router.get("/workers") { _, _ in await pages.respond { try await pages.workers() } }
        router.get("/schedules") { request, _ in await pages.respond { try await pages.schedules(request) } }
        router.get("/assets/dashboard.css") { _, _ in Assets.response(Assets.css, type: "text/css; charset=utf-8") }
        router.get("/assets/live.js") { _, _ in
            Assets.response(Assets.script, type: "text/javascript; charset=utf-8")
        }
        for action in Action.allCases {
            router.post(RouterPath(action.path)) { request, context in
                await pages.respond { try await pages.act(action, request: request, context: context) }
            }
            for method in [HTTPRequest.Method.get, .head, .put, .delete, .patch] {
                router.on(RouterPath(action.path), method: method) { _, _ in
                    pages.errorPage(.methodNotAllowed, "This is done by a button of the dashboard's pages (a form).")
                }
            }
        }
        // Any other address: the dashboard's own 404 page, through the guard and with its headers (a
        // request that matched no route skipped them).
        for method in [HTTPRequest.Method.get, .head, .post, .put, .delete, .patch] {
            router.on("**", method: method) { request, _ in
                pages.errorPage(.notFound, "There is no page at \(request.uri.path).")
            }
        }
        return Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger)
    }
}

extension Dashboard {
    /// The number of the run or job an address names (`/runs/12`); a 404 that says so for anything else
    /// (Hummingbird's own message called it a parameter that could not be converted).
    static func number(_ context: some RequestContext, of what: String) throws -> Int64 {
        let text = context.parameters.get("id") ?? ""
        guard let number = Int64(text) else {
            throw Pages.Failure(
                status: .notFound, message: "There is no \(what) '\(text)': a \(what) is named by its number.")
        }
        return number
    }
}

/// What a POST may do.
enum Action: String, CaseIterable, Sendable {
    case cancelRun, retryRun, deleteRun, cancelJob, retryJob, pauseSchedule, resumeSchedule

    var path: String {
        switch self {
        case .cancelRun: "/runs/:id/cancel"
        case .retryRun: "/runs/:id/retry"
        case .deleteRun: "/runs/:id/delete"
        case .cancelJob: "/jobs/:id/cancel"
        case .retryJob: "/jobs/:id/retry"
        case .pauseSchedule: "/schedules/pause"
        case .resumeSchedule: "/schedules/resume"
        }
    }
}

/// Compares two secrets in time that does not depend on where they differ.
func sameSecret(_ a: String, _ b: String) -> Bool {
    let (x, y) = (Array(a.utf8), Array(b.utf8))
    var difference = UInt8(x.count == y.count ? 0 : 1)
    for index in 0..<max(x.count, y.count) {
        difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
    }
    return difference == 0
}

/// Every request: the token, when one is set (a bearer token, the cookie, or `?token=` on a GET, which
/// sets the cookie and redirects to the page without it); and every response: headers that keep pages
/// out of frames and caches and allow scripts from the dashboard only.
struct Guard<Context: RequestContext>: RouterMiddleware {
    static var cookie: String { "baton_dashboard_token" }
    let token: String?
    /// Listening on loopback: requests must name a loopback host. A page of another site whose name
    /// was made to resolve to 127.0.0.1 (DNS rebinding) names its own, and is refused.
    let loopbackOnly: Bool

    /// Whether a request's `Host` (`authority`: a name or address, maybe with a port) may reach a
    /// dashboard listening on loopback.
    static func isLoopbackAuthority(_ authority: String?) -> Bool {
        guard let authority else { return false }
        var host = Substring(authority)
        if host.hasPrefix("["), let end = host.firstIndex(of: "]") {
            host = host[host.index(after: host.startIndex)..<end]  // [::1]:8080
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]  // 127.0.0.1:8080
        }
        return Dashboard.Configuration.isLoopback(String(host).lowercased())
    }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response = try await authorised(request, context: context, next: next)
        response.headers[.contentSecurityPolicy] =
            "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        response.headers[.xContentTypeOptions] = "nosniff"
        // Not `no-referrer`: under it a browser sends `Origin: null` with the dashboard's own forms, which
        // the origin check refuses (every button got 403 in Chromium). Other sites get no referrer.
        response.headers[.init("referrer-policy")!] = "same-origin"
        response.headers[.init("x-frame-options")!] = "DENY"
        response.headers[.cacheControl] = "no-store"
        return response
    }

    private func authorised(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if loopbackOnly, !Self.isLoopbackAuthority(request.head.authority) {
            return Response(
                status: .misdirectedRequest, headers: [.contentType: "text/plain; charset=utf-8"],
                body: ResponseBody(
                    byteBuffer: ByteBuffer(
                        string:
                            "This dashboard listens on loopback and answers only to 127.0.0.1, localhost or [::1] in the address.\n"
                    )))
        }
        guard let token else { return try await next(request, context) }
        if let bearer = request.headers[.authorization], bearer.hasPrefix("Bearer "),
            sameSecret(String(bearer.dropFirst("Bearer ".count)), token)
        {
            return try await next(request, context)
        }
        if let cookie = request.cookies[Self.cookie], sameSecret(cookie.value, token) {
            return try await next(request, context)
        }
        let query = QueryItems(request.uri.query)
        if request.method == .get, let given = query["token"] {
            guard sameSecret(given, token) else { return Self.refused(wrong: true) }
            // The same page, without the token (its other parameters kept, as they were written); a path
            // starting "//" (another host to a browser) is not one.
            let path = "/" + request.uri.path.drop { $0 == "/" || $0 == "\\" }
            let rest = (request.uri.query ?? "").split(separator: "&").filter {
                $0.split(separator: "=", maxSplits: 1).first.map { $0.removingPercentEncoding != "token" } ?? true
            }
            var response = Response.redirect(
                to: path + (rest.isEmpty ? "" : "?" + rest.joined(separator: "&")), type: .normal)
            response.setCookie(Cookie(name: Self.cookie, value: token, path: "/", httpOnly: true, sameSite: .strict))
            return response
        }
        return Self.refused(wrong: false)
    }

    static func refused(wrong: Bool) -> Response {
        let page = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>Token needed · Baton</title></head>
            <body style="font: 14px sans-serif; margin: 2em">
            <h1>This dashboard needs its token</h1>
            <p>\(wrong ? "That token is not this dashboard's. " : "")Open the address that <code>baton dashboard</code> printed when it started, or give the token it was started with (<code>--token</code>):</p>
            <form method="get" action="/"><input type="password" name="token" autocomplete="off" aria-label="token"> <button>Open</button></form>
            </body></html>
            """
        return Response(
            status: .unauthorized, headers: [.contentType: "text/html; charset=utf-8", .wwwAuthenticate: "Bearer"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: page)))
    }
}

/// The parameters of a query string or a form body (`application/x-www-form-urlencoded`): `+` is a
/// space, `%XX` a byte; the first value of a name wins.
struct QueryItems: Sendable {
    private var values: [String: String] = [:]

    init(_ query: String?) {
        guard let query, !query.isEmpty else { return }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String? {
                String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
            }
            guard let name = parts.first.flatMap(decode) else { continue }
            let value = parts.count > 1 ? decode(parts[1]) ?? "" : ""
            if values[name] == nil { values[name] = value }
        }
    }

    subscript(name: String) -> String? {
        guard let value = values[name], !value.isEmpty else { return nil }
        return value
    }
}
