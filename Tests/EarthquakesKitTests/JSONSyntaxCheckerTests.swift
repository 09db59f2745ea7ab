import BatonTesting
import Testing

@testable import EarthquakesKit

@Suite("JSONSyntaxChecker", .offThePool)
struct JSONSyntaxCheckerTests {
    func check(_ text: String) -> JSONSyntaxChecker.Failure? {
        Array(text.utf8).withUnsafeBufferPointer { JSONSyntaxChecker.firstError(in: $0) }
    }

    @Test(
        "accepts valid JSON",
        arguments: [
            "{}", "[]", " 0 ", "-1.5e+10", "\"\\u00e9\\n\"", "true", "null", "{\"a\":[1,{\"b\":null},\"c\"],\"d\":{}}",
            "[[[[[]]]]]", "\"Höfn\"", "\"M 4.7 — 91 km NNE\"", "\"🌋 ß 中\"", "[1e308, -1.7e308, 1e-400]",
        ]
    )
    func valid(text: String) {
        #expect(check(text) == nil)
    }

    @Test(
        "finds the first error and where it is",
        arguments: [
            ("", 0, "unexpected end of input"),
            ("{\"a\":1,}", 7, "expected a member name"),
            ("[1,]", 3, "expected a value"),
            ("[1 2]", 3, "expected ',' or ']'"),
            ("{\"a\" 1}", 5, "expected ':'"),
            ("{'a':1}", 1, "expected a member name in double quotes"),
            ("[01]", 2, "leading zero"),
            ("[1.]", 3, "after '.'"),
            ("[1e]", 3, "exponent"),
            ("[-]", 2, "expected a digit"),
            ("[tru]", 4, "expected 'true'"),
            ("[nul", 4, "unexpected end of input in 'null'"),
            ("\"abc", 0, "inside a string that starts here"),
            ("\"a\\qb\"", 3, "invalid escape '\\q'"),
            ("\"\\u12G4\"", 5, "invalid \\u escape"),
            ("\"tab\there\"", 4, "control character"),
            ("{} x", 3, "after the end of the JSON value"),
            ("[[1]", 4, "unexpected end of input: 1 unclosed array(s)"),
            ("{\"a\":{\"b\":1}", 12, "unexpected end of input: 1 unclosed object(s)"),
            ("NaN", 0, "unexpected character 'N', expected a value"),
            ("[1, -154.6e368]", 4, "the number -154.6e368 is too large"),
            ("{\"mag\":1e309}", 7, "too large"),
        ]
    )
    func invalid(text: String, offset: Int, reason: String) throws {
        let failure = try #require(check(text))
        #expect(failure.offset == offset)
        #expect(failure.reason.contains(reason), "\(failure.reason)")
    }

    @Test(
        "a string's bytes must be UTF-8",
        arguments: [
            ([0xC3, 0x53], "byte 0xC3"),  // a lead byte without its continuation
            ([0x80], "byte 0x80"),  // a continuation byte alone
            ([0xC0, 0xAF], "byte 0xC0"),  // an overlong '/'
            ([0xED, 0xA0, 0x80], "byte 0xED"),  // a UTF-16 surrogate
            ([0xF4, 0x90, 0x80, 0x80], "byte 0xF4"),  // beyond U+10FFFF
            ([0xE2, 0x80], "byte 0xE2"),  // cut short by the closing quote
            ([0xFF], "byte 0xFF"),
        ] as [([UInt8], String)]
    )
    func notUTF8(inside: [UInt8], named: String) throws {
        let bytes = Array(#"["ok", "M 4.7 - "#.utf8) + inside + Array(#" Sumatra"]"#.utf8)
        let failure = try #require(bytes.withUnsafeBufferPointer { JSONSyntaxChecker.firstError(in: $0) })
        #expect(failure.offset == 16)  // the byte itself
        #expect(failure.reason.contains(named) && failure.reason.contains("not UTF-8"), "\(failure.reason)")
    }

    @Test("deep nesting does not overflow the stack")
    func deepNesting() {
        let depth = 200_000
        #expect(check(String(repeating: "[", count: depth) + String(repeating: "]", count: depth)) == nil)
        #expect(check(String(repeating: "[", count: depth))?.offset == depth)
    }

    @Test("positions count lines and columns and show an excerpt")
    func position() {
        let bytes = Array("{\n  \"a\": 1,\n  oops\n}".utf8)
        let position = bytes.withUnsafeBufferPointer { FeedError.Position(offset: 14, in: $0) }
        #expect(position.line == 3)
        #expect(position.column == 3)
        #expect(position.excerpt == "{   \"a\": 1,   ⟨here⟩oops }")
    }
}
