import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A fresh folder under the temporary directory, for files a test writes. Call ``remove()`` at the end.
struct ScratchFolder {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("BatonNetworkingTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    /// Every name in the folder, hidden files included, sorted.
    var contents: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

extension URLSession {
    /// A session without caches or cookies, so every test talks to its server.
    static func forTests() -> URLSession { URLSession(configuration: .ephemeral) }
}

/// Bytes that are easy to recognise: "0123456789" repeated.
func sampleBody(count: Int) -> Data {
    Data((0..<count).map { UInt8(ascii: "0") + UInt8($0 % 10) })
}
