import BatonTesting
import EarthquakesKit
import Foundation
import Testing

@Suite("EarthquakeStore queries", .offThePool)
struct EarthquakeStoreQueriesTests {
    let store: EarthquakeStore

    init() throws {
        store = try EarthquakeStore.inMemory()
        try store.importFeed(Quakes.all)
    }

    // Quakes.all — id: magnitude, hours before the reference date
    //   tokyo: 6.1, 5   sf: 4.2, 2   anchorage: 5.0, 30   quito: nil, 1   undated: 2.0, no time

    @Test("recent: newest first, events without a time last, limit respected")
    func recent() throws {
        #expect(try store.recent().map(\.id) == ["quito", "sf", "tokyo", "anchorage", "undated"])
        #expect(try store.recent(limit: 2).map(\.id) == ["quito", "sf"])
        #expect(try store.recent(limit: 0).isEmpty)
    }

    @Test("list sorted by magnitude: strongest first, unknown magnitudes last")
    func byMagnitude() throws {
        #expect(try store.list(sort: .magnitude).map(\.id) == ["tokyo", "anchorage", "sf", "undated", "quito"])
    }

    @Test("list with a minimum magnitude excludes smaller and unknown magnitudes")
    func minMagnitude() throws {
        #expect(try store.list(minMagnitude: 4.2).map(\.id) == ["sf", "tokyo", "anchorage"])
        #expect(try store.list(minMagnitude: 4.2, sort: .magnitude).map(\.id) == ["tokyo", "anchorage", "sf"])
        #expect(try store.list(minMagnitude: 9).isEmpty)
    }

    @Test("list since a date excludes older and undated events; filters combine")
    func since() throws {
        let sixHoursAgo = Quakes.reference.addingTimeInterval(-6 * 3600)
        #expect(try store.list(since: sixHoursAgo).map(\.id) == ["quito", "sf", "tokyo"])
        #expect(try store.list(minMagnitude: 5, since: sixHoursAgo).map(\.id) == ["tokyo"])
        #expect(try store.list(minMagnitude: 3, since: sixHoursAgo, limit: 1, sort: .magnitude).map(\.id) == ["tokyo"])
        // `since` is inclusive.
        let tokyoTime = try #require(Quakes.tokyo.time)
        #expect(try store.list(since: tokyoTime).map(\.id).contains("tokyo"))
    }

    @Test("near: nearest first, with great-circle distances in km (from Honolulu)")
    func nearHonolulu() throws {
        let nearby = try store.near(latitude: 21.3069, longitude: -157.8583)
        #expect(nearby.map(\.earthquake.id) == ["sf", "anchorage", "tokyo", "quito", "undated"])
        let km = nearby.map { ($0.distanceKilometers).rounded() }
        #expect(km == [3_854, 4_481, 6_209, 8_917, 11_045])
    }

    @Test("near: Tokyo vs San Francisco from a point just off Japan")
    func nearJapan() throws {
        let nearby = try store.near(latitude: 34, longitude: 140, limit: 2)
        #expect(nearby.map(\.earthquake.id) == ["tokyo", "anchorage"])
        #expect(try #require(nearby.first).distanceKilometers < 200)
    }

    @Test("near with filters and a radius")
    func nearFiltered() throws {
        let honolulu = (latitude: 21.3069, longitude: -157.8583)
        let strong = try store.near(latitude: honolulu.latitude, longitude: honolulu.longitude, minMagnitude: 5)
        #expect(strong.map(\.earthquake.id) == ["anchorage", "tokyo"])
        let recent = try store.near(
            latitude: honolulu.latitude, longitude: honolulu.longitude,
            since: Quakes.reference.addingTimeInterval(-6 * 3600)
        )
        #expect(recent.map(\.earthquake.id) == ["sf", "tokyo", "quito"])
        let close = try store.near(latitude: honolulu.latitude, longitude: honolulu.longitude, within: 5_000)
        #expect(close.map(\.earthquake.id) == ["sf", "anchorage"])
        #expect(try store.near(latitude: honolulu.latitude, longitude: honolulu.longitude, within: 100).isEmpty)
    }

    @Test("near across the antimeridian finds the event on the other side")
    func nearAntimeridian() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed([
            Quakes.make("east", latitude: -17, longitude: 179.9),
            Quakes.make("west", latitude: -17, longitude: -179.9),
            Quakes.make("far", latitude: -17, longitude: 170),
        ])
        let nearby = try store.near(latitude: -17, longitude: -179.95, within: 50)
        #expect(nearby.map(\.earthquake.id) == ["west", "east"])
    }
}
