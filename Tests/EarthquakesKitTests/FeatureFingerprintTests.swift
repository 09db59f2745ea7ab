import BatonTesting
import Foundation
import GRDB
import Testing

@testable import EarthquakesKit

/// Issue 31, the parser: `FeatureFingerprint` decides that a row is unchanged without decoding its feature,
/// so a collision would silently skip an update. It was a home-made 128-bit hash that anyone could compute
/// (and, with work, make collide); it is now SipHash-2-4-128, a published keyed hash, with a random key per
/// database that a feed's author does not know.
@Suite("Feature fingerprints: a published hash, keyed per database", .offThePool)
struct FeatureFingerprintTests {
    /// SipHash-2-4-128's reference vectors (key 00…0f; message 00…(n−1)), from the reference
    /// implementation's `vectors.h`.
    static let vectors: [Int: [UInt8]] = [
        0: [0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6, 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93],
        1: [0xda, 0x87, 0xc1, 0xd8, 0x6b, 0x99, 0xaf, 0x44, 0x34, 0x76, 0x59, 0x11, 0x9b, 0x22, 0xfc, 0x45],
        7: [0xa1, 0xf1, 0xeb, 0xbe, 0xd8, 0xdb, 0xc1, 0x53, 0xc0, 0xb8, 0x4a, 0xa6, 0x1f, 0xf0, 0x82, 0x39],
        8: [0x3b, 0x62, 0xa9, 0xba, 0x62, 0x58, 0xf5, 0x61, 0x0f, 0x83, 0xe2, 0x64, 0xf3, 0x14, 0x97, 0xb4],
        15: [0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8, 0x11, 0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf, 0xc3, 0xd9],
        16: [0x6e, 0xe2, 0xa4, 0xca, 0x67, 0xb0, 0x54, 0xbb, 0xfd, 0x33, 0x15, 0xbf, 0x85, 0x23, 0x05, 0x77],
        63: [0x51, 0x50, 0xd1, 0x77, 0x2f, 0x50, 0x83, 0x4a, 0x50, 0x3e, 0x06, 0x9a, 0x97, 0x3f, 0xbd, 0x7c],
    ]

    @Test("the hash is SipHash-2-4-128: the reference vectors")
    func referenceVectors() {
        let key = FingerprintKey(k0: 0x0706_0504_0302_0100, k1: 0x0f0e_0d0c_0b0a_0908)
        for (length, expected) in Self.vectors {
            let message = (0..<length).map { UInt8($0) }
            let hash = message.withUnsafeBufferPointer { FeatureHash($0, key: key) }
            var bytes: [UInt8] = []
            withUnsafeBytes(of: hash.low.littleEndian) { bytes += $0 }
            withUnsafeBytes(of: hash.high.littleEndian) { bytes += $0 }
            #expect(bytes == expected, "\(length) bytes")
        }
    }

    static func feed(magnitude: Double, place: String) -> Data {
        Data(
            (#"{"type":"FeatureCollection","metadata":{"count":1},"features":[{"type":"Feature","properties":"#
                + #"{"mag":\#(magnitude),"place":"\#(place)","time":1700000000000,"updated":1700000000000},"#
                + #""geometry":{"type":"Point","coordinates":[1,2,3]},"id":"ev1"}]}"#).utf8)
    }

    static func fingerprint(of id: String, in path: String) throws -> Data? {
        try DatabaseQueue(path: path).read { db in
            try Data.fetchOne(db, sql: "SELECT fingerprint FROM earthquake WHERE id = ?", arguments: [id])
        }
    }

    @Test("the same feature has another fingerprint in every database, and not the one anyone can compute")
    func fingerprintsDependOnTheDatabase() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let data = Self.feed(magnitude: 4, place: "somewhere")
        var stored: [Data] = []
        for name in ["a.sqlite", "b.sqlite"] {
            let store = try EarthquakeStore(path: directory.path(name))
            try store.importFeed(try store.parseForImport(data, parser: FeedParser()))
            try store.close()
            stored.append(try #require(try Self.fingerprint(of: "ev1", in: directory.path(name))))
        }
        #expect(stored[0] != stored[1])
        // The unkeyed hash of the feature's bytes (what a feed's author can compute) is neither.
        let unkeyed = try #require(FeedParser().parse(data).fingerprints.first ?? nil)
        let blob = unkeyed.withBlob { Data($0) }
        #expect(!stored.contains(blob))
    }

    @Test("a fingerprint made without the store's key is never stored")
    func unkeyedFingerprintsAreNotStored() throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(try FeedParser().parse(Self.feed(magnitude: 4, place: "somewhere")))
        #expect(try store.count() == 1)
        #expect(try store.knownFeatures().count == 0)
    }

    /// What a collision found offline would do: the fingerprint that another feature's bytes get — computed
    /// where the attacker can compute it, here in a database of their own — planted on a stored row. Before,
    /// every database made the same fingerprint, so the re-import of those bytes matched the planted one,
    /// counted the row unchanged and skipped its update.
    @Test("a fingerprint computed elsewhere does not make a re-import skip an update")
    func aFingerprintFromElsewhereSkipsNothing() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let victim = directory.path("victim.sqlite")
        let attacker = directory.path("attacker.sqlite")
        let original = Self.feed(magnitude: 4, place: "somewhere")
        let update = Self.feed(magnitude: 7.5, place: "somewhere else")

        let store = try EarthquakeStore(path: victim)
        try store.importFeed(try store.parseForImport(original, parser: FeedParser()))
        try store.close()
        let own = try EarthquakeStore(path: attacker)
        try own.importFeed(try own.parseForImport(update, parser: FeedParser()))
        try own.close()
        let planted = try #require(try Self.fingerprint(of: "ev1", in: attacker))
        try DatabaseQueue(path: victim).write { db in
            try db.execute(sql: "UPDATE earthquake SET fingerprint = ? WHERE id = 'ev1'", arguments: [planted])
        }

        let reopened = try EarthquakeStore(path: victim)
        defer { try? reopened.close() }
        let summary = try reopened.importFeed(try reopened.parseForImport(update, parser: FeedParser()))
        #expect(summary == ImportSummary(updated: 1))
        #expect(try reopened.earthquake(id: "ev1")?.magnitude == 7.5)
        #expect(try reopened.earthquake(id: "ev1")?.place == "somewhere else")
    }
}
