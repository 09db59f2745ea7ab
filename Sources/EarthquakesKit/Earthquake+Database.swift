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
    init(row: Row) {
        self.init(
            id: row["id"],
            latitude: row["latitude"],
            longitude: row["longitude"],
            depth: row["depth"],
            magnitude: row["magnitude"],
            magnitudeType: row["magnitudeType"],
            place: row["place"],
            time: (row["time"] as Int64?).map(Date.init(usgsMilliseconds:)),
            updated: (row["updated"] as Int64?).map(Date.init(usgsMilliseconds:)),
            timeZoneOffset: row["timeZoneOffset"],
            url: row["url"],
            detailURL: row["detailURL"],
            felt: row["felt"],
            cdi: row["cdi"],
            mmi: row["mmi"],
            alert: row["alert"],
            status: row["status"],
            tsunami: row["tsunami"],
            significance: row["significance"],
            network: row["network"],
            code: row["code"],
            type: row["type"],
            title: row["title"]
        )
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
