import EarthquakesKit
import Foundation
import Testing

@Suite("FeedParser")
struct FeedParserTests {
    let parser = FeedParser()

    // MARK: Recorded USGS feeds

    @Suite("recorded USGS feeds", .enabled(if: USGSData.isAvailable, USGSData.skipMessage))
    struct Recorded {
        let parser = FeedParser()

        @Test("feature count equals metadata.count", arguments: USGSData.realFeeds.map(\.file))
        func featureCountMatchesMetadata(file: String) throws {
            let expected = try #require(USGSData.realFeeds.first { $0.file == file }?.count)
            let feed = try parser.parse(USGSData.data(file))
            #expect(feed.earthquakes.count == expected)
            #expect(feed.metadata.count == expected)
            #expect(feed.warnings.isEmpty)
            #expect(Set(feed.earthquakes.map(\.id)).count == expected, "ids are unique")
        }

        @Test("every file in the folder and its fixtures has a known outcome")
        func everyFileHasAKnownOutcome() throws {
            let known = Set(USGSData.realFeeds.map(\.file))
            for file in USGSData.files(in: USGSData.folder) {
                #expect(known.contains(file), "new recording \(file): add its expected count to USGSData.realFeeds")
                #expect(throws: Never.self) { try parser.parse(USGSData.data(file)) }
            }
            let fixtureOutcomes: [String: Bool] = [  // file: parses successfully
                "all_day-2016-11.geojsonp": true,
                "rewritten-seconds-2.5_week.geojson": true,
                "truncated-count-mismatch.json": false,
                "detail-feature.json": false,
            ]
            for file in USGSData.files(in: USGSData.fixtures) {
                let outcome = try #require(fixtureOutcomes[file] as Bool?, "new fixture \(file): give it an expected outcome")
                let data = try USGSData.fixture(file)
                if outcome {
                    #expect(throws: Never.self) { try parser.parse(data) }
                } else {
                    #expect(throws: FeedError.self) { try parser.parse(data) }
                }
            }
        }

        @Test("2025 feed: first event, non-ASCII place, tsunami flags, an explosion")
        func modernFeed() throws {
            let feed = try parser.parse(USGSData.data("2.5_month-2025-10.geojson"))
            #expect(feed.metadata.title == "USGS Magnitude 2.5+ Earthquakes, Past Month")
            #expect(feed.metadata.api == "1.14.1")
            #expect(feed.metadata.generated == Date(timeIntervalSince1970: 1_761_770_396))
            let first = try #require(feed.earthquakes.first)
            #expect(first.id == "ak025dvromz5")
            #expect(first.magnitude == 3.6)
            #expect(first.longitude == -153.6282)
            #expect(first.latitude == 57.3254)
            #expect(first.depth == 28.9)
            #expect(first.time == Date(timeIntervalSince1970: 1_761_765_129.224))
            #expect(first.timeZoneOffset == nil)
            #expect(first.mmi == 2.018)
            #expect(first.status == "automatic")
            #expect(first.tsunami == false)
            #expect(first.title == "M 3.6 - 23 km NW of Old Harbor, Alaska")
            #expect(first.detailURL == "https://earthquake.usgs.gov/earthquakes/feed/v1.0/detail/ak025dvromz5.geojson")

            #expect(feed.earthquakes.contains { $0.place == "105 km WNW of Höfn, Iceland" })
            #expect(feed.earthquakes.filter { $0.tsunami == true }.count == 11)
            #expect(feed.earthquakes.filter { $0.type == "explosion" }.count == 1)
            let magnitudes = feed.earthquakes.compactMap(\.magnitude)
            #expect(magnitudes.min() == 2.45)
            #expect(magnitudes.max() == 7.6)
        }

        @Test("2016 feed: uppercase status normalised, negative magnitude and depth")
        func feed2016() throws {
            let feed = try parser.parse(USGSData.data("all_day-2016-11.geojson"))
            #expect(feed.earthquakes.allSatisfy { $0.status == $0.status?.lowercased() })
            #expect(feed.earthquakes.contains { $0.status == "reviewed" })
            #expect(feed.earthquakes.compactMap(\.magnitude).min() == -0.38)
            #expect(feed.earthquakes.contains { $0.depth < 0 })
            #expect(feed.earthquakes.contains { $0.magnitudeType == "Md" })
        }

        @Test("2014 feed: null tsunami becomes nil")
        func feed2014() throws {
            let feed = try parser.parse(USGSData.data("all_day-2014-04.geojson"))
            #expect(feed.earthquakes.contains { $0.tsunami == nil })
            #expect(feed.earthquakes.compactMap(\.magnitude).max() == 7.4)
        }

        @Test("2013 feed: no titles, so displayTitle is built; pending alert")
        func feed2013() throws {
            let feed = try parser.parse(USGSData.data("all_week-2013-08.geojson"))
            #expect(feed.earthquakes.allSatisfy { $0.title == nil })
            let first = try #require(feed.earthquakes.first)
            #expect(first.displayTitle == "M 0.5 - 6km W of Cobb, California")
            #expect(first.status == "automatic")  // "AUTOMATIC" in the file
            #expect(first.timeZoneOffset == -420)
            #expect(feed.earthquakes.contains { $0.tsunami == nil })
            #expect(feed.earthquakes.contains { $0.alert == "pending" })
            #expect(feed.earthquakes.compactMap(\.magnitude).min() == -0.5)
        }

        // MARK: Fixtures

        @Test("GeoJSONP: wrapper stripped, 192 features, flagged")
        func geoJSONP() throws {
            let feed = try parser.parse(USGSData.fixture("all_day-2016-11.geojsonp"))
            #expect(feed.earthquakes.count == 192)
            #expect(feed.wasGeoJSONP)
            #expect(feed.warnings == [.strippedGeoJSONPWrapper(callback: "eqfeed_callback")])
        }

        @Test("times in seconds: converted into 2023 with a warning")
        func secondsConverted() throws {
            let feed = try parser.parse(USGSData.fixture("rewritten-seconds-2.5_week.geojson"))
            #expect(feed.earthquakes.count == 301)
            #expect(feed.hadTimesInSeconds)
            #expect(feed.warnings == [.convertedSecondsToMilliseconds(count: 301)])
            let first = try #require(feed.earthquakes.first)
            #expect(first.id == "ci40502928")
            #expect(first.time == Date(timeIntervalSince1970: 1_688_419_585))  // 2023-07-03T21:26:25Z
            var utc = Calendar(identifier: .gregorian)
            utc.timeZone = try #require(TimeZone(identifier: "UTC"))
            let years = Set(feed.earthquakes.compactMap { $0.time.map { utc.component(.year, from: $0) } })
            #expect(years == [2023])
            #expect(first.updated == nil)
        }

        @Test("truncated feed: the error names 9104 and 6")
        func truncated() throws {
            let error = try #require(throws: FeedError.self) {
                try parser.parse(USGSData.fixture("truncated-count-mismatch.json"))
            }
            #expect(error.code == .countMismatch)
            #expect(error.declaredCount == 9104)
            #expect(error.actualCount == 6)
            #expect(error.description.contains("9104"))
            #expect(error.description.contains("contains 6 features"))
        }

        @Test("detail document: a clear error")
        func detailDocument() throws {
            let error = try #require(throws: FeedError.self) {
                try parser.parse(USGSData.fixture("detail-feature.json"))
            }
            #expect(error.code == .detailDocument)
            #expect(error.description.hasPrefix("this is a single event's detail document"))
            #expect(error.description.contains("hv72783692"))
        }

        @Test("cutting a real feed anywhere gives a malformed-JSON error with a position")
        func cutRealFeed() throws {
            let data = try USGSData.data("all_day-2016-11.geojson")
            for cut in stride(from: 1, to: data.count - 1, by: 9_973) {
                let error = try #require(throws: FeedError.self) { try parser.parse(data.prefix(cut)) }
                #expect(error.code == .malformedJSON)
                let position = try #require(error.position)
                #expect(position.byteOffset <= cut)
                #expect(error.description.contains("unexpected end of input"))
            }
        }

        @Test("timing: the 1,349-feature feed, reported for the record")
        func timing() throws {
            let data = try USGSData.data("2.5_month-2025-10.geojson")
            _ = try parser.parse(data)  // warm up
            let clock = ContinuousClock()
            var best = Duration.seconds(1_000)
            for _ in 0..<5 {
                let elapsed = try clock.measure { _ = try parser.parse(data) }
                best = min(best, elapsed)
            }
            print("FeedParser: 2.5_month-2025-10.geojson (1349 features, \(data.count) bytes) parsed in \(best) (best of 5)")
            #expect(best < .seconds(2), "far too slow even for a debug build")
        }
    }
}
