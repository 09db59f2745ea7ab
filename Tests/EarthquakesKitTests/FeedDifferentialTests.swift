import BatonTesting
import Foundation
import Testing

@testable import EarthquakesKit

/// Issue 31, the parser: a randomized differential test of the hand-written `FeedScanner` and
/// `JSONSyntaxChecker` against Foundation on the same bytes. Thousands of generated features — every
/// property present, missing, `null` or of the wrong type, numbers in every JSON form, strings with
/// every escape, unknown members nested deep, members in any order, whitespace anywhere — in feeds that
/// are then also damaged at random. For each feed:
/// - the parser with the scanner and the parser with `JSONDecoder` alone give the same feed, or the same
///   error (the scanner never accepts what `JSONDecoder` refuses, nor reads a value otherwise);
/// - the syntax checker finds an error exactly when `JSONSerialization` refuses the text, except where
///   Foundation is knowingly more lenient than RFC 8259 (a trailing comma).
///
/// Seeded: a failure names its seed; `BATON_FEED_DIFFERENTIAL_SEED=S` runs that one feed again and prints
/// its damaged copies, and `BATON_FEED_DIFFERENTIAL_ROUNDS=N` multiplies the rounds for a longer search by
/// hand.
@Suite("The scanner and the syntax checker agree with Foundation on generated and damaged feeds", .offThePool)
struct FeedDifferentialTests {
    static let scale = Int(ProcessInfo.processInfo.environment["BATON_FEED_DIFFERENTIAL_ROUNDS"] ?? "") ?? 1

    static let slow: FeedParser = {
        var parser = FeedParser()
        parser.usesScanner = false
        return parser
    }()

    static let slowStrict: FeedParser = {
        var parser = FeedParser(strict: true)
        parser.usesScanner = false
        return parser
    }()

    /// Parses `data` with and without the scanner; records a difference. Returns whether it parsed.
    @discardableResult
    static func compare(_ data: Data, strict: Bool, _ label: String) -> Bool {
        let fast: Result<Feed, FeedError> = Result { () throws(FeedError) in try FeedParser(strict: strict).parse(data)
        }
        let reference: Result<Feed, FeedError> = Result { () throws(FeedError) in
            try (strict ? slowStrict : slow).parse(data)
        }
        // The one difference on purpose: JSONDecoder refuses a whole document for one number beyond a double's
        // range; the scanner reads it as infinity, which the feature's own checks refuse (skipping that
        // feature, or refusing a document-level value), so one bad feature does not block a feed.
        let overflow: (FeedError) -> Bool = { $0.description.contains("is too large (beyond ±1.8e308") }
        switch (fast, reference) {
        case (.success(let feed), .success(let expected)):
            #expect(feed == expected, "\(label): the scanner read another feed than JSONDecoder")
            return true
        case (.failure(let error), .failure(let expected)):
            #expect(error == expected || overflow(expected), "\(label): the errors differ: \(error) vs \(expected)")
        case (.success(let feed), .failure(let error)) where overflow(error):
            #expect(!feed.warnings.isEmpty, "\(label): a number too large was read without a warning")
        case (.success, .failure(let error)):
            Issue.record("\(label): the scanner accepted a feed that JSONDecoder refuses (\(error))")
        case (.failure(let error), .success):
            Issue.record("\(label): JSONDecoder read a feed that the scanner's parse refused: \(error)")
        }
        return false
    }

    /// Checks `data` with the syntax checker and with `JSONSerialization`; records a disagreement.
    static func compareSyntax(_ data: Data, _ label: String) {
        let failure = data.withUnsafeBytes { JSONSyntaxChecker.firstError(in: $0.bindMemory(to: UInt8.self)) }
        let foundation = (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) != nil
        switch (failure, foundation) {
        case (nil, false):
            Issue.record("\(label): the checker found no error in text that JSONSerialization refuses")
        case (let failure?, true):
            // Foundation reads a comma before a closing bracket or brace; RFC 8259 does not.
            let trailingComma = data.withUnsafeBytes { raw -> Bool in
                let bytes = raw.bindMemory(to: UInt8.self)
                var index = failure.offset
                while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
                var before = failure.offset - 1
                while before >= 0, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[before]) { before -= 1 }
                return index < bytes.count && (bytes[index] == UInt8(ascii: "]") || bytes[index] == UInt8(ascii: "}"))
                    && before >= 0 && bytes[before] == UInt8(ascii: ",")
            }
            // And JSONSerialization reads a number whose exponent does not fit an integer (1e318607237482)
            // that JSONDecoder refuses as too large, as the checker does.
            let hugeExponent = failure.reason.contains("too large")
            #expect(
                trailingComma || hugeExponent, "\(label): the checker refused text JSONSerialization reads: \(failure)")
        default:
            break
        }
    }

    @Test("generated feeds, whole and damaged")
    func generatedAndDamaged() async throws {
        var features = 0
        var parsed = 0
        var damagedParsed = 0
        let rounds = 400 * max(1, Self.scale)
        let only = ProcessInfo.processInfo.environment["BATON_FEED_DIFFERENTIAL_SEED"].flatMap { UInt64($0) }
        for round in 0..<rounds {
            // Seconds of work: let the other tests' tasks use this thread of the pool between rounds.
            await Task.yield()
            let seed = UInt64(round) &* 0x9E37_79B9 &+ 31
            if let only, seed != only { continue }
            var random = SeededRandom(seed: seed)
            let count = Int.random(in: 1...12, using: &random)
            features += count
            let feed = FeedGenerator.feed(features: count, using: &random)
            let strict = round % 5 == 4
            if Self.compare(feed, strict: strict, "seed \(seed)") { parsed += 1 }
            Self.compareSyntax(feed, "seed \(seed)")
            for copy in 0..<3 {
                let damaged = FeedMutationTests.mutate(feed, using: &random)
                if only != nil {
                    print("seed \(seed), damaged copy \(copy):\n" + String(decoding: damaged, as: UTF8.self))
                }
                if Self.compare(damaged, strict: strict, "seed \(seed), damaged copy \(copy)") { damagedParsed += 1 }
                Self.compareSyntax(damaged, "seed \(seed), damaged copy \(copy)")
            }
        }
        print(
            "FeedDifferentialTests: \(rounds) feeds of \(features) features: \(parsed) parsed; \(3 * rounds) damaged copies: \(damagedParsed) parsed"
        )
        // Both outcomes must have been tried, and thousands of features.
        guard only == nil else { return }
        #expect(features >= 2000, "\(features) features")
        #expect(parsed > rounds / 4 && parsed < rounds, "\(parsed) of \(rounds) generated feeds parsed")
        #expect(damagedParsed > 0, "no damaged feed parsed")
    }
}

/// Writes random USGS-like features as JSON text (see ``FeedDifferentialTests``).
enum FeedGenerator {
    static func feed(features count: Int, using random: inout SeededRandom) -> Data {
        var features: [String] = []
        for index in 0..<count { features.append(feature(index, using: &random)) }
        var metadata: [(String, String)] = [
            ("generated", "1761800000000"), ("title", string(using: &random)), ("status", "200"),
            ("api", #""1.14.1""#),
        ]
        if Bool.random(using: &random) { metadata.append(("count", "\(count)")) }
        let document: [(String, String)] = [
            ("type", Int.random(in: 0..<20, using: &random) == 0 ? #""Feature""# : #""FeatureCollection""#),
            ("metadata", object(metadata, using: &random)),
            ("features", "[" + features.joined(separator: "," + space(using: &random)) + "]"),
            ("bbox", "[-180,-90,0,180,90,700]"),
        ]
        return Data(object(document, using: &random).utf8)
    }

    /// One feature: every property present, missing, null or (rarely) of the wrong type.
    static func feature(_ index: Int, using random: inout SeededRandom) -> String {
        func maybe(_ value: String, wrong: String) -> String? {
            switch Int.random(in: 0..<20, using: &random) {
            case 0: return nil  // missing
            case 1: return "null"
            case 2: return wrong
            default: return value
            }
        }
        let time = Int64.random(in: 1_000_000_000_000...1_800_000_000_000, using: &random)
        var properties: [(String, String?)] = [
            ("mag", maybe(number(-1...9, using: &random), wrong: string(using: &random))),
            ("place", maybe(string(using: &random), wrong: "17")),
            ("time", maybe(integer(time, using: &random), wrong: #""yesterday""#)),
            (
                "updated",
                maybe(integer(time + Int64.random(in: 0...9_000_000, using: &random), using: &random), wrong: "[]")
            ),
            ("tz", maybe(["null", "-480", "60"].randomElement(using: &random)!, wrong: "{}")),
            ("url", maybe(string(using: &random), wrong: "true")),
            ("detail", maybe(string(using: &random), wrong: "1")),
            ("felt", maybe(["0", "12", "42907"].randomElement(using: &random)!, wrong: "1.5")),
            ("cdi", maybe(number(0...10, using: &random), wrong: #""high""#)),
            ("mmi", maybe(number(0...10, using: &random), wrong: "false")),
            (
                "alert",
                maybe(["\"green\"", "\"yellow\"", "\"red\"", "\"pending\""].randomElement(using: &random)!, wrong: "3")
            ),
            (
                "status",
                maybe(
                    ["\"reviewed\"", "\"REVIEWED\"", "\"automatic\"", "\"deleted\""].randomElement(using: &random)!,
                    wrong: "0")
            ),
            ("tsunami", maybe(["0", "1", "true", "false"].randomElement(using: &random)!, wrong: #""no""#)),
            ("sig", maybe(["0", "22", "2910"].randomElement(using: &random)!, wrong: #""big""#)),
            ("net", maybe(string(using: &random), wrong: "7")),
            ("code", maybe(string(using: &random), wrong: "[1]")),
            ("ids", maybe(#"",us1,ci2,""#, wrong: "null")),
            ("types", maybe(#"",origin,phase-data,""#, wrong: "null")),
            ("nst", maybe(number(0...200, using: &random), wrong: #""x""#)),
            ("dmin", maybe(number(0...5, using: &random), wrong: #""x""#)),
            ("rms", maybe(number(0...2, using: &random), wrong: #""x""#)),
            ("gap", maybe(number(0...360, using: &random), wrong: #""x""#)),
            ("magType", maybe(["\"ml\"", "\"Md\"", "\"mww\""].randomElement(using: &random)!, wrong: "5")),
            (
                "type",
                maybe(
                    ["\"earthquake\"", "\"quarry blast\"", "\"explosion\"", "\" Earthquake \"", "\"\""].randomElement(
                        using: &random)!, wrong: "2")
            ),
            ("title", maybe(string(using: &random), wrong: "{}")),
        ]
        if Int.random(in: 0..<4, using: &random) == 0 {
            properties.append(("extra", unknown(depth: 0, using: &random)))
        }
        let latitude = Int.random(in: 0..<30, using: &random) == 0 ? "95" : number(-90...90, using: &random)
        let longitude = number(-180...180, using: &random)
        let depth = Int.random(in: 0..<15, using: &random) == 0 ? "null" : number(-3...700, using: &random)
        var coordinates = [longitude, latitude, depth]
        if Int.random(in: 0..<30, using: &random) == 0 { coordinates.removeLast() }
        let geometry = object(
            [("type", #""Point""#), ("coordinates", "[" + coordinates.joined(separator: ",") + "]")], using: &random)
        let id: String? =
            switch Int.random(in: 0..<25, using: &random) {
            case 0: nil
            case 1: "\(index + 1)"  // a number
            case 2: string(using: &random)
            default: "\"gen\(index)\""
            }
        var members: [(String, String?)] = [
            ("type", #""Feature""#), ("properties", object(present(properties), using: &random)),
            ("geometry", geometry), ("id", id),
        ]
        members.shuffle(using: &random)
        return object(present(members), using: &random)
    }

    /// The members that have a value.
    static func present(_ members: [(String, String?)]) -> [(String, String)] {
        members.compactMap { member in member.1.map { (member.0, $0) } }
    }

    /// An object of `members` in the given order, with random whitespace between tokens.
    static func object(_ members: [(String, String)], using random: inout SeededRandom) -> String {
        let inside = members.map { name, value in
            "\"\(name)\"" + space(using: &random) + ":" + space(using: &random) + value
        }
        return "{" + space(using: &random)
            + inside.joined(separator: space(using: &random) + "," + space(using: &random))
            + space(using: &random) + "}"
    }

    static func space(using random: inout SeededRandom) -> String {
        Int.random(in: 0..<6, using: &random) == 0
            ? [" ", "\n", "\t", "\r\n ", "  "].randomElement(using: &random)! : ""
    }

    /// A number in `range`, written in one of JSON's forms.
    static func number(_ range: ClosedRange<Double>, using random: inout SeededRandom) -> String {
        let value = Double.random(in: range, using: &random)
        switch Int.random(in: 0..<8, using: &random) {
        case 0: return String(Int(value))  // an integer
        case 1: return String(format: "%.1f", value)
        case 2: return String(format: "%.6e", value)  // an exponent
        case 3: return String(format: "%.3E", value).replacingOccurrences(of: "E+", with: "E")
        case 4: return value < 0 ? "-0.0" : "0.00"
        case 5: return String(format: "%.17g", value)
        default: return String(value)
        }
    }

    /// An integer, sometimes written with a fraction or an exponent.
    static func integer(_ value: Int64, using random: inout SeededRandom) -> String {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: return "\(value).0"
        case 1: return "\(Double(value) / 1e12)e12"
        default: return "\(value)"
        }
    }

    /// A string with escapes, non-ASCII text and surrogate pairs.
    static func string(using random: inout SeededRandom) -> String {
        let pieces = [
            "km", " ", "SW of ", "Höfn", "東京", "😀", #"\""#, #"\\"#, #"\/"#, #"\n"#, #"\t"#, #"\b"#, #"\f"#, #"\r"#,
            #"\u00e9"#, #"\u20AC"#, #"\ud83d\ude00"#, #"\u0000"#, "https://x.org/a", "5", ",", "[", "}",
        ]
        let count = Int.random(in: 0...6, using: &random)
        return "\"" + (0..<count).map { _ in pieces.randomElement(using: &random)! }.joined() + "\""
    }

    /// An unknown member's value: nested arrays and objects.
    static func unknown(depth: Int, using random: inout SeededRandom) -> String {
        guard depth < 4 else { return number(0...1, using: &random) }
        switch Int.random(in: 0..<5, using: &random) {
        case 0:
            return "["
                + (0..<Int.random(in: 0...3, using: &random)).map { _ in unknown(depth: depth + 1, using: &random) }
                .joined(separator: ",") + "]"
        case 1:
            return object(
                (0..<Int.random(in: 0...3, using: &random)).map {
                    ("k\($0)", unknown(depth: depth + 1, using: &random))
                },
                using: &random)
        case 2: return string(using: &random)
        case 3: return ["true", "false", "null"].randomElement(using: &random)!
        default: return number(-1e6...1e6, using: &random)
        }
    }
}
