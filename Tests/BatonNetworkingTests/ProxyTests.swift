import Baton
import BatonNetworking
import Foundation
import TestHTTPServer
import Testing

@Suite(.timeLimit(.minutes(1))) struct ProxyTests {
    @Test func theStandardVariablesAreRead() {
        let proxies = ProxySettings(environment: [
            "http_proxy": "http://user:secret@proxy.example:3128/", "HTTPS_PROXY": "secure.example:8443",
            "no_proxy": "localhost, .internal.example,10.0.0.1:8080",
        ])
        #expect(proxies.http?.host == "proxy.example")
        #expect(proxies.http?.port == 3128)
        #expect(proxies.http?.variable == "http_proxy")
        #expect(proxies.https?.host == "secure.example")
        #expect(proxies.https?.port == 8443)
        #expect(proxies.proxy(for: URL(string: "http://earthquake.usgs.gov/feed")!)?.host == "proxy.example")
        #expect(proxies.proxy(for: URL(string: "https://earthquake.usgs.gov/feed")!)?.host == "secure.example")
        #expect(proxies.proxy(for: URL(string: "http://localhost:8080/x")!) == nil)
        #expect(proxies.proxy(for: URL(string: "http://a.internal.example/x")!) == nil)
        #expect(proxies.proxy(for: URL(string: "http://internal.example/x")!) == nil)
        #expect(proxies.proxy(for: URL(string: "http://10.0.0.1/x")!) == nil)
        #expect(proxies.proxy(for: URL(string: "http://notinternal.example/x")!) != nil)
        #expect(proxies.proxy(for: URL(string: "file:///tmp/x")!) == nil)
    }

    @Test func allProxyAndAStarInNoProxy() {
        let all = ProxySettings(environment: ["all_proxy": "proxy.example"])
        #expect(all.proxy(for: URL(string: "https://x.example/")!)?.port == 1080)
        let none = ProxySettings(environment: ["all_proxy": "proxy.example", "NO_PROXY": "*"])
        #expect(none.proxy(for: URL(string: "https://x.example/")!) == nil)
        #expect(ProxySettings.none.proxy(for: URL(string: "https://x.example/")!) == nil)
    }

    @Test func reachabilityChecksTheProxyNotTheUnresolvableServer() async throws {
        let proxy = try await TestHTTPServer.start { _ in .status(200) }
        let feed = URL(string: "http://feeds.invalid/2.5_day.geojson")!
        let proxies = ProxySettings(environment: ["http_proxy": "http://127.0.0.1:\(proxy.port)"])
        let condition = try #require(ReachabilityCondition(url: feed, timeout: .seconds(5), proxies: proxies))
        #expect(condition.host == "127.0.0.1")
        #expect(condition.port == proxy.port)
        #expect(condition.name == "reachability of the proxy 127.0.0.1 port \(proxy.port)")
        try await condition.check()
        await proxy.shutdown()

        // Without the proxy, the same URL fails on its name.
        let direct = try #require(ReachabilityCondition(url: feed, timeout: .seconds(5), proxies: .none))
        let error = try await #require(throws: NetworkError.self) { try await direct.check() }
        #expect(error.code == .nameResolution)
    }

    @Test func aProxyThatIsDownIsNamed() async throws {
        let port = try await closedPort()
        let proxies = ProxySettings(environment: ["https_proxy": "127.0.0.1:\(port)"])
        let condition = try #require(
            ReachabilityCondition(url: URL(string: "https://feeds.invalid/x")!, proxies: proxies))
        let error = try await #require(throws: NetworkError.self) { try await condition.check() }
        #expect(error.code == .unreachable)
        #expect(error.description.hasPrefix("the proxy set by https_proxy cannot be used: cannot reach 127.0.0.1"))
        #expect(error.description.contains("unset https_proxy"))
    }
}
