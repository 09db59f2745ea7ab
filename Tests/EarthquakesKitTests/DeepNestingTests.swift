import BatonTesting
import Foundation
import Testing

@testable import EarthquakesKit

/// Valid JSON nested deeper than `JSONDecoder` reads (a feature that is an array 100,000 deep) is named
/// with where and why, rather than "The given data was not valid JSON" with no position.
@Suite("Deep nesting", .offThePool)
struct DeepNestingTests {
    @Test("a feed nested too deeply is named, with the position")
    func tooDeepIsNamed() throws {
        let depth = 100_000
        let text =
            #"{"type":"FeatureCollection","features":["# + String(repeating: "[", count: depth)
            + String(repeating: "]", count: depth) + "]}"
        let error = #expect(throws: FeedError.self) { try FeedParser().parse(Data(text.utf8)) }
        #expect(error?.code == .malformedJSON)
        #expect(error?.description.contains("nested more than 512 deep") == true, "\(String(describing: error))")
        #expect(error?.position?.line == 1)
    }

    @Test("brackets inside strings do not count")
    func bracketsInStrings() {
        let text = #"{"a":"[[[[\"{{{{","b":[1]}"#
        let depth = Array(text.utf8).withUnsafeBufferPointer { FeedParser.tooDeep($0) }
        #expect(depth == nil)
    }
}
