import BatonTesting
import EarthquakesTestData
import Foundation
import Testing

@testable import EarthquakesKit

/// Feeds damaged at random — bytes changed, removed, repeated or inserted, JSON punctuation and
/// number characters above all — as a feed the project has never read might be. Each parse must end
/// in a feed or a ``FeedError`` that says something (never a trap), and the re-import parse, which
/// skips the features a store already holds, must give exactly what the full parse gives: the same
/// feed, or the same error.
@Suite("Damaged feeds: the full and the re-import parse agree, and nothing traps", .offThePool)
struct FeedMutationTests {
    /// Characters that change a JSON document's structure or a number's meaning.
    static let significant = Array(#"{}[],:"\-+0123456789.eEnulltrue "#.utf8) + [0x00, 0x0A, 0xC3, 0xFF]

    /// `data` with one to four random changes.
    static func mutate(_ data: Data, using random: inout SeededRandom) -> Data {
        var bytes = [UInt8](data)
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            guard !bytes.isEmpty else { break }
            let at = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0:  // a byte replaced by a significant one
                bytes[at] = significant.randomElement(using: &random)!
            case 1:  // a byte replaced by any byte
                bytes[at] = UInt8.random(in: 0...255, using: &random)
            case 2:  // a short range removed
                bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...40, using: &random)))
            case 3:  // a significant byte inserted
                bytes.insert(significant.randomElement(using: &random)!, at: at)
            case 4:  // a range repeated (a feature or a value written twice)
                let end = min(bytes.count, at + Int.random(in: 1...400, using: &random))
                bytes.insert(contentsOf: bytes[at..<end], at: end)
            default:  // cut off
                bytes.removeSubrange(at...)
            }
        }
        return Data(bytes)
    }

    /// Parses `data` both ways and checks that they agree; returns whether the parse succeeded.
    @discardableResult
    static func check(_ data: Data, known: KnownFeatures, parser: FeedParser, _ label: String) -> Bool {
        let full: Result<Feed, FeedError> = Result { () throws(FeedError) in try parser.parse(data) }
        let skipping: Result<Feed, FeedError> = Result { () throws(FeedError) in try parser.parse(data, known: known) }
        switch (full, skipping) {
        case (.success(let feed), .success(let skipped)):
            #expect(skipped == feed, "\(label): the re-import parse gave another feed")
            return true
        case (.failure(let error), .failure(let skippedError)):
            #expect(
                skippedError == error, "\(label): the re-import parse failed otherwise: \(skippedError) vs \(error)")
            #expect(!error.description.isEmpty, "\(label)")
        case (.success, .failure(let error)):
            Issue.record("\(label): only the re-import parse failed: \(error)")
        case (.failure(let error), .success):
            Issue.record("\(label): only the full parse failed: \(error)")
        }
        return false
    }

    /// `BATON_FEED_MUTATION_ROUNDS=N` multiplies the rounds, and `BATON_FEED_MUTATION_SEED` changes the
    /// seeds, for a longer search by hand; the suite's own run is kept short (it also runs under
    /// ThreadSanitizer).
    static let scale = Int(ProcessInfo.processInfo.environment["BATON_FEED_MUTATION_ROUNDS"] ?? "") ?? 1
    static let seedOffset = UInt64(ProcessInfo.processInfo.environment["BATON_FEED_MUTATION_SEED"] ?? "") ?? 0

    static func run(_ original: Data, rounds: Int, seed: UInt64) throws {
        let rounds = rounds * max(1, scale)
        let seed = seed &+ seedOffset * 1_000
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(try store.parseForImport(original, parser: FeedParser()))
        let known = try store.knownFeatures()
        #expect(known.count > 0, "the store knows the feed's features: the re-import parse is exercised")
        var random = SeededRandom(seed: seed)
        var parsed = 0
        for round in 0..<rounds {
            let damaged = mutate(original, using: &random)
            let strict = round % 4 == 3
            if check(damaged, known: known, parser: FeedParser(strict: strict), "seed \(seed) round \(round)") {
                parsed += 1
            }
        }
        // Some damage leaves a readable feed (a changed digit, a repaired feature), most does not:
        // both kinds must have been tried.
        #expect(parsed > 0 && parsed < rounds, "\(parsed) of \(rounds) damaged feeds parsed")
    }

    /// The sample feed (one feature per line) with `edit` applied to the lines of the named features.
    static func sample(editing edits: [String: (String) -> String]) -> Data {
        let lines = String(decoding: SampleFeed.geoJSON(count: 12), as: UTF8.self).split(
            separator: "\n", omittingEmptySubsequences: false)
        return Data(
            lines.map { line in
                let edit = edits.first { line.contains("\"id\":\"\($0.key)\"") }?.value
                return edit.map { $0(String(line)) } ?? String(line)
            }.joined(separator: "\n").utf8)
    }

    /// Found by the search below: a strict re-import returned the first unreadable feature's error where
    /// the full parse, stopped earlier by a later feature it could not read at all, gave that one.
    @Test("strict: an unreadable feature before one that breaks the format gives the format's error both ways")
    func strictErrorsFollowTheFullParse() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(try store.parseForImport(SampleFeed.geoJSON(count: 12), parser: FeedParser()))
        let known = try store.knownFeatures()
        let noCoordinates: (String) -> String = {
            $0.replacing(#/"coordinates":\[[^\]]*\]/#, with: #""coordinates":[]"#)
        }
        let cases: [(String, Data)] = [
            // A number where the format has a string.
            (
                "a number as detail",
                Self.sample(editing: [
                    "sample0007": noCoordinates,
                    "sample0008": {
                        $0.replacingOccurrences(of: #""detail":null"#, with: #""detail":17"#)
                    },
                ])
            ),
            // A byte that is not UTF-8 in a later feature.
            (
                "a stray byte",
                Self.sample(editing: [
                    "sample0007": noCoordinates,
                    "sample0012": {
                        $0.replacingOccurrences(of: "SAMPLE]", with: "\u{FFFD}SAMPLE]")
                    },
                ]).replacingFirst([0xEF, 0xBF, 0xBD], with: [0xC3])
            ),
        ]
        for (label, data) in cases {
            #expect(data != SampleFeed.geoJSON(count: 12), "\(label): the feed was changed")
            Self.check(data, known: known, parser: FeedParser(strict: true), label)
            let error = try #require(throws: FeedError.self) { try FeedParser(strict: true).parse(data) }
            #expect(!error.description.contains("coordinates"), "\(label): \(error)")
            if label == "a stray byte" {
                // Located by the syntax checker (Foundation says only "not valid JSON").
                #expect(error.code == .malformedJSON && error.position != nil, "\(error)")
                #expect(error.description.contains("not UTF-8"), "\(error)")
            }
        }
    }

    @Test("the built-in sample feed, damaged 200 times")
    func sampleFeed() throws {
        try Self.run(SampleFeed.geoJSON(count: 12), rounds: 200, seed: 1)
    }

    @Test(
        "a recorded USGS feed, damaged 40 times",
        .enabled(if: USGSData.isAvailable, USGSData.skipMessage))
    func recordedFeed() throws {
        try Self.run(try USGSData.data("all_day-2016-11.geojson"), rounds: 40, seed: 2)
    }
}

extension Data {
    /// A copy with the first occurrence of `bytes` replaced by `replacement`.
    fileprivate func replacingFirst(_ bytes: [UInt8], with replacement: [UInt8]) -> Data {
        guard let range = self.range(of: Data(bytes)) else { return self }
        var copy = self
        copy.replaceSubrange(range, with: replacement)
        return copy
    }
}
