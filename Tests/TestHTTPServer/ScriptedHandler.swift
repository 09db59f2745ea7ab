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
            Task(executorPreference: ReplyExecutor.shared) {
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
        case .drip(let body, let chunkSize, let interval):
            writeFeedHead(length: body.count, version: version, context: context)
            context.flush()
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            let chunks = Self.pieces(of: body, size: chunkSize)
            // Scheduled on the event loop, so the pace does not depend on how busy the test's threads are.
            @Sendable func send(_ index: Int) {
                guard index < chunks.count else { return }
                loop.scheduleTask(
                    in: .nanoseconds(
                        Int64(interval.components.seconds) * 1_000_000_000
                            + interval.components.attoseconds / 1_000_000_000)
                ) {
                    let (handler, context) = bound.value
                    guard context.channel.isActive else { return }
                    handler.writeBody(chunks[index], context: context)
                    if index == chunks.count - 1 {
                        handler.end(context: context)
                    } else {
                        context.flush()
                        send(index + 1)
                    }
                }
            }
            send(0)
        case .paced(let body, let chunkSize, let next):
            writeFeedHead(length: body.count, version: version, context: context)
            context.flush()
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            let chunks = Self.pieces(of: body, size: chunkSize)
            Task(executorPreference: ReplyExecutor.shared) {
                for (index, chunk) in chunks.enumerated() {
                    await next(index)
                    let last = index == chunks.count - 1
                    let stillOpen = try? await loop.submit {
                        let (handler, context) = bound.value
                        guard context.channel.isActive else { return false }
                        handler.writeBody(chunk, context: context)
                        if last { handler.end(context: context) } else { context.flush() }
                        return true
                    }.get()
                    guard stillOpen == true else { return }
                }
            }
        case .cutOff(let body, let sentBeforeClose):
            writeFeedHead(length: body.count, version: version, context: context)
            writeBody(body.prefix(sentBeforeClose), context: context)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(channel.allocator.buffer(capacity: 0)))))
                .whenComplete { _ in channel.close(promise: nil) }
        case .partial(let body, let sentBeforeGate, let sent, let release):
            writeFeedHead(length: body.count, version: version, context: context)
            writeBody(body.prefix(sentBeforeGate), context: context)
            context.flush()
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            let rest = body.dropFirst(sentBeforeGate)
            sent?.open()
            Task(executorPreference: ReplyExecutor.shared) {
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

    /// `body` cut into pieces of `size` bytes (the last one may be shorter).
    private static func pieces(of body: Data, size: Int) -> [Data] {
        stride(from: 0, to: body.count, by: max(1, size)).map {
            body[body.startIndex + $0..<body.startIndex + min(body.count, $0 + max(1, size))]
        }
    }

    /// The head of a 200 response with a JSON body of `length` bytes, sent part by part.
    private func writeFeedHead(length: Int, version: HTTPVersion, context: ChannelHandlerContext) {
        writeHead(
            status: 200, headers: [("Content-Type", "application/json")], length: length, version: version,
            context: context)
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

/// Runs the reply closures on a thread of their own, so a test process whose cooperative threads are
/// all blocked (by other tests running at the same time) still answers its requests promptly.
final class ReplyExecutor: TaskExecutor {
    static let shared = ReplyExecutor()
    private let queue = DispatchQueue(label: "TestHTTPServer.replies", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
