import Baton
import BatonTesting
import Foundation
import Testing

@testable import EarthquakesKit

/// Values a hostile-feed probe found mishandled (7 December 2026).
@Suite("FeedParser: numbers where whole numbers belong, pipes, counts", .offThePool)
struct HostileFeedValueTests {
    static func feed(bad: String, metadata: String = #""count":3"#) -> Data {
        let good1 = FeedParserLeniencyTests.good1
        let good2 = FeedParserLeniencyTests.good2
        return Data(
            #"{"type":"FeatureCollection","metadata":{\#(metadata)},"features":[\#(good1),\#(bad),\#(good2)]}"#.utf8)
    }

    /// A fraction (or a number beyond 64 bits) in `sig`, `felt` or `tz` made Foundation's `JSONDecoder`
    /// on Linux refuse the whole document as "not valid JSON": the feed was rejected with a false reason.
    /// The feature is now skipped like any other with a value of the wrong kind, naming the value.
    @Test(
        "a fraction where a whole number belongs skips that feature, naming the value",
        arguments: ["sig\":1.5", "felt\":2.5", "tz\":1.5", "sig\":1e30", "tsunami\":0.5"])
    func fractionSkipsTheFeature(_ member: String) throws {
        let bad = #"{"id":"odd","properties":{"mag":3,"\#(member)},"geometry":{"coordinates":[1,2,3]}}"#
        let feed = try FeedParser().parse(Self.feed(bad: bad))
        #expect(feed.earthquakes.map(\.id) == ["good1", "good2"])
        let skipped = try #require(feed.skippedFeatures.first)
        #expect(skipped.id == "odd")
        let key = String(member.prefix { $0 != "\"" })
        #expect(skipped.problem.contains("properties.\(key)"), "\(skipped.problem)")
        #expect(skipped.problem.contains("not a whole number"), "\(skipped.problem)")
        #expect(throws: FeedError.self) { try FeedParser(strict: true).parse(Self.feed(bad: bad)) }
    }

    /// Foundation on Linux words a mismatch "found bool" or "found number" where it says "found a string":
    /// the warnings say "a boolean, not a number", "a number, not a string".
    @Test(
        "a value of the wrong kind is worded alike whatever it is",
        arguments: [
            ("mag\":true", "a boolean, not a number"), ("place\":5", "a number, not a string"),
            ("place\":{}", "an object, not a string"), ("mag\":[]", "an array, not a number"),
        ])
    func wrongKindsAreWordedAlike(_ member: String, _ wording: String) throws {
        let bad = #"{"id":"odd","properties":{"\#(member)},"geometry":{"coordinates":[1,2,3]}}"#
        let skipped = try #require(try FeedParser().parse(Self.feed(bad: bad)).skippedFeatures.first)
        #expect(skipped.problem.contains(wording), "\(skipped.problem)")
    }

    @Test("a whole number written with a fraction is that number")
    func wholeNumberWithAFraction() throws {
        let bad =
            #"{"id":"whole","properties":{"mag":3,"sig":50.0,"felt":3.0,"tz":-480.0,"tsunami":1.0},"geometry":{"coordinates":[1,2,3]}}"#
        let feed = try FeedParser().parse(Self.feed(bad: bad))
        let quake = try #require(feed.earthquakes.first { $0.id == "whole" })
        #expect(quake.significance == 50 && quake.felt == 3 && quake.timeZoneOffset == -480 && quake.tsunami == true)
    }

    @Test("metadata.count with a fraction is named, not called invalid JSON", arguments: ["1.5", "1e30"])
    func countWithAFraction(_ count: String) throws {
        let good = FeedParserLeniencyTests.good1
        let error = try #require(throws: FeedError.self) {
            try FeedParser().parse(
                Data(#"{"type":"FeatureCollection","metadata":{"count":\#(count)},"features":[\#(good)]}"#.utf8))
        }
        #expect(error.code == .unexpectedValue, "\(error)")
        #expect(error.description.contains("metadata.count"), "\(error)")
        #expect(!error.description.contains("not valid JSON"), "\(error)")
    }

    /// A GeoJSONP feed cut short was reported as "unexpected character 'e'" at its first column.
    @Test func aGeoJSONPFeedCutShortSaysSo() throws {
        let whole = String(decoding: Self.feed(bad: FeedParserLeniencyTests.good1), as: UTF8.self)
        let cut = "eqfeed_callback(" + whole.prefix(whole.count / 2)
        let error = try #require(throws: FeedError.self) { try FeedParser().parse(Data(cut.utf8)) }
        #expect(error.code == .malformedJSON)
        #expect(error.description.contains("eqfeed_callback( is not closed"), "\(error)")
        #expect(error.description.contains("stops early"), "\(error)")
        #expect(try FeedParser().parse(Data(("eqfeed_callback(" + whole + ");").utf8)).earthquakes.count == 3)
        // Closed, with something after it: not called cut short.
        let trailing = try #require(throws: FeedError.self) {
            try FeedParser().parse(Data(("eqfeed_callback(" + whole + ");// c").utf8))
        }
        #expect(!trailing.description.contains("is not closed"), "\(trailing)")
    }

    /// More features than `metadata.count` declares was refused as "probably truncated".
    @Test func moreFeaturesThanDeclaredIsNotCalledTruncated() throws {
        let good = FeedParserLeniencyTests.good1
        let more = try #require(throws: FeedError.self) {
            try FeedParser().parse(
                Data(#"{"type":"FeatureCollection","metadata":{"count":1},"features":[\#(good),\#(good)]}"#.utf8))
        }
        #expect(more.code == .countMismatch)
        #expect(
            !more.description.contains("truncated") && more.description.contains("more than it declares"), "\(more)")
        let negative = try #require(throws: FeedError.self) {
            try FeedParser().parse(
                Data(#"{"type":"FeatureCollection","metadata":{"count":-1},"features":[\#(good)]}"#.utf8))
        }
        #expect(negative.description.contains("below zero"), "\(negative)")
        let fewer = try #require(throws: FeedError.self) {
            try FeedParser().parse(
                Data(#"{"type":"FeatureCollection","metadata":{"count":3},"features":[\#(good)]}"#.utf8))
        }
        #expect(fewer.description.contains("truncated"), "\(fewer)")
    }

    /// `--feed /dev/stdin` or `<(command)`: a pipe cannot be mapped, and the read failed with "You don't
    /// have permission".
    @Test func aFeedIsReadFromAPipe() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pipe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let fifo = folder.appendingPathComponent("feed")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let bytes = Self.feed(bad: FeedParserLeniencyTests.good1.replacingOccurrences(of: "good1", with: "good3"))
        // The writer opens the pipe on a thread of its own: opening a pipe waits for its reader.
        let writer = Thread {
            if let handle = FileHandle(forWritingAtPath: fifo.path) {
                handle.write(bytes)
                try? handle.close()
            }
        }
        writer.start()
        let parse = ParseFeedJob(input: .file(fifo))
        JobQueue(name: "pipe").add(parse)
        let outcome = await parse.outcome
        #expect(outcome.didSucceed, "\(String(describing: outcome.error))")
        #expect(parse.feed?.earthquakes.count == 3)
    }
}
