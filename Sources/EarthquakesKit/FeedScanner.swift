import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a well-formed USGS feed straight from its bytes into the wire types of ``FeedParser``, without
/// `JSONDecoder`: one pass, no intermediate JSON values, strings made only for the members the model
/// keeps. About ten times faster than decoding, and much smaller in memory. A features array of a
/// megabyte or more is read in two halves at once, on two threads (see `featuresInHalves`).
///
/// It reads only what it can read exactly as `JSONDecoder` would. Anything else — a syntax error, a
/// value of an unexpected JSON type, an escape in a member name, a detail document — makes it give up
/// (`nil`), and ``FeedParser`` decodes the feed with `JSONDecoder` instead, which produces the precise
/// errors and the per-feature leniency. So the fast path never changes what a feed means.
struct FeedScanner {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index: Int
    private let keys = Keys.shared
    private let powersOfTen = FeedScanner.exactPowersOfTen
    /// Where to split the features array instead of ``splitPoint(_:from:)``'s guess (tests).
    private var splitOverride: Int?
    /// Whether features are only located (``LightFeature``) instead of decoded: see ``scanLight(_:)``.
    private var light = false
    /// The located features, when ``light``.
    private var lightFeatures: [LightFeature]?
    /// The key features are hashed with (see ``FeatureHash``).
    private var key = FingerprintKey.unkeyed
    /// Asked every 256 features: a cancelled parse gives up (its caller checks the same and stops instead
    /// of taking the slow path).
    private var isCancelled: (@Sendable () -> Bool)?

    /// Gives up: the slow path takes over.
    struct GiveUp: Error {}

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        self.index = 0
    }

    /// The document in `bytes` (exactly one JSON object, with optional surrounding whitespace), or
    /// `nil` when the slow path must read it.
    static func scan(
        _ bytes: UnsafeBufferPointer<UInt8>, splittingAt split: Int? = nil, key: FingerprintKey = .unkeyed,
        isCancelled: (@Sendable () -> Bool)? = nil
    ) -> FeedParser.WireDocument? {
        var scanner = FeedScanner(bytes)
        scanner.splitOverride = split
        scanner.key = key
        scanner.isCancelled = isCancelled
        do {
            let document = try scanner.document()
            scanner.skipWhitespace()
            return scanner.index == bytes.count ? document : nil
        } catch {
            return nil
        }
    }

    /// A feature located by ``scanLight(_:)``: where it is, its hash, and its `properties.time` and
    /// `properties.updated` (which decide the feed's time unit), read exactly as a full scan reads them.
    struct LightFeature {
        var range: Range<Int>
        var hash: FeatureHash
        var time: Double?
        var updated: Double?
    }

    /// The document in `bytes` with its features located but not decoded (`document.features` is `nil`
    /// and `features` holds them), or `nil` when the full scan (or the slow path) must read it. The syntax
    /// of the whole document is checked as by ``scan(_:splittingAt:)``; the features' values are not,
    /// except for `properties.time`.
    static func scanLight(
        _ bytes: UnsafeBufferPointer<UInt8>, splittingAt split: Int? = nil, key: FingerprintKey = .unkeyed,
        isCancelled: (@Sendable () -> Bool)? = nil
    ) -> (document: FeedParser.WireDocument, features: [LightFeature]?)? {
        var scanner = FeedScanner(bytes)
        scanner.splitOverride = split
        scanner.key = key
        scanner.isCancelled = isCancelled
        scanner.light = true
        do {
            let document = try scanner.document()
            scanner.skipWhitespace()
            return scanner.index == bytes.count ? (document, scanner.lightFeatures) : nil
        } catch {
            return nil
        }
    }

    /// The feature object that is exactly `range` of `bytes` (as located by ``scanLight(_:)``), decoded as
    /// ``scan(_:splittingAt:)`` decodes it; `nil` when the slow path must read it.
    static func feature(
        in bytes: UnsafeBufferPointer<UInt8>, range: Range<Int>, key: FingerprintKey = .unkeyed
    ) -> FeedParser.WireFeature? {
        var scanner = FeedScanner(bytes)
        scanner.key = key
        scanner.index = range.lowerBound
        guard let feature = try? scanner.hashedFeature(), scanner.index == range.upperBound else { return nil }
        return feature
    }

    // MARK: Structure

    private mutating func document() throws(GiveUp) -> FeedParser.WireDocument {
        var document = FeedParser.WireDocument()
        var sawFeatures = false
        var seen = Seen()
        try object { scanner, key throws(GiveUp) in
            switch key {
            case scanner.keys.type:
                try seen.mark(0)
                document.type = try scanner.optionalString()
            case scanner.keys.id:
                try seen.mark(1)
                document.id = try scanner.lenientID()
            case scanner.keys.metadata:
                try seen.mark(2)
                document.metadata = try scanner.metadata()
            case scanner.keys.features:
                try seen.mark(3)
                sawFeatures = true
                if scanner.light {
                    scanner.lightFeatures = try scanner.elements { scanner throws(GiveUp) in try scanner.lightFeature()
                    }
                } else {
                    document.features = try scanner.elements { scanner throws(GiveUp) in
                        .feature(try scanner.hashedFeature())
                    }
                }
            default: try scanner.skipValue()
            }
        }
        if document.type == "Feature" { throw GiveUp() }  // a detail document: the slow path words it
        if !sawFeatures { document.features = nil }
        return document
    }

    private mutating func metadata() throws(GiveUp) -> FeedParser.WireMetadata? {
        if try consumeNull() { return nil }
        var metadata = FeedParser.WireMetadata()
        var seen = Seen()
        try object { scanner, key throws(GiveUp) in
            switch key {
            case scanner.keys.generated:
                try seen.mark(0)
                metadata.generated = try scanner.optionalDouble()
            case scanner.keys.url:
                try seen.mark(1)
                metadata.url = try scanner.optionalString()
            case scanner.keys.title:
                try seen.mark(2)
                metadata.title = try scanner.optionalString()
            case scanner.keys.status:
                try seen.mark(3)
                metadata.status = try scanner.optionalInt()
            case scanner.keys.api:
                try seen.mark(4)
                metadata.api = try scanner.optionalString()
            case scanner.keys.count:
                try seen.mark(5)
                metadata.count = try scanner.optionalInt()
            default: try scanner.skipValue()
            }
        }
        return metadata
    }

    /// The elements of the features array (`nil` for null), each read by `read` from its first byte.
    private mutating func elements<Element>(
        _ read: @Sendable (inout FeedScanner) throws(GiveUp) -> Element
    ) throws(GiveUp) -> [Element]? {
        if try consumeNull() { return nil }
        skipWhitespace()
        try expect(UInt8(ascii: "["))
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return []
        }
        if let split = splitOverride ?? Self.splitPoint(bytes, from: index) {
            return try featuresInHalves(split, read)
        }
        var entries: [Element] = []
        entries.reserveCapacity((bytes.count - index) / 500)
        _ = try featureElements(into: &entries, stoppingAt: nil, read)
        return entries
    }

    /// Reads the features from `index` (an element's start) to the end of the array, past its "]"; or,
    /// when `stop` is given, until the next element starts exactly at `stop` (then returns `true`, with
    /// `index` at `stop`).
    private mutating func featureElements<Element>(
        into entries: inout [Element], stoppingAt stop: Int?,
        _ read: @Sendable (inout FeedScanner) throws(GiveUp) -> Element
    ) throws(GiveUp) -> Bool {
        while true {
            skipWhitespace()
            entries.append(try read(&self))
            if entries.count & 255 == 0, let isCancelled, isCancelled() { throw GiveUp() }
            skipWhitespace()
            guard index < bytes.count else { throw GiveUp() }
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "]") { return false }
            guard byte == UInt8(ascii: ",") else { throw GiveUp() }
            skipWhitespace()
            if index == stop { return true }
        }
    }

    // MARK: Two halves at once

    /// Features arrays at least this long are read in two halves at once (on two threads).
    static let parallelMinimumBytes = 1 << 20

    /// Where the second half of a big features array probably starts: the first `{"type":"Feature",`
    /// after the middle that follows a comma (and optional whitespace), the way the USGS writes
    /// consecutive features. Only a guess: the first half confirms it (see ``featuresInHalves(_:)``).
    static func splitPoint(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        guard bytes.count - start >= parallelMinimumBytes, ProcessInfo.processInfo.activeProcessorCount > 1
        else { return nil }
        let pattern = Keys.shared.featureStart
        var position = start + (bytes.count - start) / 2
        while position + pattern.count <= bytes.count {
            if bytes[position] == pattern[0] {
                var offset = 1
                while offset < pattern.count, bytes[position + offset] == pattern[offset] { offset += 1 }
                if offset == pattern.count {
                    var before = position - 1
                    while before > start, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[before]) { before -= 1 }
                    if bytes[before] == UInt8(ascii: ",") { return position }
                }
            }
            position += 1
        }
        return nil
    }

    /// Reads the features from `index` to the end of the array, the part before `split` on this thread
    /// and the part from `split` on another, at the same time.
    ///
    /// The result is exactly that of reading in one pass: the first half reads until an element starts
    /// exactly at `split`, and only then is the second half's result used (reading a feature depends on
    /// its bytes alone). If `split` is not where an element starts (the pattern was inside a nested
    /// value), the first half never stops there and reads on to the end of the array, and the second
    /// half's work is dropped.
    private mutating func featuresInHalves<Element>(
        _ split: Int, _ read: @Sendable (inout FeedScanner) throws(GiveUp) -> Element
    ) throws(GiveUp) -> [Element] {
        let halves = Halves<Element>(bytes: bytes, start: index, split: split)
        let key = key
        let isCancelled = isCancelled
        DispatchQueue.concurrentPerform(iterations: 2) { part in
            var scanner = FeedScanner(halves.bytes)
            scanner.key = key
            scanner.isCancelled = isCancelled
            var entries: [Element] = []
            if part == 0 {
                scanner.index = halves.start
                // Room for both halves (features are rarely under 500 bytes), so that appending the second
                // half does not copy the first; capacity never written is never touched.
                entries.reserveCapacity((halves.bytes.count - halves.start) / 500)
                guard let atSplit = try? scanner.featureElements(into: &entries, stoppingAt: halves.split, read) else {
                    return
                }
                halves.first = (entries, atSplit, scanner.index)
            } else {
                scanner.index = halves.split
                entries.reserveCapacity((halves.bytes.count - halves.split) / 500)
                guard (try? scanner.featureElements(into: &entries, stoppingAt: nil, read)) != nil else { return }
                halves.second = (entries, scanner.index)
            }
        }
        guard var first = halves.first else { throw GiveUp() }
        guard first.atSplit else {
            index = first.end
            return first.entries
        }
        // The second half failed where a one-pass read would have failed too.
        guard let second = halves.second else { throw GiveUp() }
        halves.first = nil
        halves.second = nil
        first.entries.append(contentsOf: second.entries)
        index = second.end
        return first.entries
    }

    /// A feature, with the hash of its bytes.
    private mutating func hashedFeature() throws(GiveUp) -> FeedParser.WireFeature {
        let start = index
        var feature = try feature()
        feature.hash = FeatureHash(UnsafeBufferPointer(rebasing: bytes[start..<index]), key: key)
        return feature
    }

    /// A feature located: its extent and hash, and its `properties.time` and `updated` read as ``properties()`` reads
    /// it (the last `properties` member counts, and within it the last `time`). Every other value is
    /// only checked for syntax.
    private mutating func lightFeature() throws(GiveUp) -> LightFeature {
        let start = index
        var time: Double?
        var updated: Double?
        var seen = Seen()
        try object { scanner, key throws(GiveUp) in
            // (A feature with a repeated id or geometry is read by the full parse too: see `Seen`.)
            if key == scanner.keys.id || key == scanner.keys.geometry {
                try seen.mark(key == scanner.keys.id ? 1 : 2)
                return try scanner.skipValue()
            }
            guard key == scanner.keys.properties else { return try scanner.skipValue() }
            try seen.mark(0)
            if try scanner.consumeNull() { return }
            var inner = Seen()
            try scanner.object { scanner, key throws(GiveUp) in
                if key == scanner.keys.time {
                    try inner.mark(0)
                    time = try scanner.optionalDouble()
                } else if key == scanner.keys.updated {
                    try inner.mark(1)
                    updated = try scanner.optionalDouble()
                } else {
                    try scanner.skipValue()
                }
            }
        }
        return LightFeature(
            range: start..<index, hash: FeatureHash(UnsafeBufferPointer(rebasing: bytes[start..<index]), key: key),
            time: time,
            updated: updated)
    }

    private mutating func feature() throws(GiveUp) -> FeedParser.WireFeature {
        var feature = FeedParser.WireFeature()
        var seen = Seen()
        try object { scanner, key throws(GiveUp) in
            switch key {
            case scanner.keys.id:
                try seen.mark(0)
                feature.id = try scanner.lenientID()
            case scanner.keys.geometry:
                try seen.mark(1)
                feature.geometry = try scanner.geometry()
            case scanner.keys.properties:
                try seen.mark(2)
                feature.properties = try scanner.properties()
            default: try scanner.skipValue()
            }
        }
        return feature
    }

    private mutating func geometry() throws(GiveUp) -> FeedParser.WireGeometry? {
        if try consumeNull() { return nil }
        var geometry = FeedParser.WireGeometry()
        var seen = Seen()
        try object { scanner, key throws(GiveUp) in
            if key == scanner.keys.coordinates {
                try seen.mark(0)
                if try scanner.consumeNull() {
                    geometry.coordinates = nil
                    return
                }
                var values: [Double?] = []
                values.reserveCapacity(3)
                try scanner.array { scanner throws(GiveUp) in values.append(try scanner.optionalDouble()) }
                geometry.coordinates = values
            } else {
                try scanner.skipValue()
            }
        }
        return geometry
    }

    private mutating func properties() throws(GiveUp) -> FeedParser.WireProperties? {
        if try consumeNull() { return nil }
        var p = FeedParser.WireProperties()
        var seen = Seen()
        try object { s, key throws(GiveUp) in
            switch key {
            case s.keys.mag:
                try seen.mark(0)
                p.mag = try s.optionalDouble()
            case s.keys.place:
                try seen.mark(1)
                p.place = try s.optionalString()
            case s.keys.time:
                try seen.mark(2)
                p.time = try s.optionalDouble()
            case s.keys.updated:
                try seen.mark(3)
                p.updated = try s.optionalDouble()
            case s.keys.tz:
                try seen.mark(4)
                p.tz = try s.optionalInt()
            case s.keys.url:
                try seen.mark(5)
                p.url = try s.optionalString()
            case s.keys.detail:
                try seen.mark(6)
                p.detail = try s.optionalString()
            case s.keys.felt:
                try seen.mark(7)
                p.felt = try s.optionalInt()
            case s.keys.cdi:
                try seen.mark(8)
                p.cdi = try s.optionalDouble()
            case s.keys.mmi:
                try seen.mark(9)
                p.mmi = try s.optionalDouble()
            case s.keys.alert:
                try seen.mark(10)
                p.alert = try s.optionalString()
            case s.keys.status:
                try seen.mark(11)
                p.status = try s.optionalString()
            case s.keys.tsunami:
                try seen.mark(12)
                p.tsunami = try s.tsunami()
            case s.keys.sig:
                try seen.mark(13)
                p.sig = try s.optionalInt()
            case s.keys.net:
                try seen.mark(14)
                p.net = try s.optionalString()
            case s.keys.code:
                try seen.mark(15)
                p.code = try s.optionalString()
            case s.keys.magType:
                try seen.mark(16)
                p.magType = try s.optionalString()
            case s.keys.type:
                try seen.mark(17)
                p.type = try s.optionalString()
            case s.keys.title:
                try seen.mark(18)
                p.title = try s.optionalString()
            case s.keys.ids:
                try seen.mark(19)
                // Only read for the event's earlier ids: a value that is not text is skipped, not a reason
                // to read the whole feed the slow way.
                s.skipWhitespace()
                if s.peek() == UInt8(ascii: "\"") { p.ids = try s.optionalString() } else { try s.skipValue() }
            default: try s.skipValue()
            }
        }
        return p
    }

    /// Calls `member` for each member of an object, positioned at its value.
    private mutating func object(
        _ member: (inout FeedScanner, Key) throws(GiveUp) -> Void
    ) throws(GiveUp) {
        skipWhitespace()
        try expect(UInt8(ascii: "{"))
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            return
        }
        while true {
            skipWhitespace()
            let key = try memberName()
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            try member(&self, key)
            skipWhitespace()
            guard index < bytes.count else { throw GiveUp() }
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "}") { return }
            guard byte == UInt8(ascii: ",") else { throw GiveUp() }
        }
    }

    /// Calls `element` for each element of an array, positioned at it.
    private mutating func array(_ element: (inout FeedScanner) throws(GiveUp) -> Void) throws(GiveUp) {
        skipWhitespace()
        try expect(UInt8(ascii: "["))
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return
        }
        while true {
            skipWhitespace()
            try element(&self)
            skipWhitespace()
            guard index < bytes.count else { throw GiveUp() }
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "]") { return }
            guard byte == UInt8(ascii: ",") else { throw GiveUp() }
        }
    }

    // MARK: Values

    private mutating func optionalString() throws(GiveUp) -> String? {
        if try consumeNull() { return nil }
        return try string()
    }

    private mutating func optionalDouble() throws(GiveUp) -> Double? {
        if try consumeNull() { return nil }
        return try number().value
    }

    private mutating func optionalInt() throws(GiveUp) -> Int? {
        if try consumeNull() { return nil }
        let number = try number()
        guard let integer = number.integer, let value = Int(exactly: integer) else { throw GiveUp() }
        return value
    }

    /// 0/1 (any integer: non-zero is true), a boolean, or null.
    private mutating func tsunami() throws(GiveUp) -> Bool? {
        if try consumeNull() { return nil }
        switch peek() {
        case UInt8(ascii: "t"):
            try literal(keys.trueLiteral)
            return true
        case UInt8(ascii: "f"):
            try literal(keys.falseLiteral)
            return false
        default:
            guard let integer = try number().integer else { throw GiveUp() }
            return integer != 0
        }
    }

    /// A string, or an integer written as a number; null is `nil`.
    private mutating func lenientID() throws(GiveUp) -> String? {
        if try consumeNull() { return nil }
        if peek() == UInt8(ascii: "\"") { return try string() }
        guard let integer = try number().integer else { throw GiveUp() }
        return String(integer)
    }

    private mutating func consumeNull() throws(GiveUp) -> Bool {
        guard peek() == UInt8(ascii: "n") else { return false }
        try literal(keys.nullLiteral)
        return true
    }

    private mutating func literal(_ text: [UInt8]) throws(GiveUp) {
        guard index + text.count <= bytes.count else { throw GiveUp() }
        for (offset, byte) in text.enumerated() where bytes[index + offset] != byte { throw GiveUp() }
        index += text.count
    }

    // MARK: Strings

    /// A member name, which must be free of escapes (every name the USGS uses is plain ASCII).
    private mutating func memberName() throws(GiveUp) -> Key {
        try expect(UInt8(ascii: "\""))
        let start = index
        var nonASCII = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let name = UnsafeBufferPointer(rebasing: bytes[start..<index])
                // `JSONDecoder` refuses a document with a name that is not UTF-8 (the differential test found
                // the scanner reading past one).
                if nonASCII { try Self.checkUTF8(name) }
                index += 1
                return Key(bytes: name)
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { throw GiveUp() }
            nonASCII = nonASCII || byte >= 0x80
            index += 1
        }
        throw GiveUp()
    }

    /// Gives up unless `text` is UTF-8 (as `JSONDecoder` does with the whole document).
    private static func checkUTF8(_ text: UnsafeBufferPointer<UInt8>) throws(GiveUp) {
        var iterator = text.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid: continue
            case .emptyInput: return
            case .error: throw GiveUp()
            }
        }
    }

    private mutating func string() throws(GiveUp) -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return try validated(text)
            }
            if byte == UInt8(ascii: "\\") { return try escapedString(from: start) }
            if byte < 0x20 { throw GiveUp() }
            index += 1
        }
        throw GiveUp()
    }

    /// `JSONDecoder` rejects invalid UTF-8; so does the fast path (by giving up).
    private func validated(_ text: UnsafeBufferPointer<UInt8>) throws(GiveUp) -> String {
        if text.allSatisfy({ $0 < 0x80 }) { return String(decoding: text, as: UTF8.self) }
        guard let string = String(validating: text, as: UTF8.self) else { throw GiveUp() }
        return string
    }

    /// A string with escapes, from its first byte at `start` (`index` is at its first backslash): finds its
    /// end, then decodes it into a buffer as long as the text (decoding never lengthens it: `\/` is one
    /// byte, `\uXXXX` at most three, a surrogate pair's twelve bytes four), copying the runs between
    /// escapes whole.
    private mutating func escapedString(from start: Int) throws(GiveUp) -> String {
        let backslash = UInt8(ascii: "\\")
        var end = index
        while true {
            guard end < bytes.count else { throw GiveUp() }
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") { break }
            if byte == backslash {
                end += 2  // the escape itself is checked below
            } else {
                if byte < 0x20 { throw GiveUp() }
                end += 1
            }
        }
        guard end < bytes.count else { throw GiveUp() }
        let result: Result<String, GiveUp> = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: end - start) {
            buffer in
            do throws(GiveUp) {
                let count = try decodeEscapes(start..<end, into: buffer)
                return .success(try validated(UnsafeBufferPointer(rebasing: buffer[..<count])))
            } catch {
                return .failure(error)
            }
        }
        index = end + 1
        return try result.get()
    }

    /// Decodes the text of a string (without its quotes) into `buffer`; returns the decoded length.
    private func decodeEscapes(_ text: Range<Int>, into buffer: UnsafeMutableBufferPointer<UInt8>) throws(GiveUp) -> Int
    {
        let backslash = UInt8(ascii: "\\")
        var position = text.lowerBound
        var count = 0
        func put(_ byte: UInt8) {
            buffer[count] = byte
            count += 1
        }
        while position < text.upperBound {
            if bytes[position] != backslash {
                var runEnd = position + 1
                while runEnd < text.upperBound, bytes[runEnd] != backslash { runEnd += 1 }
                let run = UnsafeBufferPointer(rebasing: bytes[position..<runEnd])
                _ = UnsafeMutableBufferPointer(rebasing: buffer[count..<(count + run.count)]).initialize(from: run)
                count += run.count
                position = runEnd
                continue
            }
            guard position + 1 < text.upperBound else { throw GiveUp() }
            let escape = bytes[position + 1]
            position += 2
            switch escape {
            case UInt8(ascii: "\""), backslash, UInt8(ascii: "/"): put(escape)
            case UInt8(ascii: "b"): put(0x08)
            case UInt8(ascii: "f"): put(0x0C)
            case UInt8(ascii: "n"): put(0x0A)
            case UInt8(ascii: "r"): put(0x0D)
            case UInt8(ascii: "t"): put(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hexValue(at: position, before: text.upperBound)
                position += 4
                if (0xD800..<0xDC00).contains(scalar) {
                    // A high surrogate must be followed by an escaped low one.
                    guard position + 2 <= text.upperBound, bytes[position] == backslash,
                        bytes[position + 1] == UInt8(ascii: "u")
                    else { throw GiveUp() }
                    let low = try hexValue(at: position + 2, before: text.upperBound)
                    position += 6
                    guard (0xDC00..<0xE000).contains(low) else { throw GiveUp() }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00..<0xE000).contains(scalar) {
                    throw GiveUp()
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw GiveUp() }
                for byte in UTF8.encode(unicode)! { put(byte) }
            default: throw GiveUp()
            }
        }
        return count
    }

    /// The value of the four hexadecimal digits at `position`, which must end by `limit`.
    private func hexValue(at position: Int, before limit: Int) throws(GiveUp) -> UInt32 {
        guard position + 4 <= limit else { throw GiveUp() }
        var value: UInt32 = 0
        for byte in bytes[position..<(position + 4)] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw GiveUp()
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    // MARK: Numbers

    /// Powers of ten that a `Double` holds exactly.
    private static let exactPowersOfTen: [Double] = (0...22).map { exponent in
        var value = 1.0
        for _ in 0..<exponent { value *= 10 }
        return value
    }

    /// A JSON number: its value, correctly rounded, and the integer when it is written as one.
    private mutating func number() throws(GiveUp) -> (value: Double, integer: Int64?) {
        let start = index
        var negative = false
        if peek() == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        var mantissa: UInt64 = 0
        var digits = 0
        var exponent = 0
        // Integer part: "0" or a non-zero digit and more.
        guard let first = peek(), isDigit(first) else { throw GiveUp() }
        if first == UInt8(ascii: "0") {
            index += 1
            if let next = peek(), isDigit(next) { throw GiveUp() }
        } else {
            while let byte = peek(), isDigit(byte) {
                if digits < 19 {
                    mantissa = mantissa * 10 + UInt64(byte - UInt8(ascii: "0"))
                    digits += 1
                } else {
                    exponent += 1  // digits beyond 19 only scale (the slow conversion below is exact)
                    digits += 1
                }
                index += 1
            }
        }
        var isInteger = true
        if peek() == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard let byte = peek(), isDigit(byte) else { throw GiveUp() }
            while let byte = peek(), isDigit(byte) {
                if digits < 19 {
                    mantissa = mantissa * 10 + UInt64(byte - UInt8(ascii: "0"))
                    if mantissa != 0 { digits += 1 }
                    exponent -= 1
                } else {
                    digits += 1
                }
                index += 1
            }
        }
        if let byte = peek(), byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            var exponentNegative = false
            if let sign = peek(), sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
                exponentNegative = sign == UInt8(ascii: "-")
                index += 1
            }
            guard let digit = peek(), isDigit(digit) else { throw GiveUp() }
            var written = 0
            while let byte = peek(), isDigit(byte) {
                if written < 10_000 { written = written * 10 + Int(byte - UInt8(ascii: "0")) }
                index += 1
            }
            exponent += exponentNegative ? -written : written
        }

        var value: Double
        if digits <= 19, mantissa <= 1 << 53, abs(exponent) <= 22 {
            // Exact operands, one correctly rounded operation (Clinger's fast path).
            value = Double(mantissa)
            value = exponent < 0 ? value / powersOfTen[-exponent] : value * powersOfTen[exponent]
        } else {
            value = slowNumber(start..<index, negative: negative)
            negative = false
        }
        if negative { value = -value }
        // (A number beyond a double's range is read as infinity, which the feature's checks refuse: that
        // feature is skipped, where `JSONDecoder` refuses the whole document. Kept on purpose, and allowed
        // for by the differential test: one such feature must not block a feed for the 30 days it stays.)
        var integer: Int64?
        if isInteger, digits <= 18 { integer = negative ? -Int64(mantissa) : Int64(mantissa) }
        if isInteger, integer == nil { throw GiveUp() }  // a huge integer: let JSONDecoder decide
        return (value, integer)
    }

    private func slowNumber(_ range: Range<Int>, negative: Bool) -> Double {
        var text = Array(UnsafeBufferPointer(rebasing: bytes[range]))
        text.append(0)
        return text.withUnsafeBufferPointer { pointer in
            pointer.withMemoryRebound(to: CChar.self) { strtod($0.baseAddress!, nil) }
        }
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    // MARK: Skipping

    /// Skips one value of any kind, checking its syntax (iteratively: no recursion on nesting).
    private mutating func skipValue() throws(GiveUp) {
        var open: [Bool] = []  // the containers entered, `true` for an object
        while true {
            skipWhitespace()
            guard let byte = peek() else { throw GiveUp() }
            var entered = false
            switch byte {
            case UInt8(ascii: "{"):
                index += 1
                skipWhitespace()
                if peek() == UInt8(ascii: "}") {
                    index += 1
                } else {
                    open.append(true)
                    entered = true
                    _ = try memberName()
                    skipWhitespace()
                    try expect(UInt8(ascii: ":"))
                }
            case UInt8(ascii: "["):
                index += 1
                skipWhitespace()
                if peek() == UInt8(ascii: "]") {
                    index += 1
                } else {
                    open.append(false)
                    entered = true
                }
            case UInt8(ascii: "\""): try skipString()
            case UInt8(ascii: "t"): try literal(keys.trueLiteral)
            case UInt8(ascii: "f"): try literal(keys.falseLiteral)
            case UInt8(ascii: "n"): try literal(keys.nullLiteral)
            default: _ = try number()
            }
            if entered { continue }
            // A value is complete: close the containers it ends, or go on to the next element.
            while true {
                guard let isObject = open.last else { return }
                skipWhitespace()
                guard let next = peek() else { throw GiveUp() }
                index += 1
                if next == (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    open.removeLast()
                    continue
                }
                guard next == UInt8(ascii: ",") else { throw GiveUp() }
                if isObject {
                    skipWhitespace()
                    _ = try memberName()
                    skipWhitespace()
                    try expect(UInt8(ascii: ":"))
                }
                break
            }
        }
    }

    private mutating func skipString() throws(GiveUp) {
        try expect(UInt8(ascii: "\""))
        let start = index
        var nonASCII = false
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") {
                // A string skipped must be UTF-8 too (escapes are ASCII: the raw bytes tell).
                if nonASCII { try Self.checkUTF8(UnsafeBufferPointer(rebasing: bytes[start..<index - 1])) }
                return
            }
            if byte == UInt8(ascii: "\\") {
                guard index < bytes.count else { throw GiveUp() }
                index += 1
            } else if byte < 0x20 {
                throw GiveUp()
            } else if byte >= 0x80 {
                nonASCII = true
            }
        }
        throw GiveUp()
    }

    // MARK: Bytes

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func expect(_ byte: UInt8) throws(GiveUp) {
        guard index < bytes.count, bytes[index] == byte else { throw GiveUp() }
        index += 1
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 else { return }
            index += 1
        }
    }
}

/// The results of the two halves of ``FeedScanner/featuresInHalves(_:)``.
private final class Halves<Element>: @unchecked Sendable {
    // @unchecked Sendable: `first` is written only by the first iteration of `concurrentPerform`, `second`
    // only by the second, and both are read after `concurrentPerform` returned; the rest is immutable
    // (the bytes outlive the scan).
    let bytes: UnsafeBufferPointer<UInt8>
    let start: Int
    let split: Int
    var first: (entries: [Element], atSplit: Bool, end: Int)?
    var second: (entries: [Element], end: Int)?

    init(bytes: UnsafeBufferPointer<UInt8>, start: Int, split: Int) {
        (self.bytes, self.start, self.split) = (bytes, start, split)
    }
}
