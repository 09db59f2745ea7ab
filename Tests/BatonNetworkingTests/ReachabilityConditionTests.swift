import Baton
import BatonTesting
import Dispatch
import Foundation
import TestHTTPServer
import Testing

@testable import BatonNetworking

@Suite(.timeLimit(.minutes(1))) struct ReachabilityConditionTests {
    @Test func anOpenPortOnLoopbackIsSatisfied() async throws {
        let server = try await TestHTTPServer.start { _ in .status(200) }
        let condition = ReachabilityCondition(host: "127.0.0.1", port: server.port)
        let result = await condition.evaluate(for: BlockJob {})
        await server.shutdown()
        guard case .satisfied = result else {
            Issue.record("expected satisfied, got \(result)")
            return
        }
    }

    @Test func aClosedPortFailsFastWithAClearError() async throws {
        let port = try await closedPort()
        let condition = ReachabilityCondition(host: "127.0.0.1", port: port, timeout: .seconds(10))
        let error = try await #require(throws: NetworkError.self) { try await condition.check() }

        #expect(error.code == .unreachable)
        #expect(error.description.contains("cannot reach 127.0.0.1 port \(port)"))
        // "refused" (not "no answer within 10 seconds") shows it failed on the refusal, not at the deadline.
        #expect(error.description.contains("refused"))
    }

    @Test func anUnresolvableNameIsANameResolutionError() async throws {
        let condition = ReachabilityCondition(host: "nonexistent.invalid", port: 80, timeout: .seconds(10))
        let error = try await #require(throws: NetworkError.self) { try await condition.check() }
        #expect(error.code == .nameResolution)
        #expect(error.description.contains("\"nonexistent.invalid\""))

        guard case .failed(let failure) = await condition.evaluate(for: BlockJob {}) else {
            Issue.record("expected the condition to fail")
            return
        }
        #expect((failure as? NetworkError)?.code == .nameResolution)
    }

    @Test func theHostAndPortComeFromTheURL() throws {
        let plain = try #require(ReachabilityCondition(url: URL(string: "http://example.com/feed")!))
        #expect((plain.host, plain.port) == ("example.com", 80))
        let secure = try #require(ReachabilityCondition(url: URL(string: "https://example.com/feed")!))
        #expect(secure.port == 443)
        let explicit = try #require(ReachabilityCondition(url: URL(string: "http://127.0.0.1:8080/")!))
        #expect((explicit.host, explicit.port) == ("127.0.0.1", 8080))
        let ipv6 = try #require(ReachabilityCondition(url: URL(string: "http://[::1]:9000/")!))
        #expect((ipv6.host, ipv6.port) == ("::1", 9000))
        #expect(ReachabilityCondition(url: URL(fileURLWithPath: "/tmp/feed.json")) == nil)
        #expect(plain.name == "reachability of example.com port 80")
    }
    /// The review: the timeout started after the name was resolved, so a check took resolution time plus
    /// the timeout. Here resolving takes longer than the whole timeout: the check fails saying so (it
    /// used to connect afterwards, and succeed, past its timeout).
    @Test func theTimeoutCoversResolvingTheName() async throws {
        let server = try await TestHTTPServer.start { _ in .status(200) }
        let condition = ReachabilityCondition(host: "localhost.test", port: server.port, timeout: .milliseconds(200))
        let error = await #expect(throws: NetworkError.self) {
            try await condition.check(resolve: { _, port, url throws(NetworkError) in
                // A slow name server: the answer comes after the timeout, before the waiting gives up.
                _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(250))
                return try HostProbe.resolve(host: "127.0.0.1", port: port, url: url)
            })
        }
        await server.shutdown()
        #expect(error?.code == .nameResolution)
        #expect(error?.description.contains("\"localhost.test\"") == true, "\(error?.description ?? "")")
    }

    /// The review (item 13): cancelling the task did not end the check, which waited for its timeout.
    @Test func cancellingTheTaskEndsTheCheckAtOnce() async throws {
        let entered = Gate()
        let release = Gate()
        defer { release.open() }
        let condition = ReachabilityCondition(host: "slow.test", port: 80, timeout: .seconds(60))
        let check = Task { () -> NetworkError? in
            do throws(NetworkError) {
                try await condition.check(resolve: { _, port, url throws(NetworkError) in
                    entered.open()
                    release.wait()  // a name server that does not answer
                    return try HostProbe.resolve(host: "127.0.0.1", port: port, url: url)
                })
                return nil
            } catch {
                return error
            }
        }
        await entered.waitAsync()
        check.cancel()
        try await withDeadline(.seconds(10), "the cancelled check returns (its timeout is 60 s)") {
            _ = await check.value
        }
        let error = await check.value
        #expect(error?.code == .cancelled)
        #expect(error?.underlying is CancellationError)
    }
}
