/// Recognises a GeoJSONP response, `callback({...});`, and finds the JSON inside.
///
/// The USGS serves every feed also as `.geojsonp` for JSONP clients: the same JSON wrapped in
/// a JavaScript call to `eqfeed_callback`. Any JavaScript identifier is accepted as the
/// callback name (dots allowed, as in `window.handle`).
enum GeoJSONP {
    /// The callback name and the byte range of the wrapped JSON.
    struct Unwrapped: Equatable {
        var callback: String
        var json: Range<Int>
    }

    /// Returns the wrapped JSON's range when `bytes` is `name( … )` with an optional `;` and
    /// surrounding whitespace; `nil` when it is anything else (for example plain JSON).
    static func unwrap(_ bytes: UnsafeBufferPointer<UInt8>) -> Unwrapped? {
        var start = 0
        var end = bytes.count
        // Skip a UTF-8 byte order mark and leading whitespace.
        if end >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { start = 3 }
        while start < end, isWhitespace(bytes[start]) { start += 1 }
        guard start < end, isIdentifierStart(bytes[start]) else { return nil }

        let nameStart = start
        while start < end, isIdentifierPart(bytes[start]) { start += 1 }
        let callback = String(decoding: UnsafeBufferPointer(rebasing: bytes[nameStart..<start]), as: UTF8.self)
        while start < end, isWhitespace(bytes[start]) { start += 1 }
        guard start < end, bytes[start] == UInt8(ascii: "(") else { return nil }
        start += 1

        while end > start, isWhitespace(bytes[end - 1]) { end -= 1 }
        if end > start, bytes[end - 1] == UInt8(ascii: ";") { end -= 1 }
        while end > start, isWhitespace(bytes[end - 1]) { end -= 1 }
        guard end > start, bytes[end - 1] == UInt8(ascii: ")") else { return nil }
        end -= 1
        return Unwrapped(callback: callback, json: start..<end)
    }

    /// The callback of input that opens a GeoJSONP wrapper (`name(`) and does not close it: a download cut
    /// short. `nil` for anything else.
    static func unclosedCallback(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard unwrap(bytes) == nil else { return nil }
        var start = 0
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { start = 3 }
        while start < bytes.count, isWhitespace(bytes[start]) { start += 1 }
        guard start < bytes.count, isIdentifierStart(bytes[start]) else { return nil }
        let nameStart = start
        while start < bytes.count, isIdentifierPart(bytes[start]) { start += 1 }
        let name = UnsafeBufferPointer(rebasing: bytes[nameStart..<start])
        while start < bytes.count, isWhitespace(bytes[start]) { start += 1 }
        // `name(` then the start of a JSON object: not a word that happens to begin a text.
        guard start < bytes.count, bytes[start] == UInt8(ascii: "(") else { return nil }
        start += 1
        while start < bytes.count, isWhitespace(bytes[start]) { start += 1 }
        guard start < bytes.count, bytes[start] == UInt8(ascii: "{") else { return nil }
        // A `)` after the last `}`: the wrapper is closed, and something else follows it (`cb({…});// c`),
        // which `unwrap` refuses for another reason.
        let lastBrace = bytes.lastIndex(of: UInt8(ascii: "}")) ?? start
        guard !bytes[lastBrace...].contains(UInt8(ascii: ")")) else { return nil }
        return String(decoding: name, as: UTF8.self)
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    private static func isIdentifierStart(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "$")
    }

    private static func isIdentifierPart(_ byte: UInt8) -> Bool {
        isIdentifierStart(byte) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: ".")
    }
}
