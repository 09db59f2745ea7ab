import Foundation

/// What identifies a feature's text exactly enough to skip decoding it again: a 128-bit hash of the
/// bytes of the feature object (from its `{` to its `}`), with the time unit the feed was read in
/// (times in seconds are converted, so the same bytes give other rows in a feed read in seconds).
///
/// The import stores it beside each row that ``FeedScanner`` read (column `fingerprint`, see
/// ``blob``). Invariant: a row with a fingerprint holds exactly what decoding a feature with these
/// bytes in this unit gives, because every write of other values replaces or clears it. So a re-import
/// that finds a feature's fingerprint in the store knows the row is unchanged without decoding the
/// feature (see ``FeedParser`` with known features, and ``EarthquakeStore/importFeed(_:whileWaiting:commitGate:)-(Feed,_,_)``).
///
/// ``version`` is part of the stored value: change it whenever the parser reads the same bytes into
/// other values, so that rows fingerprinted by an older version are decoded and compared again.
struct FeatureFingerprint: Hashable, Sendable {
    /// The hash of the feature's bytes.
    var hash: FeatureHash
    /// The units the feed's times were read in: `0` milliseconds, `1` seconds (both `time` and
    /// `updated`), `2` `time` in seconds and `updated` in milliseconds, `3` the other way round.
    var unit: UInt8

    /// The version of the parsing rules, stored first in ``blob``.
    /// (2: types trimmed, blank types nil; `time` and `updated` units decided apart.)
    static let version: UInt8 = 2
    /// The stored size: version, unit and the two words of the hash.
    static let blobCount = 18

    init(hash: FeatureHash, units: FeedParser.TimeUnits) {
        self.hash = hash
        switch (units.time, units.updated) {
        case (.milliseconds, .milliseconds): unit = 0
        case (.seconds, .seconds): unit = 1
        case (.seconds, .milliseconds): unit = 2
        case (.milliseconds, .seconds): unit = 3
        }
    }

    /// Reads a stored value; `nil` for another version or size.
    init?(blob: UnsafeRawBufferPointer) {
        guard blob.count == Self.blobCount, blob[0] == Self.version else { return nil }
        unit = blob[1]
        hash = FeatureHash(
            low: blob.loadUnaligned(fromByteOffset: 2, as: UInt64.self).littleEndian,
            high: blob.loadUnaligned(fromByteOffset: 10, as: UInt64.self).littleEndian)
    }

    /// Calls `body` with the stored form: version, unit, then the hash's low and high words, little-endian.
    func withBlob<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try withUnsafeTemporaryAllocation(byteCount: Self.blobCount, alignment: 8) { buffer in
            buffer[0] = Self.version
            buffer[1] = unit
            buffer.storeBytes(of: hash.low.littleEndian, toByteOffset: 2, as: UInt64.self)
            buffer.storeBytes(of: hash.high.littleEndian, toByteOffset: 10, as: UInt64.self)
            return try body(UnsafeRawBufferPointer(buffer))
        }
    }
}

/// A 128-bit hash of a byte string: two 64-bit lanes, each folding 8 bytes at a time through a full
/// 64×64→128-bit multiplication with its own constants, then mixed with the length. Good against
/// accidents — two different features of real feeds colliding is far less likely than a disk error —
/// but not collision-resistant: someone crafting feed text on purpose could make two features collide
/// with a feasible amount of work (the lanes are not one-to-one), so a collision would let such a feed
/// keep a stale row unchanged. Feeds are trusted input here; a cryptographic hash would cost the
/// re-import's speed.
struct FeatureHash: Hashable, Sendable {
    var low: UInt64
    var high: UInt64

    init(low: UInt64, high: UInt64) {
        (self.low, self.high) = (low, high)
    }

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        var a: UInt64 = 0x243F_6A88_85A3_08D3
        var b: UInt64 = 0x1319_8A2E_0370_7344
        let raw = UnsafeRawBufferPointer(bytes)
        let count = raw.count
        var offset = 0
        while offset + 8 <= count {
            let word = raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian
            a = Self.fold(a ^ word, 0xA409_3822_299F_31D0)
            b = Self.fold(b ^ (word &* 0x9E37_79B9_7F4A_7C15) ^ 0x082E_FA98_EC4E_6C89, 0x4528_21E6_38D0_1377)
            offset += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while offset < count {
            tail |= UInt64(raw[offset]) << shift
            shift += 8
            offset += 1
        }
        a = Self.fold(a ^ tail ^ UInt64(count), 0xBE54_66CF_34E9_0C6C)
        b = Self.fold(b ^ (tail &* 0x9E37_79B9_7F4A_7C15) ^ UInt64(count) << 1, 0xC0AC_29B7_C97C_50DD)
        low = Self.fold(a ^ 0x3F84_D5B5_B547_0917, b | 1)
        high = Self.fold(b ^ 0x9216_D5D9_8979_FB1B, a | 1)
    }

    /// The two halves of the 128-bit product, combined.
    private static func fold(_ x: UInt64, _ y: UInt64) -> UInt64 {
        let product = x.multipliedFullWidth(by: y)
        return product.high ^ product.low
    }
}

/// A row of the store with a fingerprint: what a re-import needs of it without decoding the feature.
struct KnownFeature: Sendable {
    /// Where the import finds the row again, to check that it still has the fingerprint.
    var rowid: Int64
    var id: String
    var type: String?
    var network: String?
}

/// The store's fingerprinted rows by fingerprint, read before parsing a feed for a re-import.
///
/// An open-addressing table: a fingerprint's hash is already uniform, so its low bits choose the slot
/// (a `Dictionary` would hash each of the 200,000 fingerprints of a big feed again).
struct KnownFeatures: Sendable {
    private var fingerprints: [FeatureFingerprint] = []
    private var features: [KnownFeature] = []
    /// One more than an index into `fingerprints`, or 0 for a free slot; a power of two long.
    private var slots: [Int32] = []

    /// No known features.
    init() {}

    /// The features, each under its fingerprint (the first one kept if a fingerprint repeats).
    init(_ entries: [(fingerprint: FeatureFingerprint, feature: KnownFeature)]) {
        var capacity = 16
        while capacity < 2 * entries.count { capacity *= 2 }
        slots = Array(repeating: 0, count: capacity)
        fingerprints.reserveCapacity(entries.count)
        features.reserveCapacity(entries.count)
        for (fingerprint, feature) in entries {
            var slot = slotIndex(fingerprint)
            while slots[slot] != 0 {
                if fingerprints[Int(slots[slot]) - 1] == fingerprint { break }
                slot = (slot + 1) & (slots.count - 1)
            }
            guard slots[slot] == 0 else { continue }
            fingerprints.append(fingerprint)
            features.append(feature)
            slots[slot] = Int32(fingerprints.count)
        }
    }

    var count: Int { fingerprints.count }
    var isEmpty: Bool { fingerprints.isEmpty }

    subscript(fingerprint: FeatureFingerprint) -> KnownFeature? {
        guard !slots.isEmpty else { return nil }
        var slot = slotIndex(fingerprint)
        while slots[slot] != 0 {
            let index = Int(slots[slot]) - 1
            if fingerprints[index] == fingerprint { return features[index] }
            slot = (slot + 1) & (slots.count - 1)
        }
        return nil
    }

    private func slotIndex(_ fingerprint: FeatureFingerprint) -> Int {
        Int(truncatingIfNeeded: fingerprint.hash.low) & (slots.count - 1)
    }
}

/// A feature of a parsed feed that was not decoded, because a stored row has its fingerprint. The
/// import checks, in its transaction, that the row still has it; if not, it decodes the feature from
/// ``Feed``'s bytes.
struct PendingFeature: Sendable {
    /// Its position among the feed's earthquakes (the skipped features not counted).
    var position: Int
    /// Its index in the feed's `features`.
    var featureIndex: Int
    /// The byte range of the feature object in the feed's data.
    var range: Range<Int>
    var fingerprint: FeatureFingerprint
    var known: KnownFeature
}
