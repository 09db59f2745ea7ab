import BatonTesting
import Foundation
import NIOCore
import NIOHTTP1

/// Answers each request of one connection with the ``TestHTTPServer/Reply`` the test scripted.
final class ScriptedHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let reply: @Sendable (TestHTTPServer.Request) async -> TestHTTPServer.Reply
    private let received: Recorder<TestHTTPServer.Request>
    private var head: HTTPRequestHead?

    init(
        reply: @escaping @Sendable (TestHTTPServer.Request) async -> TestHTTPServer.Reply,
        received: Recorder<TestHTTPServer.Request>
    ) {
        self.reply = reply
        self.received = received
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head else { return }
            self.head = nil
            let request = TestHTTPServer.Request(method: head.method.rawValue, uri: head.uri)
            received.record(request)
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            let reply = self.reply
            Task {
                let answer = await reply(request)
                loop.execute {
                    let (handler, context) = bound.value
                    handler.send(answer, version: head.version, context: context)
                }
            }
        }
    }

    private func send(_ answer: TestHTTPServer.Reply, version: HTTPVersion, context: ChannelHandlerContext) {
        switch answer {
        case .stall:
            return
        case .respond(let status, let headers, let body):
            writeHead(status: status, headers: headers, length: body.count, version: version, context: context)
            writeBody(body, context: context)
            end(context: context)
        case .partial(let body, let sentBeforeGate, let sent, let release):
            writeHead(
                status: 200, headers: [("Content-Type", "application/json")], length: body.count, version: version,
                context: context)
            writeBody(body.prefix(sentBeforeGate), context: context)
            context.flush()
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            let rest = body.dropFirst(sentBeforeGate)
            sent?.open()
            Task {
                await release.waitAsync()
                loop.execute {
                    let (handler, context) = bound.value
                    guard context.channel.isActive else { return }
                    handler.writeBody(rest, context: context)
                    handler.end(context: context)
                }
            }
        }
    }

    private func writeHead(
        status: Int, headers: [(String, String)], length: Int, version: HTTPVersion, context: ChannelHandlerContext
    ) {
        var fields = HTTPHeaders(headers)
        fields.replaceOrAdd(name: "Content-Length", value: String(length))
        fields.replaceOrAdd(name: "Connection", value: "close")
        let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: status), headers: fields)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
    }

    private func writeBody(_ bytes: some DataProtocol, context: ChannelHandlerContext) {
        guard !bytes.isEmpty else { return }
        let buffer = context.channel.allocator.buffer(bytes: bytes)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
    }

    private func end(context: ChannelHandlerContext) {
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }
}
