import EarthquakesKit
import Testing

@Suite("GreatCircle")
struct GreatCircleTests {
    @Test("known distances between cities, within 1 km of the haversine value")
    func knownDistances() {
        let tokyo = (latitude: 35.6762, longitude: 139.6503)
        let sanFrancisco = (latitude: 37.7749, longitude: -122.4194)
        let honolulu = (latitude: 21.3069, longitude: -157.8583)
        #expect(abs(GreatCircle.distanceKilometers(from: tokyo, to: sanFrancisco) - 8_274.6) < 1)
        #expect(abs(GreatCircle.distanceKilometers(from: honolulu, to: sanFrancisco) - 3_853.9) < 1)
        #expect(abs(GreatCircle.distanceKilometers(from: honolulu, to: tokyo) - 6_209.4) < 1)
    }

    @Test("zero for the same point, symmetric, and short across the antimeridian")
    func properties() {
        let a = (latitude: 0.0, longitude: 179.5)
        let b = (latitude: 0.0, longitude: -179.5)
        #expect(GreatCircle.distanceKilometers(from: a, to: a) == 0)
        #expect(GreatCircle.distanceKilometers(from: a, to: b) == GreatCircle.distanceKilometers(from: b, to: a))
        #expect(abs(GreatCircle.distanceKilometers(from: a, to: b) - GreatCircle.kilometersPerDegree) < 0.001)
    }

    @Test("antipodes are half the circumference")
    func antipodes() {
        let d = GreatCircle.distanceKilometers(from: (90, 0), to: (-90, 0))
        #expect(abs(d - .pi * GreatCircle.earthRadiusKilometers) < 0.001)
    }
}
