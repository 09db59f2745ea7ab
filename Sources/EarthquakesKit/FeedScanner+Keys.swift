/// A member name, compared exactly without making a `String`: up to 16 bytes packed in two words;
/// longer names never equal a known one.
struct Key: Equatable {
    private var low: UInt64 = 0
    private var high: UInt64 = 0
    private var length: Int

    init(bytes: UnsafeBufferPointer<UInt8>) {
        length = bytes.count
        guard bytes.count <= 16 else {
            (low, high) = (.max, .max)
            return
        }
        for (offset, byte) in bytes.enumerated() {
            if offset < 8 {
                low |= UInt64(byte) << (8 * UInt64(offset))
            } else {
                high |= UInt64(byte) << (8 * UInt64(offset - 8))
            }
        }
    }

    init(_ name: String) {
        self = Array(name.utf8).withUnsafeBufferPointer { Key(bytes: $0) }
    }
}

/// The member names the scanner reads, and the JSON literals.
struct Keys {
    /// One instance per scan, so that comparisons read plain stored constants.
    static let shared = Keys()

    let type = Key("type")
    let id = Key("id")
    let metadata = Key("metadata")
    let features = Key("features")
    let generated = Key("generated")
    let url = Key("url")
    let title = Key("title")
    let status = Key("status")
    let api = Key("api")
    let count = Key("count")
    let geometry = Key("geometry")
    let properties = Key("properties")
    let coordinates = Key("coordinates")
    let mag = Key("mag")
    let place = Key("place")
    let time = Key("time")
    let updated = Key("updated")
    let tz = Key("tz")
    let detail = Key("detail")
    let felt = Key("felt")
    let cdi = Key("cdi")
    let mmi = Key("mmi")
    let alert = Key("alert")
    let tsunami = Key("tsunami")
    let sig = Key("sig")
    let net = Key("net")
    let code = Key("code")
    let magType = Key("magType")
    let ids = Key("ids")

    let featureStart = Array(#"{"type":"Feature","#.utf8)
    let trueLiteral = Array("true".utf8)
    let falseLiteral = Array("false".utf8)
    let nullLiteral = Array("null".utf8)
}

/// The known members an object had so far. A name that comes twice makes the scanner give way to
/// `JSONDecoder`, which keeps one of the two by rules of its own (the differential test found the scanner
/// keeping the other).
struct Seen {
    private var bits: UInt32 = 0

    /// Notes member `bit`; gives up when it came before.
    mutating func mark(_ bit: Int) throws(FeedScanner.GiveUp) {
        let mask: UInt32 = 1 << UInt32(bit)
        if bits & mask != 0 { throw FeedScanner.GiveUp() }
        bits |= mask
    }
}
