import EarthquakesKit
import Foundation

/// Formats earthquakes as a plain-text table for a terminal or a pager.
///
/// ```
/// TIME (UTC)         MAG   DEPTH km  PLACE                              ID
/// 2025-10-29 14:02   4.6       10.0  105 km WNW of Höfn, Iceland        us6000rka0
/// ```
///
/// ## Thread safety
/// Stateless.
enum QuakeTable {
    /// The table's lines, header first. `distances` (kilometres), when given, adds a DIST km column.
    static func lines(_ quakes: [Earthquake], distances: [Double]? = nil) -> [String] {
        var rows: [[String]] = [
            ["TIME (UTC)", "MAG", "DEPTH km"] + (distances == nil ? [] : ["DIST km"]) + ["PLACE", "ID"]
        ]
        for (index, quake) in quakes.enumerated() {
            var row = [
                quake.time.map(Self.minute) ?? "-",
                quake.magnitude.map { Self.fixed($0, 1) } ?? "?",
                Self.fixed(quake.depth, 1),
            ]
            if let distances { row.append(Self.fixed(distances[index], 0)) }
            row.append(Self.clip(quake.place ?? quake.displayTitle, 48))
            row.append(quake.id)
            rows.append(row)
        }
        let rightAligned: Set<Int> = distances == nil ? [1, 2] : [1, 2, 3]
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                if column == row.count - 1 { return cell }
                return rightAligned.contains(column) ? pad + cell : cell + pad
            }.joined(separator: "  ")
        }
    }

    /// `2025-10-29 14:02` in UTC.
    static func minute(_ date: Date) -> String {
        // The proleptic Gregorian calendar of the table and of `show`'s time line (``CivilTime``): a
        // `DateFormatter` switches to the Julian calendar before 1582-10-15 and drops the sign of years
        // before 1 (1500-03-01 was 1500-02-20).
        CivilTime.minute(date.millisecondsSince1970)
    }

    /// A number with a fixed count of decimals, independent of locale.
    /// `value` to `decimals` places; a value that rounds to zero is "0.00", not "-0.00".
    static func fixed(_ value: Double, _ decimals: Int) -> String {
        let text = String(format: "%.\(decimals)f", locale: Locale(identifier: "en_US_POSIX"), value)
        guard text.hasPrefix("-"), text.dropFirst().allSatisfy({ $0 == "0" || $0 == "." }) else { return text }
        return String(text.dropFirst())
    }

    private static func clip(_ text: String, _ width: Int) -> String {
        text.count <= width ? text : String(text.prefix(width - 1)) + "…"
    }
}
