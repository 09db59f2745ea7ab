/// Why ``FeedParser`` could not read a feed, worded so a person can act on it.
///
/// Match on ``code`` to react in code; show ``description`` to people. The structured
/// fields (``position``, ``featureIndex``, ``declaredCount``, ``actualCount``) are set when
/// they apply.
///
/// ```swift
/// do {
///     let feed = try FeedParser().parse(data)
/// } catch let error where error.code == .countMismatch {
///     // the download was cut short: fetch it again
/// }
/// ```
///
/// ### Thread safety
/// A value type and `Sendable`.
public struct FeedError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of failure. New kinds may be added; do not switch over it exhaustively.
    public let code: Code
    /// A one-paragraph explanation: what is wrong, where, and what to do.
    public let description: String
    /// Where in the input the JSON broke, for ``Code/malformedJSON``.
    public let position: Position?
    /// The zero-based index of the offending feature in `features`, when one is to blame.
    public let featureIndex: Int?
    /// `metadata.count` as the feed declares it, for ``Code/countMismatch``.
    public let declaredCount: Int?
    /// The number of features actually present, for ``Code/countMismatch``.
    public let actualCount: Int?
    /// For an error about one feature: what is wrong with it, as the rest of a sentence that starts
    /// with "the feature" (used when the feature is skipped rather than the feed rejected).
    let featureProblem: String?

    init(
        _ code: Code,
        _ description: String,
        position: Position? = nil,
        featureIndex: Int? = nil,
        declaredCount: Int? = nil,
        actualCount: Int? = nil,
        featureProblem: String? = nil
    ) {
        self.featureProblem = featureProblem
        self.code = code
        self.description = description
        self.position = position
        self.featureIndex = featureIndex
        self.declaredCount = declaredCount
        self.actualCount = actualCount
    }

    /// The kind of a ``FeedError``.
    ///
    /// A struct rather than an enum so that new kinds can be added without breaking callers.
    ///
    /// ### Thread safety
    /// A value type and `Sendable`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: String, Hashable, Sendable {
            case emptyInput, malformedJSON, detailDocument, notAFeatureCollection
            case countMismatch, invalidFeature, unexpectedValue, notGeoJSON, cancelled
        }

        private let kind: Kind
        private init(_ kind: Kind) { self.kind = kind }

        /// The input was empty or only whitespace.
        public static let emptyInput = Code(.emptyInput)
        /// The input is not valid JSON (also: cut off in the middle).
        public static let malformedJSON = Code(.malformedJSON)
        /// The input is one event's detail `Feature`, not a `FeatureCollection` feed.
        public static let detailDocument = Code(.detailDocument)
        /// Valid JSON, but not a GeoJSON `FeatureCollection`.
        public static let notAFeatureCollection = Code(.notAFeatureCollection)
        /// `metadata.count` differs from the number of features: the feed is truncated.
        public static let countMismatch = Code(.countMismatch)
        /// A feature has no `id` or no usable coordinates.
        public static let invalidFeature = Code(.invalidFeature)
        /// A value has the wrong JSON type, for example a magnitude given as a string.
        public static let unexpectedValue = Code(.unexpectedValue)
        /// The input is not JSON at all but, for example, an HTML page served in place of the feed.
        public static let notGeoJSON = Code(.notGeoJSON)
        /// The parse was cancelled (``ParseFeedJob`` turns it into a `CancellationError`).
        static let cancelled = Code(.cancelled)

        public var description: String { kind.rawValue }
    }

    /// A place in the input, for errors in the JSON text.
    ///
    /// ### Thread safety
    /// A value type and `Sendable`.
    public struct Position: Sendable, Equatable, Hashable, CustomStringConvertible {
        /// Zero-based byte offset into the JSON text (after any GeoJSONP wrapper was removed,
        /// ``byteOffset`` still counts from the start of the original input).
        public let byteOffset: Int
        /// One-based line number.
        public let line: Int
        /// One-based column, counted in bytes.
        public let column: Int
        /// Up to about 40 bytes of input around the position, with control characters shown
        /// as spaces, for example `"mag":3.6,"pl⟨here⟩`.
        public let excerpt: String

        public init(byteOffset: Int, line: Int, column: Int, excerpt: String) {
            self.byteOffset = byteOffset
            self.line = line
            self.column = column
            self.excerpt = excerpt
        }

        public var description: String {
            "line \(line), column \(column) (byte offset \(byteOffset)), near: \(excerpt)"
        }
    }
}

extension FeedError {
    static let emptyInput = FeedError(
        .emptyInput,
        "the input is empty; expected a USGS GeoJSON feed. Check that the download completed and that the right file was read."
    )

    static func malformedJSON(_ reason: String, at position: Position) -> FeedError {
        let hint =
            reason.hasPrefix("unexpected end")
            ? " The text stops early: the download was probably cut short; fetch the feed again."
            : " Check that the file is a USGS GeoJSON feed and was not edited or corrupted."
        return FeedError(
            .malformedJSON,
            "the feed is not valid JSON: \(reason) at \(position).\(hint)",
            position: position
        )
    }

    static func compressed(_ format: String) -> FeedError {
        FeedError(
            .malformedJSON,
            "the feed is \(format)-compressed (it starts with the \(format) signature), not JSON text: decompress it "
                + "first (\(format == "gzip" ? "gunzip FILE" : "unzip FILE")) and give the .geojson file inside."
        )
    }

    /// A parse stopped by its `isCancelled` (see ``ParseFeedJob``).
    static let cancelledParse = FeedError(.cancelled, "the parse was cancelled.")

    static func detailDocument(id: String?) -> FeedError {
        let which = id.map { " (event \"\($0)\")" } ?? ""
        return FeedError(
            .detailDocument,
            "this is a single event's detail document\(which), not a feed: it is a GeoJSON Feature, "
                + "while a feed is a FeatureCollection with a \"features\" array. Use a summary feed "
                + "such as https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/all_day.geojson."
        )
    }

    static func notAFeatureCollection(found: String) -> FeedError {
        FeedError(
            .notAFeatureCollection,
            "this JSON is not a GeoJSON FeatureCollection (\(found)); expected a USGS summary feed "
                + "with \"type\": \"FeatureCollection\" and a \"features\" array."
        )
    }

    static func countMismatch(declared: Int, actual: Int) -> FeedError {
        let contains =
            "the feed declares metadata.count = \(declared) but contains \(actual) feature\(actual == 1 ? "" : "s")"
        // Fewer features than declared is what a cut download leaves; more (or a count below zero) is a
        // feed changed by hand or by a program, not as the USGS publishes it.
        let reason =
            declared < 0
            ? "\(contains); a count below zero is not a count: the feed was not written by the USGS. Fix or remove metadata.count"
            : actual < declared
                ? "\(contains); it was probably truncated. Download it again"
                : "\(contains): more than it declares, so it was changed after the USGS wrote it. Fix or remove metadata.count, or download it again"
        return FeedError(
            .countMismatch, reason + "; nothing was imported from it.", declaredCount: declared, actualCount: actual)
    }

    static func invalidFeature(index: Int, of total: Int, id: String?, problem: String) -> FeedError {
        let which = id.map { " (id \"\($0)\")" } ?? ""
        return FeedError(
            .invalidFeature,
            "feature \(index) of \(total)\(which) \(problem); every feature needs a string \"id\" and "
                + "geometry.coordinates [longitude, latitude, depth]. The feed is damaged; nothing was read from it.",
            featureIndex: index,
            featureProblem: problem
        )
    }

    static func unexpectedValue(
        path: String, featureIndex: Int?, problem: String, pathInFeature: String? = nil
    ) -> FeedError {
        FeedError(
            .unexpectedValue,
            "unexpected value at \(path): \(problem). The feed does not follow the USGS GeoJSON format.",
            featureIndex: featureIndex,
            featureProblem: pathInFeature.map { "has an unexpected value at \($0): \(problem)" }
        )
    }

    static func notGeoJSON(startingWith start: String) -> FeedError {
        FeedError(
            .notGeoJSON,
            "this is an HTML page (it starts with \"\(start)\"), not a GeoJSON feed. The address probably "
                + "points to a web page, or a proxy or captive portal answered in place of the server; "
                + "check the feed address (USGS feeds end in .geojson) and your network."
        )
    }
}
