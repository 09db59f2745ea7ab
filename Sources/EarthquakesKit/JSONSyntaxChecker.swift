/// Finds the first syntax error in JSON text, with its byte offset and a reason.
///
/// ``FeedParser`` decodes with Foundation's `JSONDecoder`, whose error messages differ
/// between platforms and versions. When decoding fails on the text itself, the parser runs
/// this checker to report a precise, stable position (``FeedError/Position``).
///
/// The checker follows RFC 8259 strictly: no comments, no trailing commas, no `NaN`. It is
/// iterative (an explicit stack), so deeply nested input cannot overflow the call stack.
struct JSONSyntaxChecker {
    /// A syntax error: where, and what was expected.
    struct Failure: Equatable, Error {
        var offset: Int
        var reason: String
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Returns the first syntax error in `bytes`, or `nil` when they hold exactly one valid
    /// JSON value (with optional surrounding whitespace).
    static func firstError(in bytes: UnsafeBufferPointer<UInt8>) -> Failure? {
        var checker = JSONSyntaxChecker(bytes)
        do {
            try checker.checkDocument()
            return nil
        } catch {
            return error
        }
    }

    private enum Container { case object, array }

    private mutating func checkDocument() throws(Failure) {
        var stack: [Container] = []
        skipWhitespace()
        try checkValueStart(&stack)
        while true {
            skipWhitespace()
            guard let container = stack.last else { break }
            guard index < bytes.count else {
                throw fail(
                    "unexpected end of input: \(stack.count) unclosed "
                        + (container == .object ? "object(s), expected ',' or '}'" : "array(s), expected ',' or ']'")
                )
            }
            let byte = bytes[index]
            let closer = container == .object ? UInt8(ascii: "}") : UInt8(ascii: "]")
            if byte == closer {
                index += 1
                stack.removeLast()
            } else if byte == UInt8(ascii: ",") {
                index += 1
                skipWhitespace()
                if container == .object { try checkMemberName() }
                try checkValueStart(&stack)
            } else {
                throw fail("unexpected \(describe(byte)), expected ',' or '\(Character(Unicode.Scalar(closer)))'")
            }
        }
        if index < bytes.count {
            throw fail("unexpected \(describe(bytes[index])) after the end of the JSON value")
        }
    }

    /// Checks a scalar value, or opens a container and checks its first element's start.
    private mutating func checkValueStart(_ stack: inout [Container]) throws(Failure) {
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input, expected a value") }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                stack.append(.object)
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    stack.removeLast()
                    return
                }
                try checkMemberName()  // then loop to check the member's value
            case UInt8(ascii: "["):
                index += 1
                stack.append(.array)
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    stack.removeLast()
                    return
                }  // else loop to check the first element
            case UInt8(ascii: "\""):
                try checkString()
                return
            case UInt8(ascii: "t"): return try checkLiteral("true")
            case UInt8(ascii: "f"): return try checkLiteral("false")
            case UInt8(ascii: "n"): return try checkLiteral("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return try checkNumber()
            default:
                throw fail("unexpected \(describe(bytes[index])), expected a value")
            }
        }
    }

    /// Checks `"name"` followed by `:`.
    private mutating func checkMemberName() throws(Failure) {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input, expected a member name") }
        guard bytes[index] == UInt8(ascii: "\"") else {
            throw fail("unexpected \(describe(bytes[index])), expected a member name in double quotes")
        }
        try checkString()
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input, expected ':'") }
        guard bytes[index] == UInt8(ascii: ":") else {
            throw fail("unexpected \(describe(bytes[index])), expected ':'")
        }
        index += 1
    }

    private mutating func checkString() throws(Failure) {
        let start = index
        index += 1  // opening quote
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { break }
                switch bytes[index] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 1
                case UInt8(ascii: "u"):
                    let escape = index - 1
                    guard let unit = try hexUnit() else { break }
                    // UTF-16 surrogates come in pairs (RFC 8259 §7): a lone half is no character at all.
                    if (0xDC00...0xDFFF).contains(unit) {
                        throw Failure(
                            offset: escape,
                            reason: "invalid \\u escape \\u\(hex(unit)) in a string: the second half of a UTF-16 "
                                + "surrogate pair without its first half")
                    }
                    if (0xD800...0xDBFF).contains(unit) {
                        let next = index
                        var low: UInt16?
                        if index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        {
                            index += 1
                            low = try hexUnit()
                        }
                        guard let low, (0xDC00...0xDFFF).contains(low) else {
                            index = next
                            throw Failure(
                                offset: escape,
                                reason: "invalid \\u escape \\u\(hex(unit)) in a string: the first half of a UTF-16 "
                                    + "surrogate pair without its second half")
                        }
                    }
                default:
                    throw fail("invalid escape '\\\(describeRaw(bytes[index]))' in a string")
                }
            case 0x00..<0x20:
                throw fail("control character \(describe(byte)) inside a string (not allowed in JSON)")
            case 0x80...:
                try checkUTF8Sequence()
            default:
                index += 1
            }
        }
        index = bytes.count
        throw Failure(offset: start, reason: "unexpected end of input inside a string that starts here")
    }

    /// One UTF-8 encoded character of two to four bytes (RFC 3629: no overlong forms, no surrogates).
    private mutating func checkUTF8Sequence() throws(Failure) {
        let lead = bytes[index]
        let (count, secondRange): (Int, ClosedRange<UInt8>) =
            switch lead {
            case 0xC2...0xDF: (1, 0x80...0xBF)
            case 0xE0: (2, 0xA0...0xBF)
            case 0xED: (2, 0x80...0x9F)
            case 0xE1...0xEF: (2, 0x80...0xBF)
            case 0xF0: (3, 0x90...0xBF)
            case 0xF1...0xF3: (3, 0x80...0xBF)
            case 0xF4: (3, 0x80...0x8F)
            default: (0, 0x80...0xBF)
            }
        let notUTF8 = fail("\(describe(lead)) in a string is not UTF-8 text (the feed must be UTF-8)")
        guard count > 0 else { throw notUTF8 }
        for offset in 1...count {
            guard index + offset < bytes.count else { throw notUTF8 }
            let byte = bytes[index + offset]
            guard offset == 1 ? secondRange.contains(byte) : (0x80...0xBF).contains(byte) else { throw notUTF8 }
        }
        index += count + 1
    }

    private mutating func checkNumber() throws(Failure) {
        let start = index
        try checkNumberSyntax()
        // A well-formed number too large for a 64-bit float: JSON decoders refuse it as "not valid JSON".
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if let value = Double(text), !value.isFinite {
            throw Failure(
                offset: start, reason: "the number \(text) is too large (beyond ±1.8e308, a 64-bit float's range)")
        }
    }

    private mutating func checkNumberSyntax() throws(Failure) {
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else {
            throw index < bytes.count
                ? fail("invalid number: expected a digit") : fail("unexpected end of input in a number")
        }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw fail("invalid number: leading zero") }
        } else {
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else {
                throw fail("invalid number: expected a digit after '.'")
            }
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number: expected an exponent") }
            skipDigits()
        }
    }

    private mutating func checkLiteral(_ literal: StaticString) throws(Failure) {
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        for byte in expected {
            guard index < bytes.count else { throw fail("unexpected end of input in '\(literal)'") }
            guard bytes[index] == byte else {
                throw fail("unexpected \(describe(bytes[index])), expected '\(literal)'")
            }
            index += 1
        }
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    private mutating func skipDigits() {
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }

    private func fail(_ reason: String) -> Failure { Failure(offset: index, reason: reason) }

    /// The four hex digits after the `u` of a `\\u` escape at `index`, leaving `index` after them; `nil`
    /// at the end of the input.
    private mutating func hexUnit() throws(Failure) -> UInt16? {
        var unit: UInt16 = 0
        for _ in 0..<4 {
            index += 1
            guard index < bytes.count else { return nil }
            let byte = bytes[index]
            guard isHexDigit(byte) else { throw fail("invalid \\u escape in a string") }
            let digit = isDigit(byte) ? byte - UInt8(ascii: "0") : (byte | 0x20) - UInt8(ascii: "a") + 10
            unit = unit << 4 | UInt16(digit)
        }
        index += 1
        return unit
    }

    private func hex(_ unit: UInt16) -> String { String(unit, radix: 16, uppercase: false) }

    private func describe(_ byte: UInt8) -> String {
        if byte >= 0x20 && byte < 0x7F { return "character '\(describeRaw(byte))'" }
        return "byte 0x" + String(byte, radix: 16, uppercase: true)
    }

    private func describeRaw(_ byte: UInt8) -> String {
        byte >= 0x20 && byte < 0x7F ? String(Character(Unicode.Scalar(byte))) : "0x" + String(byte, radix: 16)
    }
}

extension FeedError.Position {
    /// Computes line, column and an excerpt for `offset` in `bytes`.
    init(offset: Int, in bytes: UnsafeBufferPointer<UInt8>) {
        let offset = min(max(offset, 0), bytes.count)
        var line = 1
        var lineStart = 0
        for i in 0..<offset where bytes[i] == 0x0A {
            line += 1
            lineStart = i + 1
        }
        let before = max(0, offset - 30)
        let after = min(bytes.count, offset + 10)
        func clean(_ range: Range<Int>) -> String {
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
            return String(text.map { $0.isNewline || $0 == "\t" ? " " : $0 })
        }
        let prefix = before > 0 ? "…" : ""
        let suffix = after < bytes.count ? "…" : ""
        let excerpt = prefix + clean(before..<offset) + "⟨here⟩" + clean(offset..<after) + suffix
        self.init(byteOffset: offset, line: line, column: offset - lineStart + 1, excerpt: excerpt)
    }
}
