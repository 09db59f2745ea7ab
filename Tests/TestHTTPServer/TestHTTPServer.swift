public import BatonTesting
public import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A real HTTP/1.1 server on 127.0.0.1 (ephemeral port) for tests, whose replies are scripted per
/// request: a whole response, a response that stops part-way until a ``Gate`` opens, or no answer at all.
///
/// ```swift
/// let server = try await TestHTTPServer.start { request in
///     request.path == "/feed" ? .ok(feedData) : .status(404)
/// }
/// defer { Task { await server.shutdown() } }   // or `await server.shutdown()` at the end
/// let url = server.url("/feed")
/// ```
///
/// Every response carries `Connection: close`, so each request uses its own connection.
///
/// ## Thread safety
/// All methods may be called from any thread; the reply closure is called on a new task per request.
public final class TestHTTPServer: Sendable {
    /// A request as the server saw it.
    public struct Request: Sendable, Equatable {
        public var method: String
        /// The request target, for example `/feed.geojson?x=1`.
        public var uri: String
        /// ``uri`` without the query.
        public var path: String { String(uri.prefix { $0 != "?" }) }
    }

    /// What to answer.
    public enum Reply: Sendable {
        /// A complete response.
        case respond(status: Int, headers: [(String, String)], body: Data)
        /// Sends the headers (with the full `Content-Length`) and `body.prefix(sentBeforeGate)`, opens
        /// `sent` (when given), then waits until `release` opens before sending the rest.
        case partial(body: Data, sentBeforeGate: Int, sent: Gate?, release: Gate)
        /// Accepts the request and never answers (until the client gives up or the server shuts down).
        case stall
        /// Sends the headers (with the full `Content-Length`) and the body in pieces of `chunkSize` bytes,
        /// waiting `interval` before each piece: a slow but steady transfer.
        case drip(body: Data, chunkSize: Int, interval: Duration)
        /// Sends the headers (with the full `Content-Length`) and the body in pieces of `chunkSize` bytes,
        /// each once `next` returned for its index (0, 1, …): a transfer paced by the test.
        case paced(body: Data, chunkSize: Int, next: @Sendable (_ piece: Int) async -> Void)
        /// Sends the headers (with the full `Content-Length`) and `body.prefix(sentBeforeClose)`, then
        /// closes the connection: a transfer cut off.
        case cutOff(body: Data, sentBeforeClose: Int)

        /// 200 with `body`.
        public static func ok(_ body: Data, contentType: String = "application/json") -> Reply {
            .respond(status: 200, headers: [("Content-Type", contentType)], body: body)
        }

        /// A status with a short text body.
        public static func status(_ code: Int) -> Reply {
            .respond(status: code, headers: [("Content-Type", "text/plain")], body: Data("status \(code)\n".utf8))
        }
    }

    /// The port the server listens on.
    public let port: Int
    private let channel: any Channel
    private let connections: Recorder<any Channel>
    private let received: Recorder<Request>

    private init(port: Int, channel: any Channel, connections: Recorder<any Channel>, received: Recorder<Request>) {
        self.port = port
        self.channel = channel
        self.connections = connections
        self.received = received
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    public func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)\(path)")!
    }

    /// The requests received so far, in order.
    public var requests: [Request] { received.values }

    /// Starts a server on 127.0.0.1 with an ephemeral port.
    ///
    /// - Parameter reply: Decides the answer to each request; runs in its own task and may suspend
    ///   (for example on a ``Gate``) before answering.
    public static func start(_ reply: @escaping @Sendable (Request) async -> Reply) async throws -> TestHTTPServer {
        let connections = Recorder<any Channel>()
        let received = Recorder<Request>()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                connections.record(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ScriptedHandler(reply: reply, received: received))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = channel.localAddress?.port else { throw CancellationError() }
        return TestHTTPServer(port: port, channel: channel, connections: connections, received: received)
    }

    /// Closes the listening socket and every connection, including stalled ones.
    public func shutdown() async {
        try? await channel.close()
        for connection in connections.values {
            try? await connection.close()
        }
    }
}
