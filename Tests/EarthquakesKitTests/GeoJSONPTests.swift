import BatonTesting
import Testing

@testable import EarthquakesKit

@Suite("GeoJSONP", .offThePool)
struct GeoJSONPTests {
    func unwrap(_ text: String) -> (callback: String, json: String)? {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBufferPointer { buffer in
            GeoJSONP.unwrap(buffer).map { ($0.callback, String(decoding: bytes[$0.json], as: UTF8.self)) }
        }
    }

    @Test("unwraps the USGS form and variants with whitespace, no semicolon, dotted names and a BOM")
    func unwraps() {
        #expect(unwrap("eqfeed_callback({\"a\":1});")! == ("eqfeed_callback", "{\"a\":1}"))
        #expect(unwrap("  cb ( {} ) ;\n")! == ("cb", " {} "))
        #expect(unwrap("window.handle({})")! == ("window.handle", "{}"))
        #expect(unwrap("\u{FEFF}$cb([])")! == ("$cb", "[]"))
    }

    @Test("leaves anything else alone", arguments: ["{\"a\":1}", "[]", "null", "cb({}", "cb{}", "1cb({})", "", "cb"])
    func leavesOthers(text: String) {
        #expect(unwrap(text) == nil)
    }
}
