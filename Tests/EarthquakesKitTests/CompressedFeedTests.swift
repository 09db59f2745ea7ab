import BatonTesting
import Foundation
import Testing

@testable import EarthquakesKit

/// A compressed file given as the feed is named as one, with what to do.
@Suite("Compressed input", .offThePool)
struct CompressedFeedTests {
    @Test("a gzip or ZIP file is called compressed, not malformed JSON at byte 0")
    func compressedInputIsNamed() throws {
        let gzip = Data([0x1F, 0x8B, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xAB, 0xAE, 0x05, 0x00])
        let zip = Data([0x50, 0x4B, 0x03, 0x04, 0x14, 0x00])
        for (data, hint) in [(gzip, "gunzip FILE"), (zip, "unzip FILE")] {
            let error = #expect(throws: FeedError.self) { try FeedParser().parse(data) }
            #expect(error?.code == .malformedJSON)
            #expect(error?.description.contains("-compressed") == true, "\(String(describing: error))")
            #expect(error?.description.contains(hint) == true)
        }
    }
}
