import BatonTesting
import Foundation
import GRDB
import Testing

@testable import EarthquakesKit

/// A re-import leaves undecoded the features whose exact bytes the store already holds (their fingerprint),
/// and the result is exactly that of parsing and importing everything.
@Suite("Re-import: features the store holds are not decoded", .offThePool)
struct ReimportSkipTests {
    /// A feature as the USGS writes it, with the values a test varies.
    static func feature(
        _ id: String, magnitude: Double = 2.5, time: Int64 = 1_761_700_000_000, updated: Int64 = 1_761_700_100_000,
        type: String = "earthquake", depth: String = "10.5", spacing: String = ""
    ) -> String {
        #"{"type":"Feature","properties":{"mag":\#(magnitude),"place":"10 km N of Somewhere","time":\#(time),"#
            + #""updated":\#(updated),"tz":null,"url":"https://example.org/\#(id)","status":"REVIEWED","#
            + #""tsunami":0,"sig":96,"net":"us","code":"\#(id)","type":"\#(type)","title":"M \#(magnitude) -\#(spacing) \#(id)"},"#
            + #""geometry":{"type":"Point","coordinates":[-120.25,35.5,\#(depth)]},"id":"\#(id)"}"#
    }

    static func feed(_ features: [String]) -> Data {
        Data(
            (#"{"type":"FeatureCollection","metadata":{"generated":1761800000000,"count":\#(features.count)},"#
                + #""features":[\#(features.joined(separator: ",\n"))]}"#).utf8)
    }

    static let base = (0..<12).map { feature("ev\($0)") }

    /// A store holding `features`, imported through the fingerprinting (scanner) path.
    static func store(holding features: [String]) throws -> EarthquakeStore {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(try store.parseForImport(feed(features), parser: FeedParser()))
        return store
    }

    /// Imports `data` into a store holding `before` twice, once skipping the known features and once
    /// parsing everything; checks that both give the same summary and rows, and returns the skipping
    /// import's feed and summary.
    static func importBothWays(
        _ data: Data, into before: [String], parser: FeedParser = FeedParser()
    ) throws -> (feed: Feed, summary: ImportSummary) {
        let skipping = try store(holding: before)
        let full = try store(holding: before)
        let feed = try parser.parse(data, known: try skipping.knownFeatures())
        let summary = try skipping.importFeed(feed)
        let fullFeed = try parser.parse(data)
        #expect(summary == (try full.importFeed(fullFeed)))
        #expect(feed == fullFeed)
        #expect(try skipping.list() == (try full.list()))
        return (feed, summary)
    }

    @Test("an unchanged feed: no feature is decoded, every one is counted unchanged")
    func unchangedFeed() throws {
        let (feed, summary) = try Self.importBothWays(Self.feed(Self.base), into: Self.base)
        #expect(feed.undecodedCount == 12)
        #expect(summary == ImportSummary(unchanged: 12))
        #expect(feed.earthquakes.map(\.id) == (0..<12).map { "ev\($0)" })
    }

    @Test("a new `updated` and magnitude in one feature: only that one is decoded, and updated")
    func oneFeatureUpdated() throws {
        var changed = Self.base
        changed[5] = Self.feature("ev5", magnitude: 3.1, updated: 1_761_700_900_000)
        let (feed, summary) = try Self.importBothWays(Self.feed(changed), into: Self.base)
        #expect(feed.undecodedCount == 11)
        #expect(summary == ImportSummary(updated: 1, unchanged: 11))
    }

    @Test("a field changed without a new `updated` is still seen and updated (the bytes differ)")
    func changedWithoutUpdated() throws {
        var changed = Self.base
        changed[0] = Self.feature("ev0", depth: "11.5")
        let store = try Self.store(holding: Self.base)
        let feed = try FeedParser().parse(Self.feed(changed), known: try store.knownFeatures())
        #expect(feed.undecodedCount == 11)
        #expect(try store.importFeed(feed) == ImportSummary(updated: 1, unchanged: 11))
        #expect(try store.earthquake(id: "ev0")?.depth == 11.5)
    }

    @Test("new features, repeated ids, skipped features and other event types count as in a full import")
    func mixedFeed() throws {
        var changed = Self.base
        changed.append(Self.feature("new1", type: "quarry blast"))
        changed.append(Self.feature("bad", depth: "null"))
        changed.append(Self.base[3])
        changed.insert(Self.feature("ev7", magnitude: 4.4, updated: 1_761_700_500_000), at: 2)
        changed[9] = Self.feature("ev8", type: "explosion", spacing: " ")
        let (feed, summary) = try Self.importBothWays(Self.feed(changed), into: Self.base)
        // Decoded: the first ev7 (a repeated id, newer than the stored copy, so imported), the new ev8,
        // new1 and the bad feature; the second ev7 (the stored bytes) is decoded to compare the copies.
        #expect(feed.undecodedCount == 12)
        #expect(
            summary
                == ImportSummary(
                    inserted: 1, updated: 2, unchanged: 10, duplicates: 2, duplicateIDs: ["ev7", "ev3"], skipped: 1,
                    otherTypes: ["quarry blast": 1, "explosion": 1]))
        #expect(feed.skippedFeatures.map(\.index) == [14])
    }

    @Test("a strict parse rejects a bad feature as a full parse does")
    func strict() throws {
        let store = try Self.store(holding: Self.base)
        let data = Self.feed(Self.base + [Self.feature("bad", depth: "null")])
        let known = try store.knownFeatures()
        #expect(known.count == 12)
        let skipping = try #require(throws: FeedError.self) { try FeedParser(strict: true).parse(data, known: known) }
        let full = try #require(throws: FeedError.self) { try FeedParser(strict: true).parse(data) }
        #expect(skipping.description == full.description)
    }

    /// A store holding `base`, the base feed parsed for a re-import into it (every feature left
    /// undecoded), and then ev4's row changed (magnitude 9) by another import: as if another process
    /// wrote it between the parse and the import.
    private static func parsedThenEV4Changed() throws -> (EarthquakeStore, Feed) {
        let store = try store(holding: base)
        let feed = try FeedParser().parse(Self.feed(base), known: try store.knownFeatures())
        #expect(feed.undecodedCount == 12)
        var meanwhile = try #require(try store.earthquake(id: "ev4"))
        meanwhile.magnitude = 9
        try store.importFeed([meanwhile])
        return (store, feed)
    }

    @Test("a row changed by another import after the parse is decoded and imported after all")
    func rowChangedMeanwhile() throws {
        let (store, feed) = try Self.parsedThenEV4Changed()
        try store.importFeed(
            try store.parseForImport(Self.feed([Self.feature("ev9", magnitude: 1)]), parser: FeedParser()))
        #expect(try store.importFeed(feed) == ImportSummary(updated: 2, unchanged: 10))
        #expect(try store.earthquake(id: "ev4")?.magnitude == 2.5)
        #expect(try store.earthquake(id: "ev9")?.magnitude == 2.5)
        let again = try FeedParser().parse(Self.feed(Self.base), known: try store.knownFeatures())
        #expect(again.undecodedCount == 12)
    }

    @Test("a feed file rewritten between the parse and the import: a clear error, and nothing imported")
    func feedChangedMeanwhile() throws {
        let (store, feed) = try Self.parsedThenEV4Changed()  // so the import must decode ev4's bytes again
        // The same length, other bytes: what a mapped file shows once it was rewritten in place.
        var rewritten = Self.base
        rewritten[4] = Self.feature("ev4", magnitude: 3.5)
        rewritten[7] = Self.feature("ev7", magnitude: 4.5)
        let error = #expect(throws: StoreError.self) {
            try store.importFeed(feed.readingPending(from: Self.feed(rewritten)))
        }
        #expect(error?.description.contains("(id \"ev4\") of the feed changed while it was being imported") == true)
        #expect(error?.description.contains("run the refresh again") == true)
        #expect(try store.earthquake(id: "ev4")?.magnitude == 9, "the import was rolled back")
    }

    @Test("a re-import feed's earthquakes are decoded by the first read; later reads and copies reuse them")
    func earthquakesDecodedOnce() throws {
        let store = try Self.store(holding: Self.base)
        var rewritten = Self.base
        rewritten[4] = Self.feature("ev4", magnitude: 3.5)
        let original = Self.feed(Self.base)
        let changed = Self.feed(rewritten)
        try #require(changed.count == original.count)
        // Bytes that can change under the parsed feed, as a mapped file's can.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: original.count, alignment: 1)
        defer { buffer.deallocate() }
        buffer.copyBytes(from: original)
        let bytes = Data(bytesNoCopy: try #require(buffer.baseAddress), count: buffer.count, deallocator: .none)
        let feed = try FeedParser().parse(bytes, known: try store.knownFeatures())
        #expect(feed.undecodedCount == 12)
        let first = feed.earthquakes
        #expect(first.map(\.id) == (0..<12).map { "ev\($0)" })
        // Decoding again now would find ev4's bytes changed (and stop the process).
        buffer.copyBytes(from: changed)
        let copy = feed
        #expect(feed.earthquakes == first)
        #expect(copy.earthquakes == first)
        #expect(feed.earthquakes[4].magnitude == 2.5)
    }

    @Test("the same values written differently are unchanged, and the next re-import skips them too")
    func sameValuesOtherBytes() throws {
        let store = try Self.store(holding: Self.base)
        var respaced = Self.base
        respaced[2] = Self.base[2].replacingOccurrences(of: #""mag":"#, with: #""mag": "#)
        let first = try FeedParser().parse(Self.feed(respaced), known: try store.knownFeatures())
        #expect(first.undecodedCount == 11)
        #expect(try store.importFeed(first) == ImportSummary(unchanged: 12))
        let second = try FeedParser().parse(Self.feed(respaced), known: try store.knownFeatures())
        #expect(second.undecodedCount == 12)
    }

    @Test("times read as seconds: the same bytes read in milliseconds are decoded again, not skipped")
    func timeUnitIsPartOfTheFingerprint() throws {
        let inSeconds = (0..<4).map { Self.feature("s\($0)", time: 1_761_700_000, updated: 1_761_700_100) }
        let (first, _) = try Self.importBothWays(Self.feed(inSeconds), into: [])
        #expect(first.hadTimesInSeconds)
        let (reimport, unchanged) = try Self.importBothWays(Self.feed(inSeconds), into: inSeconds)
        #expect(reimport.undecodedCount == 4 && unchanged == ImportSummary(unchanged: 4))
        // One time in milliseconds makes the feed milliseconds: every time is read anew. Read so, the
        // stored events' copies are older (1970) than the stored rows (2025), which are kept.
        let mixed = inSeconds + [Self.feature("ms")]
        let (feed, summary) = try Self.importBothWays(Self.feed(mixed), into: inSeconds)
        #expect(!feed.hadTimesInSeconds)
        #expect(feed.undecodedCount == 0)
        #expect(summary == ImportSummary(inserted: 1, unchanged: 4))
    }

    @Test("a feed the scanner gives up on is parsed in full, with the same result")
    func slowPathFeed() throws {
        var odd = Self.base
        odd[1] = odd[1].replacingOccurrences(of: #""mag":2.5"#, with: #""mag":"2.5""#)
        let (feed, summary) = try Self.importBothWays(Self.feed(odd), into: Self.base)
        #expect(feed.undecodedCount == 0)
        #expect(summary.skipped == 1 && summary.unchanged == 11)
    }

    @Test("features located in two halves are those located in one pass")
    func lightScanInHalves() throws {
        let data = Self.feed(Self.base)
        let text = Array(data)
        let start = Array(Self.base[6].utf8)
        let split = try #require(text.indices.first { text[$0...].starts(with: start) })
        let located = text.withUnsafeBufferPointer { bytes in
            (FeedScanner.scanLight(bytes)?.features, FeedScanner.scanLight(bytes, splittingAt: split)?.features)
        }
        let oneRanges = try #require(located.0).map(\.range)
        #expect(oneRanges.count == 12)
        #expect(try #require(located.1).map(\.range) == oneRanges)
        #expect(try #require(located.1).map(\.hash) == (try #require(located.0)).map(\.hash))
    }

    @Test("a row changed by a writer that knows nothing of fingerprints loses its fingerprint, so it is re-imported")
    func writerWithoutFingerprints() throws {
        let store = try Self.store(holding: Self.base)
        // What an older version of this program does to a row of a newer file: its own UPDATE, which
        // leaves the fingerprint column as it was.
        try store.database.write { db in
            try db.execute(sql: "UPDATE earthquake SET magnitude = 9, place = 'elsewhere' WHERE id = 'ev3'")
            try db.execute(sql: "UPDATE earthquake SET updated = updated WHERE id = 'ev5'")  // no value changed
        }
        let feed = try FeedParser().parse(Self.feed(Self.base), known: try store.knownFeatures())
        #expect(feed.undecodedCount == 11, "only ev3 lost its fingerprint")
        #expect(try store.importFeed(feed) == ImportSummary(updated: 1, unchanged: 11))
        #expect(try store.earthquake(id: "ev3")?.magnitude == 2.5)
        #expect(try store.earthquake(id: "ev3")?.place == "10 km N of Somewhere")
        #expect(try store.knownFeatures().count == 12, "the re-import gave ev3 its fingerprint back")
    }

    @Test("a database written by a newer version is read, never written, and the error says to upgrade")
    func newerVersion() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("newer.sqlite")
        try EarthquakeStore(path: path).importFeed(try FeedParser().parse(Self.feed(Self.base)))
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99: from the future')")
        }
        #expect(try EarthquakeStore(path: path, mode: .readOnly).count() == 12)
        let error = #expect(throws: StoreError.self) { try EarthquakeStore(path: path) }
        #expect(error?.description.contains("written by a newer version of earthquakes") == true)
        #expect(error?.description.contains("Upgrade earthquakes") == true)
    }

    @Test("a database of the previous version is readable read-only, and gains fingerprints at its next import")
    func previousVersion() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("old.sqlite")
        try EarthquakeStore.createVersion1Database(at: path)
        #expect(try EarthquakeStore(path: path, mode: .readOnly).count() == 0)
        let store = try EarthquakeStore(path: path)
        try store.importFeed(try store.parseForImport(Self.feed(Self.base), parser: FeedParser()))
        #expect(try store.knownFeatures().count == 12)
        #expect(try EarthquakeStore(path: path, mode: .readOnly).count() == 12)
    }

    @Test("refreshing the same file twice: the second parse decodes nothing")
    func getEarthquakesTwice() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = URL(fileURLWithPath: directory.path("feed.geojson"))
        try Self.feed(Self.base).write(to: file)
        let store = try EarthquakeStore(path: directory.path("quakes.sqlite"))
        #expect(try await GetEarthquakes(source: .url(file), store: store).run() == ImportSummary(inserted: 12))
        let again = GetEarthquakes(source: .url(file), store: store)
        #expect(try await again.run() == ImportSummary(unchanged: 12))
        #expect(again.feed?.undecodedCount == 12)
        #expect(again.feed?.earthquakes.count == 12)
    }
}

/// A big first import builds the time and magnitude indexes after inserting, in its transaction.
@Suite("First import: indexes rebuilt")
struct FirstImportIndexTests {
    static func quakes(_ count: Int) -> [Earthquake] {
        (0..<count).map { Quakes.make("q\($0)", magnitude: Double($0 % 70) / 10, hoursAgo: Double($0 % 500)) }
    }

    @Test("a big first import leaves every index in place and usable")
    func indexesKept() throws {
        let store = try EarthquakeStore.inMemory()
        let before = try store.secondaryIndexNames()
        #expect(before == ["earthquake_changed", "earthquake_magnitude", "earthquake_time"])
        let count = EarthquakeStore.rebuildIndexesMinimum
        #expect(try store.importFeed(Self.quakes(count)) == ImportSummary(inserted: count))
        #expect(try store.secondaryIndexNames() == before)
        #expect(try store.list(minMagnitude: 6.9).count == count / 70)
        #expect(try store.list(limit: 1).first?.id == "q0")
    }

    @Test("a big first import that fails is rolled back with its indexes")
    func failureKeepsIndexes() throws {
        let store = try EarthquakeStore.inMemory()
        var quakes = Self.quakes(EarthquakeStore.rebuildIndexesMinimum)
        quakes[quakes.count - 1].latitude = 91
        #expect(throws: StoreError.self) { try store.importFeed(quakes) }
        #expect(try store.count() == 0)
        #expect(try store.secondaryIndexNames() == ["earthquake_changed", "earthquake_magnitude", "earthquake_time"])
    }
}
