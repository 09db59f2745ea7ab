import Baton
import BatonDurable
import Foundation
import Testing

@testable import BatonPostgres

/// A statement outside `BEGIN`/`COMMIT` commits when the server handles the `Sync` after it — after
/// the server has sent its rows. A connection cut in that window hands the client the rows of a
/// transaction that is then rolled back. The full-size chaos run met it during its PostgreSQL
/// restart: a completion was said accepted but never recorded, and the job ran and was accepted
/// again. A proxy makes the window happen on purpose.
@Suite("PostgreSQL commit window", .enabled(if: TestPostgres.enabled, TestPostgres.skipMessage))
struct PostgresCommitWindowTests {
    @Test("a connection cut after a completion's rows but before its commit: the completion is recorded once")
    func cutBeforeCommit() async throws {
        try await TestPostgres.withStore("window") { direct, base in
            try #require(
                ["127.0.0.1", "localhost"].contains(base.host),
                "the proxy forwards to 127.0.0.1, the server is elsewhere")
            let proxy = try CuttingProxy(toLocalPort: base.port)
            defer { proxy.stop() }
            var configuration = base
            configuration.port = proxy.port
            // PostgresNIO sometimes leaves the check on the cut connection unanswered instead of failing
            // it; the store then abandons it after the operation timeout and runs the statement again.
            configuration.operationTimeout = .seconds(2)
            let store = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            defer { store.close() }
            // Submitted and claimed directly: only the call under test goes through the proxy and its short
            // timeout (a claim abandoned on a slow machine would be taken again as a second claim, empty).
            let run = try await direct.submit(PostgresFaultTests.chaosGraph(micros: 0), uniqueKey: nil)
            let claimed = try await direct.claim(worker: "w", kinds: ["chaos.work"], limit: 1, lease: .seconds(60))
            try #require(claimed.count == 1)

            proxy.armed.withLock { $0 = true }
            let result = try await store.finish([
                .init(lease: claimed[0].lease, outcome: .succeeded(output: Data("\"done\"".utf8)))
            ])
            #expect(proxy.cuts.withLock { $0 } == 1, "the proxy cut no connection: the test did not test anything")
            #expect(result == [.accepted(.succeeded)])
            let record = try await direct.snapshot(of: run.run).jobs[0]
            #expect(record.state == .succeeded, "the completion said accepted is not recorded")
            #expect(record.output == Data("\"done\"".utf8))
        }
    }

    @Test(
        "the same cut in a completion followed by a claim on its connection: recorded once, the claim taken afterwards"
    )
    func cutBeforeCommitThenClaim() async throws {
        try await TestPostgres.withStore("window2") { direct, base in
            try #require(
                ["127.0.0.1", "localhost"].contains(base.host),
                "the proxy forwards to 127.0.0.1, the server is elsewhere")
            let proxy = try CuttingProxy(toLocalPort: base.port)
            defer { proxy.stop() }
            var configuration = base
            configuration.port = proxy.port
            configuration.operationTimeout = .seconds(2)
            let store = try await TestPostgres.open(configuration: configuration, logger: TestPostgres.logger)
            defer { store.close() }
            // Two independent jobs: one claimed now, the other claimed with the first one's completion.
            var graph = PostgresFaultTests.chaosGraph(micros: 0)
            graph.jobs.append(JobSpec(name: "second", kind: "chaos.work", input: graph.jobs[0].input))
            let run = try await direct.submit(graph, uniqueKey: nil)
            let claimed = try await direct.claim(worker: "w", kinds: ["chaos.work"], limit: 1, lease: .seconds(60))
            try #require(claimed.count == 1)

            proxy.armed.withLock { $0 = true }
            let (results, next) = try await store.finish(
                [.init(lease: claimed[0].lease, outcome: .succeeded(output: Data("\"done\"".utf8)))],
                thenClaim: 1, worker: "w", kinds: ["chaos.work"], lease: .seconds(60))
            #expect(proxy.cuts.withLock { $0 } == 1, "the proxy cut no connection: the test did not test anything")
            #expect(results == [.accepted(.succeeded)])
            var taken = next.map(\.job)
            if taken.isEmpty {
                // The retry may run before the server has ended the cut connection's transaction, whose
                // lock on the second job makes its claim skip it (SKIP LOCKED): the job is claimable once
                // that transaction is gone, and must be claimed exactly once.
                let deadline = ContinuousClock.now + .seconds(60)
                while taken.isEmpty, ContinuousClock.now < deadline {
                    taken = try await direct.claim(worker: "w", kinds: ["chaos.work"], limit: 1, lease: .seconds(60))
                        .map(\.job)
                    if taken.isEmpty { try await Task.sleep(for: .milliseconds(20)) }  // polling the server
                }
            }
            #expect(taken == run.jobs.filter { $0 != claimed[0].job })
            let records = try await direct.snapshot(of: run.run).jobs
            let first = try #require(records.first { $0.id == claimed[0].job })
            #expect(first.state == .succeeded, "the completion said accepted is not recorded")
            #expect(first.output == Data("\"done\"".utf8))
            let second = try #require(records.first { $0.id != claimed[0].job })
            #expect(second.state == .running, "the job said claimed is not running")
            #expect(second.attempts == 1)
        }
    }
}

/// A TCP proxy to the server that, once armed, turns the next `Sync` that ends an `Execute` into a `Flush`
/// (the server then sends the statement's rows and `CommandComplete` and waits, its transaction
/// open), passes those on, and closes both sides: the server rolls the transaction back.
/// Blocking sockets on threads of their own, never on the concurrency pool; it forwards to the
/// server on 127.0.0.1.
final class CuttingProxy: Sendable {
    let port: Int
    let armed = Protected(false)
    let cuts = Protected(0)
    private let listener: Int32
    private let sockets = Protected<Set<Int32>>([])

    init(toLocalPort serverPort: Int) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.address(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        guard bound == 0, named == 0, listen(listener, 16) == 0 else {
            close(listener)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "proxy: cannot listen"])
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        self.listener = listener
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var target = Self.address(port: serverPort)
                let connected = withUnsafePointer(to: &target) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                guard connected == 0 else {
                    close(client)
                    close(server)
                    continue
                }
                sockets.withLock { $0.formUnion([client, server]) }
                let cutting = Protected(false)
                let running = Protected(2)
                for (source, destination, startup) in [(client, server, true), (server, client, false)] {
                    Thread.detachNewThread { [self] in
                        pump(from: source, to: destination, startup: startup, cutting: cutting)
                        // The second pump to end closes the pair (out of the set first, so that stop()
                        // never shuts a number the system has given to another file since).
                        guard
                            running.withLock({
                                $0 -= 1; return $0 == 0
                            })
                        else { return }
                        sockets.withLock { $0.subtract([client, server]) }
                        close(client)
                        close(server)
                    }
                }
            }
        }
    }

    static func address(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Passes whole protocol messages from one socket to the other. Client to server: an armed
    /// proxy's next `Sync` ('S') after an `Execute` ('E') becomes a `Flush` ('H'), and nothing the client
    /// sends after it reaches the server. Server to client: after the `CommandComplete` ('C') of that
    /// statement, both sockets are shut.
    ///
    /// Nothing after the `Flush`: a statement the client sent behind it (the claim that
    /// `finish(_:thenClaim:…)` sends on the same connection, often before the first one's rows came back)
    /// would otherwise run in the transaction the `Flush` left open, and its own `Sync` would commit
    /// both — a different window (a claim committed whose answer is lost, held until its lease ends),
    /// which made the test with a claim fail now and then, waiting out the lease.
    private func pump(from source: Int32, to destination: Int32, startup: Bool, cutting: Protected<Bool>) {
        var pending: [UInt8] = []
        var untyped = startup  // The client's first message (startup) has no type byte.
        // Whether the client has sent an `Execute` since its last `Sync` (a `Sync` that only ends the
        // preparation of a statement is passed on).
        var executing = false
        // The client's messages after the converted `Sync` are dropped until the cut shuts the sockets.
        var holding = false
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(source, &chunk, chunk.count)
            guard count > 0 else { break }
            if holding { continue }
            pending += chunk[0..<count]
            var output: [UInt8] = []
            var cut = false
            while true {
                let header = untyped ? 4 : 5
                guard pending.count >= header else { break }
                let lengthStart = untyped ? 0 : 1
                let length = pending[lengthStart..<lengthStart + 4].reduce(0) { $0 << 8 | Int($1) }
                let total = lengthStart + length
                guard pending.count >= total else { break }
                var message = Array(pending[0..<total])
                pending.removeFirst(total)
                if untyped {
                    untyped = false
                } else if startup, message[0] == UInt8(ascii: "E") {
                    executing = true
                } else if startup, message[0] == UInt8(ascii: "S"), executing,
                    armed.withLock({ armed in
                        defer { armed = false }
                        return armed
                    })
                {
                    cutting.withLock { $0 = true }
                    message[0] = UInt8(ascii: "H")
                    output += message
                    holding = true
                    pending.removeAll()
                    break
                } else if startup, message[0] == UInt8(ascii: "S") {
                    executing = false
                } else if !startup, message[0] == UInt8(ascii: "C"), cutting.withLock({ $0 }) {
                    output += message
                    cut = true
                    break
                }
                output += message
            }
            var written = 0
            while written < output.count {
                let step = output[written...].withUnsafeBytes { write(destination, $0.baseAddress, $0.count) }
                guard step > 0 else { break }
                written += step
            }
            if cut {
                cuts.withLock { $0 += 1 }
                shutdown(source, Int32(SHUT_RDWR))
                shutdown(destination, Int32(SHUT_RDWR))
                break
            }
        }
        shutdown(destination, Int32(SHUT_WR))
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        sockets.withLock { sockets in
            for socket in sockets { shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }
}
