// The feed as it is on the wire: `Decodable` types that mirror the USGS GeoJSON, lenient where
// the real feeds vary (ids given as numbers, `tsunami` as 0/1 or a boolean), and that decode
// only the members the model keeps. Validation and conversion happen in `FeedParser`.

extension FeedParser {
    struct WireDocument: Decodable {
        var type: String?
        var id: String?
        var metadata: WireMetadata?
        var features: [WireEntry]?

        private enum CodingKeys: String, CodingKey { case type, id, metadata, features }

        init() {}

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            type = try container.decodeIfPresent(String.self, forKey: .type)
            id = try container.decodeLenientIDIfPresent(forKey: .id)
            metadata = try container.decodeIfPresent(WireMetadata.self, forKey: .metadata)
            // Decode features only for a collection: a detail Feature's large `properties`
            // block is not worth reading just to reject it.
            guard type != "Feature", container.contains(.features), try !container.decodeNil(forKey: .features) else {
                features = nil
                return
            }
            // One feature that cannot be decoded must not make the others unreadable: keep its error.
            var list = try container.nestedUnkeyedContainer(forKey: .features)
            var entries: [WireEntry] = []
            if let count = list.count { entries.reserveCapacity(count) }
            while !list.isAtEnd {
                do {
                    entries.append(.feature(try list.decode(WireFeature.self)))
                } catch let error as DecodingError {
                    // Its id, if that much can be read, for the warning (and steps over it).
                    entries.append(.unreadable(error, id: try list.decode(WireID.self).id))
                }
            }
            features = entries
        }
    }

    /// A feature as decoded, or why it could not be (and its id, if it has a readable one).
    enum WireEntry {
        case feature(WireFeature)
        case unreadable(DecodingError, id: String?)
    }

    /// The id of a feature that could not be decoded, if it has one that can be read; anything else.
    struct WireID: Decodable {
        var id: String?

        private enum CodingKeys: String, CodingKey { case id }

        init(from decoder: any Decoder) throws {
            let container = try? decoder.container(keyedBy: CodingKeys.self)
            id = try? container?.decodeLenientIDIfPresent(forKey: .id)
        }
    }

    struct WireMetadata: Decodable {
        var generated: Double?
        var url: String?
        var title: String?
        var status: Int?
        var api: String?
        var count: Int?

        private enum CodingKeys: String, CodingKey { case generated, url, title, status, api, count }

        init() {}

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            generated = try c.decodeIfPresent(Double.self, forKey: .generated)
            url = try c.decodeIfPresent(String.self, forKey: .url)
            title = try c.decodeIfPresent(String.self, forKey: .title)
            status = try c.decodeWholeNumberIfPresent(forKey: .status)
            api = try c.decodeIfPresent(String.self, forKey: .api)
            count = try c.decodeWholeNumberIfPresent(forKey: .count)
        }
    }

    struct WireFeature: Decodable {
        var id: String?
        var geometry: WireGeometry?
        var properties: WireProperties?
        /// The hash of the feature's bytes, when ``FeedScanner`` read it (see ``FeatureFingerprint``).
        var hash: FeatureHash?

        private enum CodingKeys: String, CodingKey { case id, geometry, properties }

        init() {}

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decodeLenientIDIfPresent(forKey: .id)
            geometry = try container.decodeIfPresent(WireGeometry.self, forKey: .geometry)
            properties = try container.decodeIfPresent(WireProperties.self, forKey: .properties)
        }
    }

    struct WireGeometry: Decodable {
        /// `null` members are kept (as `nil`) so the parser can name them: a null depth is common.
        var coordinates: [Double?]?
    }

    struct WireProperties: Decodable {
        var mag: Double?
        var place: String?
        var time: Double?
        var updated: Double?
        var tz: Int?
        var url: String?
        var detail: String?
        var felt: Int?
        var cdi: Double?
        var mmi: Double?
        var alert: String?
        var status: String?
        var tsunami: Bool?
        var sig: Int?
        var net: String?
        var code: String?
        var magType: String?
        var type: String?
        var title: String?
        /// Every id the event has had, comma-separated with a comma at each end (`",ci100,us200,"`).
        var ids: String?

        private enum CodingKeys: String, CodingKey {
            case mag, place, time, updated, tz, url, detail, felt, cdi, mmi, alert, status
            case tsunami, sig, net, code, magType, type, title, ids
        }

        init() {}

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            mag = try c.decodeIfPresent(Double.self, forKey: .mag)
            place = try c.decodeIfPresent(String.self, forKey: .place)
            time = try c.decodeIfPresent(Double.self, forKey: .time)
            updated = try c.decodeIfPresent(Double.self, forKey: .updated)
            tz = try c.decodeWholeNumberIfPresent(forKey: .tz)
            url = try c.decodeIfPresent(String.self, forKey: .url)
            detail = try c.decodeIfPresent(String.self, forKey: .detail)
            felt = try c.decodeWholeNumberIfPresent(forKey: .felt)
            cdi = try c.decodeIfPresent(Double.self, forKey: .cdi)
            mmi = try c.decodeIfPresent(Double.self, forKey: .mmi)
            alert = try c.decodeIfPresent(String.self, forKey: .alert)
            status = try c.decodeIfPresent(String.self, forKey: .status)
            // The USGS publishes 0/1 (null in old feeds); accept a JSON boolean too.
            if (try? c.decodeIfPresent(Double.self, forKey: .tsunami)) != nil {
                tsunami = try c.decodeWholeNumberIfPresent(forKey: .tsunami).map { $0 != 0 }
            } else {
                tsunami = try c.decodeIfPresent(Bool.self, forKey: .tsunami)
            }
            sig = try c.decodeWholeNumberIfPresent(forKey: .sig)
            net = try c.decodeIfPresent(String.self, forKey: .net)
            code = try c.decodeIfPresent(String.self, forKey: .code)
            magType = try c.decodeIfPresent(String.self, forKey: .magType)
            type = try c.decodeIfPresent(String.self, forKey: .type)
            title = try c.decodeIfPresent(String.self, forKey: .title)
            // Only read to find the event's earlier ids: a value of another type is no reason to skip it.
            ids = try? c.decodeIfPresent(String.self, forKey: .ids)
        }
    }
}

extension KeyedDecodingContainer {
    /// Decodes a whole number. Read as `Int`, a number with a fraction (`1.5`) or beyond `Int`'s range
    /// makes Foundation's `JSONDecoder` on Linux fail the whole document as "not valid JSON"; read as a
    /// `Double` first, it is an error of this value, at its path. A whole number written with a
    /// fraction (`3.0`) is that number.
    fileprivate func decodeWholeNumberIfPresent(forKey key: Key) throws -> Int? {
        guard let number = try decodeIfPresent(Double.self, forKey: key) else { return nil }
        guard number.rounded() == number, let whole = Int(exactly: number) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self,
                debugDescription: "\(number) is not a whole number in the range of a 64-bit integer")
        }
        return whole
    }

    /// Decodes an id given as a JSON string or, as some GeoJSON producers write it, a number.
    fileprivate func decodeLenientIDIfPresent(forKey key: Key) throws -> String? {
        if let text = try? decodeIfPresent(String.self, forKey: key) { return text }
        if let number = try? decodeIfPresent(Int64.self, forKey: key) { return String(number) }
        return try decodeIfPresent(String.self, forKey: key)
    }
}
