import Foundation

extension FeedParser {
    /// Turns a `DecodingError` into a ``FeedError`` a person can act on.
    ///
    /// Errors in the text itself (an empty coding path) are located precisely with
    /// ``JSONSyntaxChecker``, whose messages and positions do not depend on the platform's
    /// `JSONDecoder`. Errors in a value name its path, such as `features[3].properties.mag`.
    ///
    /// - Parameters:
    ///   - data: the whole input, including any GeoJSONP wrapper.
    ///   - jsonRange: where the JSON text lies in `data` (offsets from `data.startIndex`).
    static func feedError(for error: DecodingError, in data: Data, jsonRange: Range<Int>) -> FeedError {
        switch error {
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return syntaxError(in: data, jsonRange: jsonRange)
                ?? FeedError(
                    .malformedJSON,
                    "the feed could not be read as JSON: \(context.debugDescription) "
                        + "Check that the file is UTF-8 text of a USGS GeoJSON feed."
                )
        case .typeMismatch(_, let context) where context.codingPath.isEmpty:
            // `JSONDecoder` may check the top-level type before the rest of the text.
            return syntaxError(in: data, jsonRange: jsonRange)
                ?? FeedError.notAFeatureCollection(found: "the top level is not a JSON object")
        case .typeMismatch(let type, let context):
            return unexpectedValue(context, "\(found(in: context)), not \(describe(type))")
        case .valueNotFound(_, let context) where context.codingPath.isEmpty:
            return FeedError.notAFeatureCollection(found: "the feed is null")
        case .valueNotFound(let type, let context):
            return unexpectedValue(context, "expected \(describe(type)), found null")
        case .keyNotFound(let key, let context):
            return unexpectedValue(context, "the member \"\(key.stringValue)\" is missing")
        case .dataCorrupted(let context):
            return unexpectedValue(context, context.debugDescription)
        @unknown default:
            return FeedError(.malformedJSON, "the feed could not be decoded: \(error).")
        }
    }

    /// What is wrong with one feature that could not be decoded, as the rest of a sentence about it.
    static func featureProblem(_ error: DecodingError) -> String {
        let failure = feedError(for: error, in: Data(), jsonRange: 0..<0)
        return failure.featureProblem ?? "could not be read: \(failure.description)"
    }

    /// The first syntax error in the JSON text, located in the whole input; `nil` if the text
    /// is valid JSON.
    private static func syntaxError(in data: Data, jsonRange: Range<Int>) -> FeedError? {
        data.withUnsafeBytes { raw in
            let all = raw.bindMemory(to: UInt8.self)
            let json = UnsafeBufferPointer(rebasing: all[jsonRange])
            if let failure = JSONSyntaxChecker.firstError(in: json) {
                let position = FeedError.Position(offset: jsonRange.lowerBound + failure.offset, in: all)
                return FeedError.malformedJSON(failure.reason, at: position)
            }
            // Valid JSON that `JSONDecoder` refuses: nested deeper than it reads.
            guard let offset = tooDeep(json) else { return nil }
            let position = FeedError.Position(offset: jsonRange.lowerBound + offset, in: all)
            return FeedError.malformedJSON(
                "arrays and objects nested more than \(maximumNesting) deep (a USGS feed nests 5 deep)", at: position)
        }
    }

    /// How deep `JSONDecoder` reads arrays and objects nested in one another.
    static let maximumNesting = 512

    /// The offset of the first array or object opened deeper than ``maximumNesting``, or `nil`.
    static func tooDeep(_ json: UnsafeBufferPointer<UInt8>) -> Int? {
        var depth = 0
        var inString = false
        var escaped = false
        for (offset, byte) in json.enumerated() {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > maximumNesting { return offset }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return nil
    }

    private static func unexpectedValue(_ context: DecodingError.Context, _ problem: String) -> FeedError {
        let path = context.codingPath
        var text = ""
        for key in path {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += (text.isEmpty ? "" : ".") + key.stringValue
            }
        }
        var featureIndex: Int?
        var pathInFeature: String?
        if path.count >= 2, path[0].stringValue == "features", let index = path[1].intValue {
            featureIndex = index
            let prefix = "features[\(index)]"
            pathInFeature = text.count > prefix.count ? String(text.dropFirst(prefix.count + 1)) : "the feature itself"
        }
        return FeedError.unexpectedValue(
            path: text.isEmpty ? "the top level" : text, featureIndex: featureIndex, problem: problem,
            pathInFeature: pathInFeature)
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Double.Type, is Int.Type, is Int64.Type: "a number"
        case is Bool.Type: "a boolean"
        default:
            String(describing: type).hasPrefix("Dictionary")
                ? "an object" : String(describing: type).hasPrefix("Array") ? "an array" : "a value of type \(type)"
        }
    }

    /// What a type mismatch found, from Foundation's "Expected to decode Double but found a string
    /// instead." ("a string"); "another kind of value" when the wording is not that.
    private static func found(in context: DecodingError.Context) -> String {
        let text = context.debugDescription
        guard let start = text.range(of: "found "),
            let end = text.range(of: " instead", range: start.upperBound..<text.endIndex)
        else { return "another kind of value" }
        let what = text[start.upperBound..<end.lowerBound]
        // Foundation words it "a string" on one platform and "number" or "bool" on another: one wording.
        switch what.hasPrefix("a ") || what.hasPrefix("an ")
            ? String(what.drop { $0 != " " }.dropFirst()) : String(what)
        {
        case "null value", "null": return "null"
        case "string": return "a string"
        case "number": return "a number"
        case "bool", "boolean": return "a boolean"
        case "dictionary", "object": return "an object"
        case "array": return "an array"
        default: return String(what)
        }
    }
}
