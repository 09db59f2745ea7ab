import Foundation
import GRDB

// How an `Earthquake` maps to a row of the `earthquake` table. Kept internal: the store's
// public API speaks `Earthquake`, never GRDB types.

extension Earthquake {
    /// The table's columns, in the order of ``databaseValues``.
    static let columns = [
        "id", "latitude", "longitude", "depth", "magnitude", "magnitudeType", "place", "time", "updated",
        "timeZoneOffset", "url", "detailURL", "felt", "cdi", "mmi", "alert", "status", "tsunami", "significance",
        "network", "code", "type", "title",
    ]

    /// The column values, in the order of ``columns``. Dates are integer milliseconds.
    var databaseValues: [DatabaseValue] {
        let values: [(any DatabaseValueConvertible)?] = [
            id, latitude, longitude, depth, magnitude, magnitudeType, place, time?.usgsMilliseconds,
            updated?.usgsMilliseconds, timeZoneOffset, url, detailURL, felt, cdi, mmi, alert, status, tsunami,
            significance, network, code, type, title,
        ]
        return values.map { $0?.databaseValue ?? .null }
    }

    /// Reads a row selected with `SELECT *` (or any selection containing every column).
    ///
    /// - Throws: ``UnreadableValue`` for a value that is not of its column's type (another program wrote
    ///   it): GRDB's plain subscripts stop the program on one.
    init(row: Row) throws {
        let id: String? = try Self.value(row, "id", id: nil)
        guard let id else { throw UnreadableValue(id: nil, column: "id", value: .null, expected: "text") }
        func number(_ column: String) throws -> Double? { try Self.value(row, column, id: id) }
        func required(_ column: String) throws -> Double {
            guard let value = try number(column) else {
                throw UnreadableValue(id: id, column: column, value: .null, expected: "numbers")
            }
            return value
        }
        func whole(_ column: String) throws -> Int64? { try Self.value(row, column, id: id) }
        func text(_ column: String) throws -> String? { try Self.value(row, column, id: id) }
        self.init(
            id: id,
            latitude: try required("latitude"),
            longitude: try required("longitude"),
            depth: try required("depth"),
            magnitude: try number("magnitude"),
            magnitudeType: try text("magnitudeType"),
            place: try text("place"),
            time: try whole("time").map(Date.init(usgsMilliseconds:)),
            updated: try whole("updated").map(Date.init(usgsMilliseconds:)),
            timeZoneOffset: try whole("timeZoneOffset").flatMap { Int(exactly: $0) },
            url: try text("url"),
            detailURL: try text("detailURL"),
            felt: try whole("felt").flatMap { Int(exactly: $0) },
            cdi: try number("cdi"),
            mmi: try number("mmi"),
            alert: try text("alert"),
            status: try text("status"),
            tsunami: try whole("tsunami").map { $0 != 0 },
            significance: try whole("significance").flatMap { Int(exactly: $0) },
            network: try text("network"),
            code: try text("code"),
            type: try text("type"),
            title: try text("title")
        )
    }

    /// The value of `column` in `row` as `T`; nil for NULL or a column the selection lacks.
    private static func value<T: DatabaseValueConvertible>(_ row: Row, _ column: String, id: String?) throws -> T? {
        guard let stored = row[column] as DatabaseValue?, !stored.isNull else { return nil }
        guard let value = T.fromDatabaseValue(stored) else {
            let expected =
                T.self == Double.self ? "numbers" : T.self == Int64.self ? "whole numbers" : "text"
            throw UnreadableValue(id: id, column: column, value: stored, expected: expected)
        }
        return value
    }

    /// The value as the database keeps it: dates rounded to whole milliseconds. Comparing
    /// with this tells whether an import really changes a stored row.
    var asStored: Earthquake {
        var copy = self
        copy.time = time.map { Date(usgsMilliseconds: $0.usgsMilliseconds) }
        copy.updated = updated.map { Date(usgsMilliseconds: $0.usgsMilliseconds) }
        copy.status = status?.lowercased()
        return copy
    }
}

/// A value of the `earthquake` table that is not of its column's type: something other than this
/// program changed the row (this program only writes values of each column's type).
struct UnreadableValue: Error, CustomStringConvertible {
    /// The event's id, when it could be read.
    var id: String?
    var column: String
    var value: DatabaseValue
    /// What the column holds: "numbers", "whole numbers", "text".
    var expected: String

    var reason: String {
        let shown: String
        switch value.storage {
        case .null: shown = "no value"
        case .int64(let number): shown = "\(number)"
        case .double(let number): shown = "\(number)"
        case .string(let text): shown = "\"\(text.count > 40 ? text.prefix(40) + "…" : text)\""
        case .blob(let data): shown = data.count == 1 ? "a byte of binary data" : "\(data.count) bytes of binary data"
        }
        let event = id.map { "the event '\($0.count > 40 ? $0.prefix(40) + "…" : $0)'" } ?? "an event"
        return "\(event) has \(shown) in its \(column) column, which holds \(expected)"
    }

    /// What to do, for a database at `path`: with a command to delete the row when its id is plain (letters,
    /// digits, `.`, `-`, `_`) and so safe to paste into a shell; otherwise in words only (a command that
    /// does not name the row by its id could delete others).
    func advice(path: String?) -> String {
        let plain = { (text: String) in
            !text.isEmpty
                && text.unicodeScalars.allSatisfy {
                    $0.isASCII
                        && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || ".-_".unicodeScalars.contains($0))
                }
        }
        guard let id, plain(id), let path else {
            return "Another program changed that row; correct or delete it, then refresh to fetch the event again."
        }
        let file = "'" + path.replacingOccurrences(of: "'", with: "'\\''") + "'"
        return
            "Another program changed that row; correct or delete it (for example: sqlite3 \(file) \"DELETE FROM earthquake WHERE id = '\(id)'\"), then refresh to fetch the event again."
    }

    var description: String { reason }
}

extension Row {
    /// The value of `column` as `T` (an optional for a column that may be NULL). Throws where GRDB's
    /// subscript stops the program: on a value of another type, which only another program can have
    /// written.
    func value<T: DatabaseValueConvertible>(_ column: String) throws -> T {
        try decode(T.self, forColumn: column)
    }
}
