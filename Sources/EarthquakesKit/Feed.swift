import Baton
public import Foundation

/// A parsed USGS GeoJSON summary feed: its metadata and its earthquakes, newest first as
/// published.
///
/// Produced by ``FeedParser/parse(_:)``. When the parser had to repair the input (strip a
/// GeoJSONP wrapper, convert times given in seconds), it says so in ``warnings``.
///
/// ### Thread safety
/// `Feed` is a value type and `Sendable`.
public struct Feed: Sendable, Equatable {
    /// The feed's `metadata` object. Every field is optional.
    public var metadata: Metadata
    /// The events of the feed, in the feed's order (the USGS publishes newest first).
    ///
    /// A feed parsed for a re-import (see ``EarthquakeStore/importFeed(_:whileWaiting:commitGate:)-(Feed,_,_)``) may
    /// hold features that were not decoded because the store already has them; the first read of this
    /// property decodes them, and later reads (of this value or its copies) return the same array.
    public var earthquakes: [Earthquake] {
        get { pending.isEmpty ? decoded : materializedOnce.earthquakes { materialized() } }
        set {
            decoded = newValue
            fingerprints = []
            pending = []
            source = nil
            materializedOnce = MaterializedEarthquakes()
        }
    }
    /// What the parser repaired on the way. Empty for a well-formed USGS feed.
    public var warnings: [FeedWarning]

    /// The decoded earthquakes, in feed order, without the ``pending`` ones.
    private(set) var decoded: [Earthquake]
    /// The fingerprint of each of ``decoded`` (`nil` when unknown), or empty when none is known.
    private(set) var fingerprints: [FeatureFingerprint?] = []
    /// The key ``fingerprints`` and the pending features' hashes were made with: an import stores them only
    /// into the store of that key.
    private(set) var fingerprintKey = FingerprintKey.unkeyed
    /// The features not decoded because the store has their fingerprint, by ascending position.
    private(set) var pending: [PendingFeature] = []
    /// The feed's bytes, to decode ``pending`` features from, and the factor of its times to milliseconds.
    private(set) var source: (data: Data, units: FeedParser.TimeUnits)?
    /// ``earthquakes`` once decoded from ``source``: shared by the copies of this value, replaced whenever
    /// ``decoded``, ``pending`` or ``source`` change.
    private var materializedOnce = MaterializedEarthquakes()

    /// Creates a feed value.
    public init(metadata: Metadata, earthquakes: [Earthquake], warnings: [FeedWarning] = []) {
        self.metadata = metadata
        self.decoded = earthquakes
        self.warnings = warnings
    }

    /// A feed from a re-import parse: decoded earthquakes with their fingerprints, and the features left pending.
    init(
        metadata: Metadata, decoded: [Earthquake], fingerprints: [FeatureFingerprint?], pending: [PendingFeature],
        source: (data: Data, units: FeedParser.TimeUnits)?, warnings: [FeedWarning], fingerprintKey: FingerprintKey
    ) {
        self.fingerprintKey = fingerprintKey
        self.metadata = metadata
        self.decoded = decoded
        self.fingerprints = fingerprints
        self.pending = pending
        self.source = source
        self.warnings = warnings
    }

    public static func == (lhs: Feed, rhs: Feed) -> Bool {
        lhs.metadata == rhs.metadata && lhs.warnings == rhs.warnings && lhs.earthquakes == rhs.earthquakes
    }

    /// The number of earthquakes (decoded or not): the length of ``earthquakes``.
    var count: Int { decoded.count + pending.count }

    /// How many of the feed's earthquakes were not decoded, because the store already holds them (tests
    /// read it to see that a re-import skips the unchanged features).
    package var undecodedCount: Int { pending.count }

    /// Whether any earthquake of the feed is of this network, without decoding the pending ones (the
    /// store has their network).
    package func containsEarthquake(ofNetwork network: String) -> Bool {
        decoded.contains { $0.network == network } || pending.contains { $0.known.network == network }
    }

    /// The same feed, reading its pending features from other bytes (tests: a file rewritten meanwhile).
    func readingPending(from data: Data) -> Feed {
        var copy = self
        copy.source = source.map { (data, $0.units) }
        copy.materializedOnce = MaterializedEarthquakes()
        return copy
    }

    /// Decodes a pending feature from the feed's bytes.
    ///
    /// - Throws: ``FeedChangedError`` when the bytes are no longer those that were fingerprinted (the
    ///   store had this fingerprint, so the same bytes were decoded before by this version of the parser:
    ///   only a feed file rewritten while it was being read gets here).
    func decode(_ feature: PendingFeature) throws(FeedChangedError) -> Earthquake {
        guard let source,
            let quake = FeedParser.decodePending(feature, in: source.data, units: source.units, key: fingerprintKey)
        else {
            throw FeedChangedError(featureIndex: feature.featureIndex, id: feature.known.id)
        }
        return quake
    }

    /// Every earthquake in feed order, the pending ones decoded.
    private func materialized() -> [Earthquake] {
        var all: [Earthquake] = []
        all.reserveCapacity(count)
        forEachEntry { entry in
            switch entry {
            case .decoded(let index): all.append(decoded[index])
            case .pending(let index):
                do {
                    all.append(try decode(pending[index]))
                } catch {
                    // A public property cannot throw; the import, which reads these bytes first, throws.
                    preconditionFailure("\(error)")
                }
            }
        }
        return all
    }

    /// An earthquake of the feed: the index of a decoded one, or of a pending one.
    enum Entry {
        case decoded(Int)
        case pending(Int)
    }

    /// Calls `body` for every earthquake, in feed order.
    func forEachEntry(_ body: (Entry) throws -> Void) rethrows {
        var nextDecoded = 0
        var nextPending = 0
        for position in 0..<count {
            if nextPending < pending.count, pending[nextPending].position == position {
                try body(.pending(nextPending))
                nextPending += 1
            } else {
                try body(.decoded(nextDecoded))
                nextDecoded += 1
            }
        }
    }

    /// Whether the input was a GeoJSONP response (`eqfeed_callback({...});`) rather than
    /// plain GeoJSON.
    public var wasGeoJSONP: Bool {
        warnings.contains { if case .strippedGeoJSONPWrapper = $0 { true } else { false } }
    }

    /// The features the parser skipped because they could not be read (a null depth, no geometry…), in
    /// feed order; always empty from a strict parser, which rejects the feed instead.
    public var skippedFeatures: [SkippedFeature] {
        warnings.compactMap {
            if case .skippedFeature(let index, let id, let problem) = $0 {
                SkippedFeature(index: index, id: id, problem: problem)
            } else {
                nil
            }
        }
    }

    /// A feature that ``FeedParser`` skipped.
    ///
    /// ### Thread safety
    /// A value type and `Sendable`.
    public struct SkippedFeature: Sendable, Equatable, Hashable {
        /// Its zero-based index in the feed's `features`.
        public var index: Int
        /// Its id, when it has one.
        public var id: String?
        /// What is wrong with it, for example `has a null depth (geometry.coordinates[2])`.
        public var problem: String
    }

    /// Whether event times were given in seconds and converted (see
    /// ``FeedWarning/convertedSecondsToMilliseconds(count:)``).
    public var hadTimesInSeconds: Bool {
        warnings.contains { if case .convertedSecondsToMilliseconds = $0 { true } else { false } }
    }

    /// The `metadata` object of a feed.
    ///
    /// ### Thread safety
    /// A value type and `Sendable`.
    public struct Metadata: Sendable, Equatable, Hashable, Codable {
        /// When the USGS generated the feed.
        public var generated: Date?
        /// The feed's title, for example `"USGS Magnitude 2.5+ Earthquakes, Past Month"`.
        public var title: String?
        /// The feed's address.
        public var url: String?
        /// The version of the USGS feed software, for example `"1.14.1"`.
        public var api: String?
        /// The number of features the feed declares. ``FeedParser`` checks it against the
        /// features present.
        public var count: Int?
        /// The HTTP status the USGS recorded, normally 200.
        public var status: Int?

        /// Creates feed metadata.
        public init(
            generated: Date? = nil,
            title: String? = nil,
            url: String? = nil,
            api: String? = nil,
            count: Int? = nil,
            status: Int? = nil
        ) {
            self.generated = generated
            self.title = title
            self.url = url
            self.api = api
            self.count = count
            self.status = status
        }
    }
}

/// Something ``FeedParser`` repaired while parsing, so callers can log it or show it.
///
/// ### Thread safety
/// A value type and `Sendable`.
public enum FeedWarning: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// The input was GeoJSONP: a JavaScript call `callback({...});` around the JSON. The
    /// wrapper was removed and the JSON inside parsed.
    case strippedGeoJSONPWrapper(callback: String)
    /// Every event time was small enough to be seconds rather than milliseconds since 1970,
    /// so `count` times (and `updated` times) were multiplied by 1000. See ``FeedParser`` for
    /// the rule.
    case convertedSecondsToMilliseconds(count: Int)
    /// One feature could not be read (no id, no geometry, a null depth, a value of the wrong type…) and
    /// was left out; the other features were read. A strict ``FeedParser`` rejects the feed instead.
    case skippedFeature(index: Int, id: String?, problem: String)
    /// The document has no `"type"` (the USGS always writes `"FeatureCollection"`); its `features` were
    /// read as those of a FeatureCollection.
    case missingDocumentType

    public var description: String {
        switch self {
        case .missingDocumentType:
            "the feed has no \"type\" (a USGS feed says \"type\": \"FeatureCollection\"); read its features anyway"
        case .strippedGeoJSONPWrapper(let callback):
            "the input was GeoJSONP; removed the JavaScript wrapper \(callback)(…); and parsed the JSON inside"
        case .convertedSecondsToMilliseconds(let count):
            "event times look like seconds, not the milliseconds the USGS format uses; "
                + "converted \(count) time\(count == 1 ? "" : "s") to milliseconds (check the feed's producer)"
        case .skippedFeature(let index, let id, let problem):
            "skipped feature \(index)\(id.map { " (id \"\($0)\")" } ?? "") of the feed: it \(problem)"
        }
    }
}

/// A feature of a feed read for a re-import is no longer the bytes that were read: the feed's file was
/// rewritten while it was being imported.
struct FeedChangedError: Error, CustomStringConvertible {
    var featureIndex: Int
    var id: String

    var description: String {
        "feature \(featureIndex) (id \"\(id)\") of the feed changed while it was being imported (was the feed's file "
            + "rewritten meanwhile?); nothing was imported from it: run the refresh again"
    }
}

/// The earthquakes of a ``Feed`` with pending features, decoded by the first read of ``Feed/earthquakes``.
private final class MaterializedEarthquakes: @unchecked Sendable {
    // @unchecked Sendable: `value` is read and written only under `lock`.
    private let lock = Lock()
    private var value: [Earthquake]?

    /// The stored earthquakes, or those `make` returns (called outside the lock; when two threads race,
    /// the first to finish is kept).
    func earthquakes(_ make: () -> [Earthquake]) -> [Earthquake] {
        if let value = lock.withLock({ value }) { return value }
        let made = make()
        return lock.withLock {
            if value == nil { value = made }
            return value ?? made
        }
    }
}
