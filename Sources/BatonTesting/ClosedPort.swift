#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TCP port on 127.0.0.1 where nothing listens, for tests of refused connections.
///
/// Chosen below Linux's (and macOS's) range of ephemeral ports (32768 and up): a port a test bound
/// and closed again can be handed out at once as the local port of another connection, and a
/// connection to 127.0.0.1 on a port the kernel also picks as its own source port connects to itself
/// (TCP's simultaneous open) — a "closed" port that accepts. No outgoing connection uses these ports,
/// and tests bind port 0 (the ephemeral range) for their listeners.
public func closedLoopbackPort() -> Int {
    while true {
        let port = Int.random(in: 20_000..<32_000)
        let socketKind: Int32
        #if canImport(Glibc)
        socketKind = Int32(SOCK_STREAM.rawValue)
        #else
        socketKind = SOCK_STREAM
        #endif
        let fd = socket(AF_INET, socketKind, 0)
        guard fd >= 0 else { continue }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if bound == 0 { return port }  // free now, and nothing is handed this port by the kernel
    }
}
