import EarthquakesKit
import Foundation
import Testing

@Suite("Earthquake")
struct EarthquakeTests {
    @Test("displayTitle prefers the feed's title")
    func titleWins() {
        let quake = Earthquake(
            id: "a", latitude: 1, longitude: 2, depth: 3, magnitude: 2.5, place: "Here", title: "Feed title")
        #expect(quake.displayTitle == "Feed title")
    }

    @Test(
        "displayTitle is built like the USGS builds it when the title is missing",
        arguments: [
            (2.5 as Double?, "10 km SW of Volcano, Hawaii" as String?, "M 2.5 - 10 km SW of Volcano, Hawaii"),
            (4, "Somewhere", "M 4.0 - Somewhere"),
            (-0.38, "Nevada", "M -0.4 - Nevada"),
            (-0.04, "Nevada", "M 0.0 - Nevada"),
            (7.64, "Offshore", "M 7.6 - Offshore"),
            (nil, "Somewhere", "M ? - Somewhere"),
            (1.2, nil, "M 1.2 - event a"),
            (1.2, "", "M 1.2 - event a"),
        ]
    )
    func builtTitle(magnitude: Double?, place: String?, expected: String) {
        let quake = Earthquake(id: "a", latitude: 1, longitude: 2, depth: 3, magnitude: magnitude, place: place)
        #expect(quake.displayTitle == expected)
    }

    @Test("an empty title counts as missing")
    func emptyTitle() {
        let quake = Earthquake(id: "a", latitude: 1, longitude: 2, depth: 3, magnitude: 3, place: "P", title: "")
        #expect(quake.displayTitle == "M 3.0 - P")
    }

    @Test("status is lower-cased on creation")
    func statusLowercased() {
        #expect(Earthquake(id: "a", latitude: 0, longitude: 0, depth: 0, status: "REVIEWED").status == "reviewed")
        #expect(Earthquake(id: "a", latitude: 0, longitude: 0, depth: 0).status == nil)
    }

    @Test("Codable round trip keeps every field")
    func codable() throws {
        let quake = Earthquake(
            id: "ci1", latitude: 34.1, longitude: -117.2, depth: -0.5, magnitude: -0.3, magnitudeType: "ml",
            place: "Höfn",
            time: Date(timeIntervalSince1970: 1_478_113_011.327), updated: nil, timeZoneOffset: -480, felt: 3,
            status: "automatic", tsunami: nil, significance: 0, network: "ci", code: "1", type: "quarry blast"
        )
        let decoded = try JSONDecoder().decode(Earthquake.self, from: JSONEncoder().encode(quake))
        #expect(decoded == quake)
    }
}
