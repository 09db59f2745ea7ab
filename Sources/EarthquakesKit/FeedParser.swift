public import Foundation

/// Reads a USGS GeoJSON summary feed into a ``Feed``.
///
/// ```swift
/// let feed = try FeedParser().parse(data)
/// print(feed.metadata.title ?? "feed", feed.earthquakes.count)
/// ```
///
/// The parser is pure and synchronous: no I/O, no shared state. It accepts what the USGS
/// has published over the years (api 1.0.9 to 1.14) and rejects, with a ``FeedError`` that
/// says what to do, what it cannot read faithfully.
///
/// ### Accepted and repaired
/// - **GeoJSONP** (`eqfeed_callback({...});`): the wrapper is removed and the JSON inside
///   parsed; ``Feed/warnings`` records ``FeedWarning/strippedGeoJSONPWrapper(callback:)``.
/// - **Times in seconds** instead of milliseconds (third-party rewrites): converted, and
///   recorded as ``FeedWarning/convertedSecondsToMilliseconds(count:)``. The times are
///   taken as seconds only when that is the one sensible reading of the `time` values
///   (`detectTimeUnit(times:updated:generatedMilliseconds:)`): every event time is below 10¹¹ in
///   magnitude (10¹¹ ms is 1973-03-03; 10¹¹ s is the year 5138), none read as seconds falls before
///   1500, and `metadata.generated` does not show that the seconds reading would put events more than
///   a day after the feed was generated (then the feed is an archive of 1966–1973 events in
///   milliseconds), nor one feature's time more than a day after its own `updated` of 10¹¹ or more
///   (no event comes after its revision). `updated` only breaks a tie, when a time is negative or every time is before 2001
///   read as seconds: an `updated` of 10¹¹ or more, a negative one, or one after `generated` read as
///   seconds, then says milliseconds. `updated` values are read in the times' unit, except that a
///   value of 10¹¹ or more is never scaled (times in seconds, revisions in milliseconds).
/// - Uppercase `status` (`"REVIEWED"`) is lower-cased; `tsunami` as 0/1, a boolean or null;
///   an `id` given as a number.
/// - Trailing commas, which Foundation's `JSONDecoder` tolerates. (When decoding fails, the
///   error position comes from a strict RFC 8259 check of the text.)
///
/// ### Rejected
/// - empty input, text that is not JSON (``FeedError/Code/malformedJSON``, with line,
///   column, byte offset and an excerpt);
/// - a single event's detail document (``FeedError/Code/detailDocument``);
/// - JSON that is not a FeatureCollection (``FeedError/Code/notAFeatureCollection``);
/// - `metadata.count` different from the number of features, when `count` is present
///   (``FeedError/Code/countMismatch``: the feed was truncated, or changed after the USGS wrote it);
/// - text that starts like HTML (a web page, a proxy's login or error page served with status 200):
///   ``FeedError/Code/notGeoJSON``.
///
/// ### One bad feature
/// A feature without an `id`, without `geometry.coordinates` of three numbers (a `null` depth is
/// the usual case) with a latitude in -90...90 and a longitude in -180...180, or with a value of the
/// wrong JSON type (a magnitude written as a string) is **skipped**: the other features are read, and
/// ``Feed/warnings`` names each skipped one (``FeedWarning/skippedFeature(index:id:problem:)``). Such
/// an event stays in the USGS feeds for up to 30 days; rejecting the whole feed would block every
/// refresh for that long. A parser made with `strict: true` rejects the whole feed instead, with
/// ``FeedError/Code/invalidFeature`` or ``FeedError/Code/unexpectedValue`` naming the feature.
///
/// ### Also rejected
/// - a document-level value of the wrong JSON type, for example `metadata.count` written as a string
///   (``FeedError/Code/unexpectedValue``, naming the path).
///
/// - Complexity: O(*n*) in the size of the input.
///
/// ### Thread safety
/// `FeedParser` is a `Sendable` value with no mutable state; one instance can be used from
/// any number of threads at once.
public struct FeedParser: Sendable {
    /// Whether one unreadable feature rejects the whole feed (`true`) or is skipped with a warning
    /// (`false`, the default).
    public var strict: Bool
    /// Whether well-formed feeds are read by ``FeedScanner`` (always, except in tests that compare it
    /// with `JSONDecoder`).
    var usesScanner = true

    /// Creates a parser.
    ///
    /// - Parameter strict: `true` to reject a feed with any unreadable feature, as earlier versions did.
    public init(strict: Bool = false) {
        self.strict = strict
    }

    /// Parses a USGS GeoJSON (or GeoJSONP) summary feed.
    ///
    /// - Parameter data: the bytes of the feed, UTF-8.
    /// - Returns: the feed's metadata, its earthquakes in feed order, and any repairs made.
    /// - Throws: ``FeedError`` when the input cannot be read faithfully.
    public func parse(_ data: Data) throws(FeedError) -> Feed {
        try parse(data, known: KnownFeatures())
    }

    /// ``parse(_:)`` that `isCancelled` stops within a few hundred features once it says yes: it then
    /// throws `CancellationError` (for a parse that a Ctrl-C must stop, off the task that was cancelled).
    package func parse(_ data: Data, isCancelled: (@Sendable () -> Bool)?) throws -> Feed {
        try parseStoppable(data, known: KnownFeatures(), isCancelled: isCancelled)
    }

    /// `parse(_:known:isCancelled:)`, its cancelled parse thrown as `CancellationError`.
    func parseStoppable(_ data: Data, known: KnownFeatures, isCancelled: (@Sendable () -> Bool)?) throws -> Feed {
        do {
            return try parse(data, known: known, isCancelled: isCancelled)
        } catch let error where error.code == .cancelled {
            throw CancellationError()
        }
    }

    /// Parses a feed for a re-import into a store that holds the `known` features: a feature whose
    /// fingerprint is known is not decoded (the result's ``Feed/undecodedCount``); the import checks that
    /// the store still holds it, and decodes it if not. The result is otherwise that of ``parse(_:)``:
    /// the same errors, warnings and earthquakes (``Feed/earthquakes`` decodes the pending ones).
    ///
    /// Only a well-formed feed that ``FeedScanner`` reads completely takes this path; any other is
    /// parsed in full.
    ///
    /// `isCancelled` is asked every few hundred features (a big feed takes seconds): once it says yes, the
    /// parse stops with a ``FeedError`` of code `cancelled`.
    func parse(
        _ data: Data, known: KnownFeatures, isCancelled: (@Sendable () -> Bool)? = nil
    ) throws(FeedError) -> Feed {
        var warnings: [FeedWarning] = []
        let jsonRange = try locateJSON(in: data, warnings: &warnings)
        if !known.isEmpty, usesScanner,
            let skipping = try parseSkippingKnown(
                data, jsonRange: jsonRange, known: known, warnings: &warnings, isCancelled: isCancelled)
        {
            return try feed(metadata: skipping.metadata, parsed: skipping.parsed, warnings: warnings, key: known.key)
        }
        let document = try decode(data, jsonRange: jsonRange, key: known.key, isCancelled: isCancelled)
        if isCancelled?() == true { throw FeedError.cancelledParse }
        let parsed = try earthquakes(from: document, warnings: &warnings)
        return try feed(metadata: document.metadata, parsed: parsed, warnings: warnings, key: known.key)
    }

    /// The earthquakes of a feed as the parser made them, before they become a ``Feed``.
    struct Parsed {
        var quakes: [Earthquake] = []
        var fingerprints: [FeatureFingerprint?] = []
        var pending: [PendingFeature] = []
        var source: (data: Data, units: TimeUnits)?
    }

    private func feed(
        metadata: WireMetadata?, parsed: Parsed, warnings: [FeedWarning], key: FingerprintKey
    ) throws(FeedError) -> Feed {
        let generated = try Self.date(
            milliseconds: Self.generatedMilliseconds(metadata?.generated), path: "metadata.generated", featureIndex: nil
        )
        return Feed(
            metadata: Feed.Metadata(
                generated: generated,
                title: metadata?.title,
                url: metadata?.url,
                api: metadata?.api,
                count: metadata?.count,
                status: metadata?.status
            ),
            decoded: parsed.quakes,
            fingerprints: parsed.fingerprints,
            pending: parsed.pending,
            source: parsed.source,
            warnings: warnings,
            fingerprintKey: key
        )
    }

    /// The re-import path of ``parse(_:known:)``: locates every feature (``FeedScanner/scanLight(_:splittingAt:)``),
    /// decides the time unit from their times, and decodes only the features whose fingerprint is not
    /// known. `nil` when the feed must be parsed in full instead: whenever the full scan would not have
    /// read it, or when it is not a feature collection of the declared count (whose errors the full parse
    /// words).
    private func parseSkippingKnown(
        _ data: Data, jsonRange: Range<Int>, known: KnownFeatures, warnings: inout [FeedWarning],
        isCancelled: (@Sendable () -> Bool)?
    ) throws(FeedError) -> (metadata: WireMetadata?, parsed: Parsed)? {
        struct Located {
            var metadata: WireMetadata?
            var parsed: Parsed
            var problems: [(index: Int, id: String?, problem: String)]
            var secondsConverted: Int?
        }
        let strict = strict
        let result: Result<Located?, FeedError> = data.withUnsafeBytes { raw in
            let all = raw.bindMemory(to: UInt8.self)
            guard
                let light = FeedScanner.scanLight(
                    UnsafeBufferPointer(rebasing: all[jsonRange]), key: known.key, isCancelled: isCancelled),
                let located = light.features
            else { return isCancelled?() == true ? .failure(.cancelledParse) : .success(nil) }
            let document = light.document
            if let declared = document.metadata?.count, declared != located.count { return .success(nil) }
            // Anything but a typed FeatureCollection: the full parse words the error or the warning.
            if document.type != "FeatureCollection" { return .success(nil) }
            let times = located.compactMap(\.time)
            let updatedTimes = located.compactMap(\.updated)
            let afterRevision = located.contains {
                Self.timeAfterRevisionAsSeconds(time: $0.time, updated: $0.updated)
            }
            let units = Self.detectTimeUnits(
                times: times, updated: updatedTimes,
                generatedMilliseconds: Self.generatedMilliseconds(document.metadata?.generated),
                afterRevision: afterRevision)
            var parsed = Parsed()
            parsed.source = (data, units)
            var problems: [(index: Int, id: String?, problem: String)] = []
            // Strict: the first unreadable feature's error, returned only once every feature was located
            // and scanned — a later one that the scanner cannot read sends the feed to the full parse,
            // whose error (for the whole document) is then the one to give, as a first import would.
            var strictFailure: FeedError?
            for (index, feature) in located.enumerated() {
                if index & 255 == 255, let isCancelled, isCancelled() { return .failure(.cancelledParse) }
                let offset = jsonRange.lowerBound
                let range = (feature.range.lowerBound + offset)..<(feature.range.upperBound + offset)
                let fingerprint = FeatureFingerprint(hash: feature.hash, units: units)
                if let stored = known[fingerprint] {
                    parsed.pending.append(
                        PendingFeature(
                            position: parsed.quakes.count + parsed.pending.count, featureIndex: index, range: range,
                            fingerprint: fingerprint, known: stored))
                    continue
                }
                guard let wire = FeedScanner.feature(in: all, range: range, key: known.key) else {
                    return .success(nil)
                }
                do throws(FeedError) {
                    parsed.quakes.append(
                        try Self.earthquake(wire, index: index, of: located.count, units: units))
                    parsed.fingerprints.append(fingerprint)
                } catch {
                    if strict {
                        if strictFailure == nil { strictFailure = error }
                        continue
                    }
                    problems.append((index, wire.id, error.featureProblem ?? error.description))
                }
            }
            if let strictFailure { return .failure(strictFailure) }
            return .success(
                Located(
                    metadata: document.metadata, parsed: parsed, problems: problems,
                    secondsConverted: Self.convertedCount(times: times, updated: updatedTimes, units: units)))
        }
        guard let located = try result.get() else { return nil }
        if let count = located.secondsConverted, count > 0 {
            warnings.append(.convertedSecondsToMilliseconds(count: count))
        }
        for problem in located.problems {
            warnings.append(.skippedFeature(index: problem.index, id: problem.id, problem: problem.problem))
        }
        return (located.metadata, located.parsed)
    }

    /// Decodes a feature that ``parse(_:known:)`` left pending; `nil` if it cannot be read.
    static func decodePending(
        _ feature: PendingFeature, in data: Data, units: TimeUnits, key: FingerprintKey
    ) -> Earthquake? {
        data.withUnsafeBytes { raw -> Earthquake? in
            let bytes = raw.bindMemory(to: UInt8.self)
            // The bytes are read again (a mapped file): they must still be those that were fingerprinted.
            guard feature.range.lowerBound >= 0, feature.range.upperBound <= bytes.count,
                FeatureHash(UnsafeBufferPointer(rebasing: bytes[feature.range]), key: key) == feature.fingerprint.hash,
                let wire = FeedScanner.feature(in: bytes, range: feature.range, key: key)
            else {
                return nil
            }
            return try? earthquake(wire, index: feature.featureIndex, of: feature.featureIndex + 1, units: units)
        }
    }

    /// Finds the JSON text: the whole input, or the inside of a GeoJSONP wrapper. Offsets are
    /// relative to `data.startIndex`.
    private func locateJSON(in data: Data, warnings: inout [FeedWarning]) throws(FeedError) -> Range<Int> {
        let result: (range: Range<Int>, callback: String?)? = data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard bytes.contains(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) else { return nil }
            if let unwrapped = GeoJSONP.unwrap(bytes) { return (unwrapped.json, unwrapped.callback) }
            return (0..<bytes.count, nil)
        }
        guard let result else { throw FeedError.emptyInput }
        let unclosed: (callback: String, end: FeedError.Position)? = data.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            guard result.callback == nil, let callback = GeoJSONP.unclosedCallback(bytes) else { return nil }
            return (callback, FeedError.Position(offset: bytes.count, in: bytes))
        }
        if let unclosed {
            throw FeedError.malformedJSON(
                "unexpected end: the GeoJSONP wrapper \(unclosed.callback)( is not closed", at: unclosed.end)
        }
        if let archive = Self.archiveKind(of: data) { throw FeedError.compressed(archive) }
        if result.callback == nil, let page = Self.htmlStart(of: data) {
            throw FeedError.notGeoJSON(startingWith: page)
        }
        if let callback = result.callback { warnings.append(.strippedGeoJSONPWrapper(callback: callback)) }
        return result.range
    }

    private func decode(
        _ data: Data, jsonRange: Range<Int>, key: FingerprintKey, isCancelled: (@Sendable () -> Bool)?
    ) throws(FeedError) -> WireDocument {
        // The fast path reads well-formed feeds; anything else is decoded below, for its precise errors.
        let scanned =
            !usesScanner
            ? nil
            : data.withUnsafeBytes { raw in
                FeedScanner.scan(
                    UnsafeBufferPointer(rebasing: raw.bindMemory(to: UInt8.self)[jsonRange]), key: key,
                    isCancelled: isCancelled)
            }
        if let scanned { return scanned }
        // A cancelled scan gave up: stop rather than read it all again the slow way.
        if isCancelled?() == true { throw FeedError.cancelledParse }
        let start = data.startIndex
        let json =
            jsonRange == 0..<data.count
            ? data : data.subdata(in: (start + jsonRange.lowerBound)..<(start + jsonRange.upperBound))
        do {
            return try JSONDecoder().decode(WireDocument.self, from: json)
        } catch let error as DecodingError {
            throw Self.feedError(for: error, in: data, jsonRange: jsonRange)
        } catch {
            throw FeedError(.malformedJSON, "the feed could not be read as JSON: \(error).")
        }
    }

    /// Validates the decoded document and builds the model values.
    private func earthquakes(
        from document: WireDocument, warnings: inout [FeedWarning]
    ) throws(FeedError)
        -> Parsed
    {
        if document.type == "Feature" { throw FeedError.detailDocument(id: document.id) }
        if let type = document.type, type != "FeatureCollection" {
            let found =
                document.features == nil
                ? "its type is \"\(type)\" and it has no \"features\" array" : "its type is \"\(type)\""
            throw FeedError.notAFeatureCollection(found: found)
        }
        guard let features = document.features else {
            let found =
                document.type.map { "its type is \"\($0)\" and it has no \"features\" array" }
                ?? "it has no \"features\" array"
            throw FeedError.notAFeatureCollection(found: found)
        }
        if let declared = document.metadata?.count, declared != features.count {
            throw FeedError.countMismatch(declared: declared, actual: features.count)
        }
        if document.type == nil { warnings.append(.missingDocumentType) }

        // Two passes over the features, rather than a copy of the readable ones.
        var problems: [(index: Int, id: String?, problem: String)] = []
        var times: [Double] = []
        times.reserveCapacity(features.count)
        var updatedTimes: [Double] = []
        var afterRevision = false
        var readable = 0
        var hashed = false
        // By index rather than `enumerated()`, which copies every entry (retaining each of its strings).
        for index in features.indices {
            switch features[index] {
            case .feature(let feature):
                if let time = feature.properties?.time { times.append(time) }
                if let updated = feature.properties?.updated { updatedTimes.append(updated) }
                afterRevision =
                    afterRevision
                    || Self.timeAfterRevisionAsSeconds(
                        time: feature.properties?.time, updated: feature.properties?.updated)
                if readable == 0 { hashed = feature.hash != nil }  // the scanner hashed every feature
                readable += 1
            case .unreadable(let error, let id):
                if strict { throw Self.feedError(for: error, in: Data(), jsonRange: 0..<0) }
                problems.append((index, id, Self.featureProblem(error)))
            }
        }

        let units = Self.detectTimeUnits(
            times: times, updated: updatedTimes,
            generatedMilliseconds: Self.generatedMilliseconds(document.metadata?.generated),
            afterRevision: afterRevision)
        let secondsConverted = Self.convertedCount(times: times, updated: updatedTimes, units: units)
        if secondsConverted > 0 { warnings.append(.convertedSecondsToMilliseconds(count: secondsConverted)) }
        var parsed = Parsed()
        let converted = Self.convert(features, units: units, hashed: hashed, strict: strict)
        if let error = converted.error { throw error }
        parsed.quakes = converted.quakes
        parsed.fingerprints = converted.fingerprints
        problems += converted.problems
        problems.sort { $0.index < $1.index }
        for problem in problems {
            warnings.append(.skippedFeature(index: problem.index, id: problem.id, problem: problem.problem))
        }
        return parsed
    }

    /// The model values of the readable `features`, in order, with their fingerprints when `hashed`, and the
    /// features that are not valid (or, when `strict`, the error of the first one).
    ///
    /// A big feed is converted in two halves at once, on two threads, straight into the one result array
    /// (the second half from the slot after the first half's features, moved down over the slots of the
    /// first half's invalid features afterwards); the result is that of one pass.
    private static func convert(
        _ features: [WireEntry], units: TimeUnits, hashed: Bool, strict: Bool
    ) -> Converted {
        features.withUnsafeBufferPointer { entries in
            let parallel =
                entries.count >= parallelConversionMinimum && ProcessInfo.processInfo.activeProcessorCount > 1
            let middle = parallel ? entries.count / 2 : entries.count
            var inFirstHalf = 0
            var readable = 0
            for index in entries.indices {
                guard case .feature = entries[index] else { continue }
                readable += 1
                if index < middle { inFirstHalf += 1 }
            }
            var result = Converted()
            result.quakes = Array(unsafeUninitializedCapacity: readable) { output, initialized in
                let parts = ConversionParts(
                    entries: entries, output: output, units: units, hashed: hashed, strict: strict)
                guard parallel else {
                    let whole = parts.convert(0..<entries.count, from: 0)
                    initialized = whole.count
                    (result.fingerprints, result.problems, result.error) = (
                        whole.fingerprints, whole.problems, whole.error
                    )
                    return
                }
                let count = entries.count
                let secondSlot = inFirstHalf
                DispatchQueue.concurrentPerform(iterations: 2) { part in
                    if part == 0 {
                        parts.first = parts.convert(0..<middle, from: 0)
                    } else {
                        parts.second = parts.convert(middle..<count, from: secondSlot)
                    }
                }
                guard var first = parts.first, let second = parts.second else {
                    preconditionFailure("both halves of the conversion ran")
                }
                parts.first = nil
                parts.second = nil
                // (No slot at all when no feature is readable.)
                let start = output.baseAddress
                if first.error != nil {
                    // Under `strict`, the first half's error comes first in the feed.
                    if let start { (start + secondSlot).deinitialize(count: second.count) }
                } else {
                    if first.count < secondSlot, let start {
                        (start + first.count).moveInitialize(from: start + secondSlot, count: second.count)
                    }
                    first.count += second.count
                    first.fingerprints.append(contentsOf: second.fingerprints)
                    first.problems.append(contentsOf: second.problems)
                    first.error = second.error
                }
                initialized = first.count
                (result.fingerprints, result.problems, result.error) = (first.fingerprints, first.problems, first.error)
            }
            return result
        }
    }

    /// From how many features ``convert(_:unit:hashed:strict:)`` works on two threads.
    static let parallelConversionMinimum = 4096

    /// What ``convert(_:unit:hashed:strict:)`` makes of the features.
    struct Converted {
        var quakes: [Earthquake] = []
        var fingerprints: [FeatureFingerprint?] = []
        var problems: [(index: Int, id: String?, problem: String)] = []
        /// Under `strict`, the first invalid feature's error (and conversion stopped there).
        var error: FeedError?
    }

    /// What one part of ``convert(_:unit:hashed:strict:)`` wrote: `count` earthquakes from its first slot.
    struct ConvertedPart {
        var count = 0
        var fingerprints: [FeatureFingerprint?] = []
        var problems: [(index: Int, id: String?, problem: String)] = []
        var error: FeedError?
    }

    /// The two halves of ``convert(_:unit:hashed:strict:)``.
    private final class ConversionParts: @unchecked Sendable {
        // @unchecked Sendable: `first` is written only by the first iteration of `concurrentPerform`,
        // `second` only by the second, and both are read after it returned; each half initializes its own
        // slots of `output` (see `convert`); the rest is immutable (the entries outlive the conversion).
        let entries: UnsafeBufferPointer<WireEntry>
        let output: UnsafeMutableBufferPointer<Earthquake>
        let units: TimeUnits
        let hashed: Bool
        let strict: Bool
        var first: ConvertedPart?
        var second: ConvertedPart?

        init(
            entries: UnsafeBufferPointer<WireEntry>, output: UnsafeMutableBufferPointer<Earthquake>,
            units: TimeUnits, hashed: Bool, strict: Bool
        ) {
            (self.entries, self.output, self.units, self.hashed, self.strict) = (entries, output, units, hashed, strict)
        }

        /// Converts the features of `range` into the slots of `output` from `slot` on (one slot for each of
        /// their readable features at most).
        func convert(_ range: Range<Int>, from slot: Int) -> ConvertedPart {
            var part = ConvertedPart()
            if hashed { part.fingerprints.reserveCapacity(range.count) }
            for index in range {
                guard case .feature(let feature) = entries[index] else { continue }
                do throws(FeedError) {
                    let quake = try FeedParser.earthquake(feature, index: index, of: entries.count, units: units)
                    (output.baseAddress! + slot + part.count).initialize(to: quake)
                    part.count += 1
                    if hashed {
                        part.fingerprints.append(feature.hash.map { FeatureFingerprint(hash: $0, units: units) })
                    }
                } catch {
                    if strict {
                        part.error = error
                        return part
                    }
                    part.problems.append((index, feature.id, error.featureProblem ?? error.description))
                }
            }
            return part
        }
    }

    /// Validates one decoded feature and builds its model value.
    private static func earthquake(
        _ feature: WireFeature, index: Int, of count: Int, units: TimeUnits
    ) throws(FeedError) -> Earthquake {
        func invalid(_ problem: String) -> FeedError {
            FeedError.invalidFeature(index: index, of: count, id: feature.id, problem: problem)
        }
        func date(_ milliseconds: Double?, _ path: String) throws(FeedError) -> Date? {
            try Self.date(milliseconds: milliseconds, path: path, featureIndex: index)
        }
        guard let id = feature.id, !id.isEmpty else { throw invalid("has no \"id\"") }
        guard id.contains(where: { !$0.isWhitespace }) else { throw invalid("has an \"id\" of only spaces") }
        guard let coordinates = feature.geometry?.coordinates else { throw invalid("has no geometry.coordinates") }
        guard coordinates.count >= 3 else {
            throw invalid("has \(coordinates.count) coordinate value(s) where 3 are needed")
        }
        guard let longitude = coordinates[0] else { throw invalid("has a null longitude (geometry.coordinates[0])") }
        guard let latitude = coordinates[1] else { throw invalid("has a null latitude (geometry.coordinates[1])") }
        guard let depth = coordinates[2] else { throw invalid("has a null depth (geometry.coordinates[2])") }
        guard (-90.0...90.0).contains(latitude) else {
            throw invalid("has latitude \(latitude), outside -90...90 (are longitude and latitude swapped?)")
        }
        guard (-180.0...180.0).contains(longitude) else {
            throw invalid("has longitude \(longitude), outside -180...180")
        }
        let p = feature.properties
        // A number written beyond a 64-bit float's range (1e999) reads as infinity: not a measurement.
        for (value, path) in [
            (depth, "depth (geometry.coordinates[2])"), (p?.mag, "magnitude (properties.mag)"),
            (p?.cdi, "intensity (properties.cdi)"), (p?.mmi, "intensity (properties.mmi)"),
        ] {
            if let value, !value.isFinite {
                throw invalid("has \(path) \(value): a number beyond a 64-bit float's range is not a measurement")
            }
        }
        // Values no instrument reports (the largest earthquake measured is 9.5, the smallest near −2;
        // the deepest about 750 km, and events above sea level have a small negative depth).
        if let magnitude = p?.mag, abs(magnitude) > maximumMagnitude {
            throw invalid(
                "has magnitude (properties.mag) \(magnitude), outside -\(Int(maximumMagnitude))...\(Int(maximumMagnitude)): not a real magnitude"
            )
        }
        guard depthRange.contains(depth) else {
            throw invalid(
                "has depth (geometry.coordinates[2]) \(depth) km, outside \(Int(depthRange.lowerBound))...\(Int(depthRange.upperBound)) km: not a real depth"
            )
        }

        var quake = Earthquake(
            id: id,
            latitude: latitude,
            longitude: longitude,
            depth: depth,
            magnitude: p?.mag,
            magnitudeType: p?.magType,
            place: p?.place,
            // A value that is clearly milliseconds already (10¹¹ or more) is never scaled (``TimeUnits``).
            time: try date(p?.time.map(units.time), "features[\(index)].properties.time"),
            updated: try date(p?.updated.map(units.updated), "features[\(index)].properties.updated"),
            timeZoneOffset: p?.tz,
            url: p?.url,
            detailURL: p?.detail,
            felt: p?.felt,
            cdi: p?.cdi,
            mmi: p?.mmi,
            alert: p?.alert,
            status: p?.status,
            tsunami: p?.tsunami,
            significance: p?.sig,
            network: p?.net,
            code: p?.code,
            type: p?.type,
            title: p?.title
        )
        quake.otherIDs = Earthquake.OtherIDs(p?.ids, excluding: id)
        return quake
    }

    /// The first bytes of an HTML document (after whitespace and a byte order mark), or `nil`.
    static func htmlStart(of data: Data) -> String? {
        let head = data.prefix(512)
        var text = Substring(String(decoding: head, as: UTF8.self))
        if text.hasPrefix("\u{FEFF}") { text = text.dropFirst() }
        text = text.drop { $0.isWhitespace }
        guard text.first == "<" else { return nil }
        let line = text.prefix { $0 != "\n" && $0 != "\r" }.prefix(40)
        return String(line)
    }

    /// `"gzip"` or `"ZIP"` when `data` starts with that format's signature (a `.gz` file given as the feed,
    /// or a server that compressed the body without saying so), else `nil`.
    static func archiveKind(of data: Data) -> String? {
        let head = Array(data.prefix(4))
        if head.count >= 2, head[0] == 0x1F, head[1] == 0x8B { return "gzip" }
        if head == [0x50, 0x4B, 0x03, 0x04] { return "ZIP" }
        return nil
    }

    /// The largest magnitude, either side of zero, a feature may have: beyond it a value is an error.
    static let maximumMagnitude: Double = 12

    /// The depths, in km, a feature may have: from a high mountain (negative: above sea level) to
    /// beyond the deepest earthquake recorded (about 750 km).
    static let depthRange: ClosedRange<Double> = -15...1000

    /// The largest time a JavaScript `Date` can hold, in milliseconds (about 275 760 years
    /// either side of 1970): anything beyond is not a time.
    static let maximumMilliseconds: Double = 8.64e15

    /// Converts milliseconds to a date, rejecting values no clock can produce.
    static func date(milliseconds: Double?, path: String, featureIndex: Int?) throws(FeedError) -> Date? {
        guard let milliseconds else { return nil }
        guard abs(milliseconds) <= maximumMilliseconds else {
            // `features[5].properties.time` → `properties.time`, for "skipped feature 5: it has …".
            let inFeature = featureIndex.flatMap { _ in path.firstIndex(of: ".") }.map {
                String(path[$0...].dropFirst())
            }
            throw FeedError.unexpectedValue(
                path: path, featureIndex: featureIndex,
                problem: "\(milliseconds) milliseconds since 1970 is not a representable time", pathInFeature: inFeature
            )
        }
        return Date(usgsMilliseconds: Int64(milliseconds.rounded()))
    }
}
