import EarthquakesCLI
import Foundation
import Testing

@Suite struct QueryOptionsTests {
    private let now = Date(timeIntervalSince1970: 1_735_689_600)  // 2025-01-01T00:00:00Z

    @Test(arguments: [("30m", 1800.0), ("24h", 86_400), ("7d", 604_800), ("2w", 1_209_600), ("1.5h", 5400)])
    func relativeAges(text: String, seconds: Double) throws {
        #expect(try SinceParser.parse(text, now: now) == now.addingTimeInterval(-seconds))
    }

    @Test func isoDatesAndTimes() throws {
        #expect(try SinceParser.parse("2024-12-31", now: now) == now.addingTimeInterval(-86_400))
        #expect(try SinceParser.parse("2024-12-31T12:00:00Z", now: now) == now.addingTimeInterval(-43_200))
        #expect(try SinceParser.parse("2024-12-31T12:00:00.500Z", now: now) == now.addingTimeInterval(-43_199.5))
    }

    @Test(arguments: ["7x", "", "yesterday", "-3d", "2024-13-45"])
    func badSinceValuesSayWhatIsAccepted(text: String) {
        let error = #expect(throws: CLIError.self) { try SinceParser.parse(text, now: now) }
        #expect(error?.message.contains("--since expects") == true)
    }

    @Test func coordinates() throws {
        #expect(try Coordinate(parsing: "35.68,139.69") == Coordinate(latitude: 35.68, longitude: 139.69))
        #expect(try Coordinate(parsing: " -33.4 , -70.6 ") == Coordinate(latitude: -33.4, longitude: -70.6))
        let format = #expect(throws: CLIError.self) { try Coordinate(parsing: "35.68") }
        #expect(format?.message.contains("LAT,LON") == true)
        let range = #expect(throws: CLIError.self) { try Coordinate(parsing: "95,10") }
        #expect(range?.message.contains("-90...90") == true)
    }

    @Test func databaseLocationOrder() {
        let env = [
            "HOME": "/home/ada", "XDG_DATA_HOME": "/data", DatabaseLocation.environmentVariable: "/env/q.sqlite",
        ]
        #expect(DatabaseLocation.path(option: "/opt/q.sqlite", environment: env) == "/opt/q.sqlite")
        #expect(DatabaseLocation.path(option: "~/q.sqlite", environment: env) == "/home/ada/q.sqlite")
        #expect(DatabaseLocation.path(option: nil, environment: env) == "/env/q.sqlite")
        #expect(
            DatabaseLocation.path(option: nil, environment: ["HOME": "/home/ada", "XDG_DATA_HOME": "/data"])
                == "/data/baton-earthquakes/earthquakes.sqlite")
        #expect(
            DatabaseLocation.path(option: nil, environment: ["HOME": "/home/ada"])
                == "/home/ada/.local/share/baton-earthquakes/earthquakes.sqlite")
        // A relative XDG_DATA_HOME is invalid by the specification and ignored.
        #expect(
            DatabaseLocation.path(option: nil, environment: ["HOME": "/home/ada", "XDG_DATA_HOME": "rel"])
                == "/home/ada/.local/share/baton-earthquakes/earthquakes.sqlite")
    }
}
