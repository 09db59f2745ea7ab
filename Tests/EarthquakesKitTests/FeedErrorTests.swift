import Testing

@testable import EarthquakesKit

@Suite("FeedError")
struct FeedErrorTests {
    @Test("codes are distinct and printable")
    func codes() {
        let codes: [FeedError.Code] = [
            .emptyInput, .malformedJSON, .detailDocument, .notAFeatureCollection, .countMismatch, .invalidFeature,
            .unexpectedValue, .notGeoJSON,
        ]
        #expect(Set(codes).count == codes.count)
        #expect(FeedError.Code.countMismatch.description == "countMismatch")
    }

    @Test("every message says what to do")
    func actionable() {
        let position = FeedError.Position(byteOffset: 5, line: 1, column: 6, excerpt: "{\"a\":⟨here⟩")
        let errors: [(FeedError, String)] = [
            (.emptyInput, "Check that the download completed"),
            (.malformedJSON("unexpected end of input, expected a value", at: position), "fetch the feed again"),
            (.malformedJSON("unexpected character 'x', expected a value", at: position), "was not edited or corrupted"),
            (.detailDocument(id: "hv1"), "Use a summary feed"),
            (.notAFeatureCollection(found: "x"), "expected a USGS summary feed"),
            (.countMismatch(declared: 10, actual: 2), "Download it again"),
            (.invalidFeature(index: 1, of: 3, id: nil, problem: "has no \"id\""), "The feed is damaged"),
            (
                .unexpectedValue(path: "features[0].properties.mag", featureIndex: 0, problem: "p"),
                "USGS GeoJSON format"
            ),
        ]
        for (error, advice) in errors {
            #expect(error.description.contains(advice), "\(error.code): \(error)")
        }
    }

    @Test("the position reads as line, column, byte offset and excerpt")
    func positionDescription() {
        let position = FeedError.Position(byteOffset: 5, line: 1, column: 6, excerpt: "{\"a\":⟨here⟩")
        #expect(position.description == "line 1, column 6 (byte offset 5), near: {\"a\":⟨here⟩")
        let error = FeedError.malformedJSON("unexpected end of input, expected a value", at: position)
        #expect(error.position == position)
        #expect(error.description.contains("at line 1, column 6 (byte offset 5)"))
    }
}
