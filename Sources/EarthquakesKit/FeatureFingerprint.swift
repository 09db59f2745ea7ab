import Foundation

/// What identifies a feature's text exactly enough to skip decoding it again: a keyed 128-bit hash
/// (``FeatureHash``, SipHash-2-4-128 with the database's secret ``FingerprintKey``) of the bytes of the
/// feature object (from its `{` to its `}`), with the time unit the feed was read in (times in seconds are
/// converted, so the same bytes give other rows in a feed read in seconds).
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
    /// (2: types trimmed, blank types nil; `time` and `updated` units decided apart. 3: the hash is
    /// SipHash-2-4-128 with the database's key.)
    static let version: UInt8 = 3
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

/// The secret key of a database's fingerprints: 128 random bits, made when the database was created (or
/// upgraded to fingerprints of version 3) and kept in it (table `earthquake_fingerprint_key`).
///
/// Keyed, the hash of a feature's bytes is a pseudo-random function to anyone who does not hold the key: a
/// feed's author, who does not, cannot craft a feature whose fingerprint equals that of another stored row
/// (which would make a re-import count the row unchanged and skip its update). An accidental collision of
/// two of a database's features has a probability of about *n*²/2¹²⁹: for a million rows, about 10⁻²⁶.
struct FingerprintKey: Hashable, Sendable {
    var k0: UInt64
    var k1: UInt64

    /// The key of fingerprints made without a store (``FeedParser/parse(_:)``): never stored (see
    /// ``EarthquakeStore/importFeed(_:whileWaiting:commitGate:)-(Feed,_,_)``).
    static let unkeyed = FingerprintKey(k0: 0, k1: 0)

    /// A new random key.
    static func random() -> FingerprintKey {
        var generator = SystemRandomNumberGenerator()
        return FingerprintKey(k0: generator.next(), k1: generator.next())
    }

    /// The key from its stored 16 bytes (little-endian `k0` then `k1`); `nil` for another size.
    init?(blob: UnsafeRawBufferPointer) {
        guard blob.count == 16 else { return nil }
        k0 = blob.loadUnaligned(fromByteOffset: 0, as: UInt64.self).littleEndian
        k1 = blob.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndian
    }

    init(k0: UInt64, k1: UInt64) {
        (self.k0, self.k1) = (k0, k1)
    }
}

/// SipHash-2-4 with a 128-bit output (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012, and
/// the 128-bit variant of its reference implementation), keyed with the database's ``FingerprintKey``: a
/// published hash that nobody without the key can make collide (it replaced a home-made 128-bit hash that
/// was not collision-resistant).
///
/// - Complexity: O(*n*); about one cycle per byte in optimised builds.
struct FeatureHash: Hashable, Sendable {
    var low: UInt64
    var high: UInt64

    init(low: UInt64, high: UInt64) {
        (self.low, self.high) = (low, high)
    }

    init(_ bytes: UnsafeBufferPointer<UInt8>, key: FingerprintKey) {
        var v0: UInt64 = 0x736f_6d65_7073_6575 ^ key.k0
        var v1: UInt64 = 0x646f_7261_6e64_6f6d ^ key.k1 ^ 0xee
        var v2: UInt64 = 0x6c79_6765_6e65_7261 ^ key.k0
        var v3: UInt64 = 0x7465_6462_7974_6573 ^ key.k1

        @inline(__always) func round() {
            v0 &+= v1
            v1 = v1.rotatedLeft(13) ^ v0
            v0 = v0.rotatedLeft(32)
            v2 &+= v3
            v3 = v3.rotatedLeft(16) ^ v2
            v0 &+= v3
            v3 = v3.rotatedLeft(21) ^ v0
            v2 &+= v1
            v1 = v1.rotatedLeft(17) ^ v2
            v2 = v2.rotatedLeft(32)
        }

        let raw = UnsafeRawBufferPointer(bytes)
        let count = raw.count
        var offset = 0
        while offset + 8 <= count {
            let word = raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian
            v3 ^= word
            round()
            round()
            v0 ^= word
            offset += 8
        }
        var last = UInt64(truncatingIfNeeded: count) << 56
        var shift: UInt64 = 0
        while offset < count {
            last |= UInt64(raw[offset]) << shift
            shift += 8
            offset += 1
        }
        v3 ^= last
        round()
        round()
        v0 ^= last
        v2 ^= 0xee
        round()
        round()
        round()
        round()
        low = v0 ^ v1 ^ v2 ^ v3
        v1 ^= 0xdd
        round()
        round()
        round()
        round()
        high = v0 ^ v1 ^ v2 ^ v3
    }
}

extension UInt64 {
    @inline(__always) fileprivate func rotatedLeft(_ count: UInt64) -> UInt64 {
        (self << count) | (self >> (64 - count))
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
    /// The key the store's fingerprints were made with, and new ones are to be made with.
    var key: FingerprintKey
    private var fingerprints: [FeatureFingerprint] = []
    private var features: [KnownFeature] = []
    /// One more than an index into `fingerprints`, or 0 for a free slot; a power of two long.
    private var slots: [Int32] = []

    /// No known features; fingerprints made with `key` (``FingerprintKey/unkeyed`` by default: never stored).
    init(key: FingerprintKey = .unkeyed) {
        self.key = key
    }

    /// The features, each under its fingerprint (the first one kept if a fingerprint repeats), made with `key`.
    init(_ entries: [(fingerprint: FeatureFingerprint, feature: KnownFeature)], key: FingerprintKey) {
        self.key = key
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
