import EarthquakesCLI
import EarthquakesKit
import Foundation
import Testing

/// `list --csv` that matches nothing still writes CSV (its header line alone), and says why on standard
/// error: a script's `list --csv > quakes.csv` never gets a sentence as its header.
@Suite struct EmptyCSVTests {
    static let header = "id,time,latitude,longitude,depth_km,magnitude,type,place,felt,cdi,mmi,significance,alert\n"

    @Test func anEmptyDatabaseGivesTheHeaderAlone() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("empty.sqlite")
        _ = try EarthquakeStore(path: path)
        let captured = CapturedConsole()
        try EarthquakesCLI.forTests(captured).list(ListOptions(csv: true), database: path, json: false)
        #expect(captured.stdout == Self.header)
        #expect(captured.stderr.contains("No earthquakes stored"))
    }

    @Test func noMatchGivesTheHeaderAloneWithOrWithoutNear() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.path("q.sqlite")
        try EarthquakeStore.withSample(at: path)
        for near in [nil, Coordinate(latitude: 0, longitude: 0)] {
            let captured = CapturedConsole()
            try EarthquakesCLI.forTests(captured).list(
                ListOptions(minMagnitude: 11, near: near, csv: true), database: path, json: false)
            let header = near == nil ? Self.header : Self.header.dropLast() + ",distance_km\n"
            #expect(captured.stdout == header)
            #expect(captured.stderr.contains("No earthquakes match"))
        }
    }
}
