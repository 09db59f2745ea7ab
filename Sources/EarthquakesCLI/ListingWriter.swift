import BatonObservability
import EarthquakesKit

/// Writes listing rows as a fixed-width table or CSV into a byte buffer, flushed to the console in
/// large pieces: no `DateFormatter`, `Locale`, `String(format:)` or per-row `String`.
///
/// ```
/// TIME (UTC)         MAG  DEPTH km  PLACE                                             ID            DETAILS
/// 2025-10-29 14:02   4.6      10.0  105 km WNW of Höfn, Iceland                       us6000rka0    sig 326, felt 3
/// 2025-10-29 13:40   1.9       0.0  [quarry blast] 5 km SE of Tehachapi, CA           ci40915119    sig 56
/// ```
///
/// Events whose type is not "earthquake" show it in brackets before the place.
///
/// ## Thread safety
/// Not `Sendable`: one writer per listing, on one thread. (A class, so closures can write rows without capturing an `inout` value.)
final class ListingWriter {
    enum Format {
        case table
        case csv
    }

    private let format: Format
    private let distances: Bool
    private let layout: TableLayout
    private let colours: Bool
    private let flush: ([UInt8]) -> Void
    private var buffer: [UInt8] = []
    private(set) var rows = 0

    /// - Parameters:
    ///   - distances: whether rows carry a distance (a DIST km column / `distance_km` field).
    ///   - colours: whether magnitudes are coloured (a terminal without `NO_COLOR`).
    ///   - width: the terminal's width, which the table fits (see ``TableLayout``); `nil` for the full table.
    ///   - flush: receives the bytes, in pieces of about 64 KB.
    init(
        format: Format, distances: Bool, colours: Bool = false, width: Int? = nil,
        flush: @escaping ([UInt8]) -> Void
    ) {
        self.format = format
        self.distances = distances
        self.layout = TableLayout(width: width, distances: distances)
        self.colours = colours && format == .table
        self.flush = flush
        buffer.reserveCapacity(1 << 16 + 1024)
    }

    func header() {
        switch format {
        case .table:
            append("TIME (UTC)        ")
            append("  MAG")
            if layout.showsDepth { append("  DEPTH km") }
            if distances { append("  DIST km") }
            append("  PLACE")
            appendSpaces(layout.placeWidth - 5)
            append("  ID")
            if layout.detailsWidth != nil {
                appendSpaces(TableLayout.assumedIDWidth - 2)
                append("  DETAILS")
            }
            append("\n")
        case .csv:
            append("id,time,latitude,longitude,depth_km,magnitude,type,place,felt,cdi,mmi,significance,alert")
            append(distances ? ",distance_km\n" : "\n")
        }
    }

    /// ``header()`` before the first row, then ``row(_:)``.
    func headerAndRow(_ row: EarthquakeRowView) {
        if rows == 0 { header() }
        self.row(row)
    }

    func row(_ row: EarthquakeRowView) {
        rows += 1
        switch format {
        case .table: tableRow(row)
        case .csv: csvRow(row)
        }
        if buffer.count >= 1 << 16 { finish() }
    }

    /// Hands the remaining bytes over.
    func finish() {
        guard !buffer.isEmpty else { return }
        flush(buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    // MARK: Table

    private func tableRow(_ row: EarthquakeRowView) {
        if let time = row.timeMilliseconds {
            appendMinute(time)
        } else {
            append("-               ")
        }
        append("  ")
        if let magnitude = row.magnitude {
            let colour = colours ? Self.colour(magnitude) : nil
            if let colour { append(colour) }
            appendFixed(magnitude, decimals: 1, width: 5)
            if colour != nil { append("\u{1B}[0m") }
        } else {
            append("    ?")
        }
        if layout.showsDepth { appendFixed(row.depth, decimals: 1, width: 10) }
        if let distance = row.distanceKilometers { appendFixed(distance, decimals: 0, width: 9) }
        append("  ")
        // The id's own width decides its row's room for the place, when the table fits a terminal.
        let room = layout.width == nil ? layout.placeWidth : layout.placeWidth(forIDWidth: Self.displayWidth(row.id))
        var width = 0
        if let type = row.type, !Self.isEarthquake(type), room >= 4 {
            buffer.append(UInt8(ascii: "["))
            width += 1 + appendClipped(Self.trimmed(type), room: room - 3)
            buffer.append(UInt8(ascii: "]"))
            buffer.append(UInt8(ascii: " "))
            width += 2
        }
        if let place = row.place ?? row.title, place.count > 0 {
            width += appendClipped(place, room: room - width)
        } else if room > width {
            append("-")
            width += 1
        }
        appendSpaces(room - width + 2)
        let idWidth = appendClipped(row.id, room: .max)
        if let detailsWidth = layout.detailsWidth, Self.hasDetails(row) {
            // (Two spaces at least: an id longer than the one assumed ran into its details.)
            appendSpaces(max(2, TableLayout.assumedIDWidth - idWidth + 2))
            var details = Self.details(row)
            let fits = detailsWidth - max(0, idWidth - TableLayout.assumedIDWidth)
            if fits > 0 { details.withUTF8 { _ = appendClipped($0, room: fits) } }
        }
        buffer.append(UInt8(ascii: "\n"))
    }

    /// Whether a row has any of the details the table shows after the id.
    static func hasDetails(_ row: EarthquakeRowView) -> Bool {
        row.significance != nil || row.felt != nil || row.mmi != nil || row.cdi != nil || row.alert != nil
    }

    /// "sig 2910, felt 42907, MMI 9.3, CDI 8.4, PAGER yellow": what the row has of them.
    static func details(_ row: EarthquakeRowView) -> String {
        var parts: [String] = []
        if let significance = row.significance { parts.append("sig \(significance)") }
        if let felt = row.felt { parts.append("felt \(felt)") }
        if let mmi = row.mmi { parts.append("MMI \(QuakeTable.fixed(mmi, 1))") }
        if let cdi = row.cdi { parts.append("CDI \(QuakeTable.fixed(cdi, 1))") }
        if let alert = row.alert, alert.count > 0 { parts.append("PAGER \(String(decoding: alert, as: UTF8.self))") }
        return parts.joined(separator: ", ")
    }

    /// The columns a terminal gives UTF-8 `text` (``TerminalColumns``: a CJK character or an emoji takes
    /// two, a combining mark none). ASCII, nearly every row, is counted by its bytes.
    static func displayWidth(_ text: UnsafeBufferPointer<UInt8>) -> Int {
        if text.allSatisfy({ $0 < 0x80 }) { return text.count }
        return TerminalColumns.of(String(decoding: text, as: UTF8.self))
    }

    /// `text` without the tabs, line breaks and spaces around it (a type stored before the import trimmed
    /// types: ``Earthquake/storedType(_:)``).
    static func trimmed(_ text: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        let blank: (UInt8) -> Bool = { $0 == 9 || $0 == 10 || $0 == 13 || $0 == 32 }
        guard let start = text.firstIndex(where: { !blank($0) }), let end = text.lastIndex(where: { !blank($0) })
        else { return UnsafeBufferPointer(rebasing: text[0..<0]) }
        return UnsafeBufferPointer(rebasing: text[start...end])
    }

    /// ANSI colour for a magnitude: yellow from 2.5, red from 4.5, bold red from 6.
    static func colour(_ magnitude: Double) -> String? {
        if magnitude >= 6 { return "\u{1B}[1;31m" }
        if magnitude >= 4.5 { return "\u{1B}[31m" }
        if magnitude >= 2.5 { return "\u{1B}[33m" }
        return nil
    }

    /// Whether a type is "earthquake" (any case) or empty: ``Earthquake/normalizedType(_:)``'s rule.
    static func isEarthquake(_ type: UnsafeBufferPointer<UInt8>) -> Bool {
        let type = trimmed(type)
        if type.isEmpty { return true }
        let word = "earthquake".utf8
        guard type.count == word.count else { return false }
        return zip(type, word).allSatisfy { $0 | 0x20 == $1 }
    }

    /// Appends up to `room` columns of UTF-8 `text` (an ellipsis replaces the rest); returns the number of
    /// columns appended. Columns as a terminal gives them: ``displayWidth(_:)``.
    @discardableResult
    private func appendClipped(_ text: UnsafeBufferPointer<UInt8>, room: Int) -> Int {
        if TerminalText.mayBeUnsafe(text) {
            // Feed text reaching a terminal: control and bidirectional characters replaced (rare; the
            // common case below appends the bytes as they are).
            var safe = TerminalText.safe(String(decoding: text, as: UTF8.self))
            return safe.withUTF8 { appendClippedSafe($0, room: room) }
        }
        return appendClippedSafe(text, room: room)
    }

    private func appendClippedSafe(_ text: UnsafeBufferPointer<UInt8>, room: Int) -> Int {
        let width = Self.displayWidth(text)
        if width <= room {
            buffer.append(contentsOf: text)
            return width
        }
        guard room > 0 else { return 0 }
        // Whole characters that fit in room - 1 columns, then the ellipsis (one column); a wide character
        // that would straddle the edge leaves a space instead.
        var kept = 0
        var clipped = ""
        for character in String(decoding: text, as: UTF8.self) {
            let columns = TerminalColumns.of(character)
            if kept + columns > room - 1 { break }
            clipped.append(character)
            kept += columns
        }
        append(clipped)
        append("…")
        appendSpaces(room - 1 - kept)
        return room
    }

    // MARK: CSV

    private func csvRow(_ row: EarthquakeRowView) {
        appendCSV(row.id)
        buffer.append(UInt8(ascii: ","))
        if let time = row.timeMilliseconds { appendISO(time) }
        buffer.append(UInt8(ascii: ","))
        append(String(row.latitude))
        buffer.append(UInt8(ascii: ","))
        append(String(row.longitude))
        buffer.append(UInt8(ascii: ","))
        append(String(row.depth))
        buffer.append(UInt8(ascii: ","))
        if let magnitude = row.magnitude { append(String(magnitude)) }
        buffer.append(UInt8(ascii: ","))
        appendCSVType(row.type)
        buffer.append(UInt8(ascii: ","))
        if let place = row.place { appendCSV(place) }
        buffer.append(UInt8(ascii: ","))
        if let felt = row.felt { append(String(felt)) }
        buffer.append(UInt8(ascii: ","))
        if let cdi = row.cdi { append(String(cdi)) }
        buffer.append(UInt8(ascii: ","))
        if let mmi = row.mmi { append(String(mmi)) }
        buffer.append(UInt8(ascii: ","))
        if let significance = row.significance { append(String(significance)) }
        buffer.append(UInt8(ascii: ","))
        if let alert = row.alert { appendCSV(alert) }
        if let distance = row.distanceKilometers {
            buffer.append(UInt8(ascii: ","))
            appendFixed(distance, decimals: 1, width: 0)
        }
        buffer.append(UInt8(ascii: "\n"))
    }

    /// The event's type by the one rule of filters and counts (``Earthquake/normalizedType(_:)``): an
    /// untyped event is an earthquake, as `--type earthquake` and `status` count it.
    private func appendCSVType(_ type: UnsafeBufferPointer<UInt8>?) {
        guard let type, !Self.isEarthquake(type) else {
            append(Earthquake.defaultType)
            return
        }
        var normalized = Earthquake.normalizedType(String(decoding: type, as: UTF8.self))
        normalized.withUTF8 { appendCSV($0) }
    }

    /// A field, quoted when it holds a comma, a quote or a line break (RFC 4180). Control characters other
    /// than line breaks (which the quotes keep) are replaced: see ``TerminalText/csvSafe(_:)``.
    private func appendCSV(_ text: UnsafeBufferPointer<UInt8>) {
        if TerminalText.mayHaveCSVControl(text) {
            var safe = TerminalText.csvSafe(String(decoding: text, as: UTF8.self))
            safe.withUTF8 { appendCSVSafe($0) }
            return
        }
        appendCSVSafe(text)
    }

    private func appendCSVSafe(_ text: UnsafeBufferPointer<UInt8>) {
        let special = text.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 10 || $0 == 13 }
        guard special else {
            buffer.append(contentsOf: text)
            return
        }
        buffer.append(UInt8(ascii: "\""))
        for byte in text {
            if byte == UInt8(ascii: "\"") { buffer.append(byte) }
            buffer.append(byte)
        }
        buffer.append(UInt8(ascii: "\""))
    }

    // MARK: Numbers and times

    private func append(_ text: String) {
        buffer.append(contentsOf: text.utf8)
    }

    private func appendSpaces(_ count: Int) {
        if count > 0 { buffer.append(contentsOf: repeatElement(UInt8(ascii: " "), count: count)) }
    }

    /// `value` with `decimals` decimals (0 or 1), right-aligned in `width` columns.
    func appendFixed(_ value: Double, decimals: Int, width: Int) {
        guard value.isFinite, abs(value) < 1e15 else {
            appendSpaces(width - 1)
            buffer.append(UInt8(ascii: "?"))
            return
        }
        let scaled = UInt64((abs(value) * (decimals == 0 ? 1 : 10)).rounded())
        let negative = value < 0 && scaled != 0
        // Digits are produced right to left into a small tuple, then copied in order.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let count = withUnsafeMutableBytes(of: &digits) { bytes -> Int in
            var index = bytes.count
            var rest = scaled
            var position = 0
            repeat {
                if decimals == 1 && position == 1 {
                    index -= 1
                    bytes[index] = UInt8(ascii: ".")
                }
                index -= 1
                bytes[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                position += 1
            } while rest > 0 || position <= decimals
            if negative {
                index -= 1
                bytes[index] = UInt8(ascii: "-")
            }
            return bytes.count - index
        }
        appendSpaces(width - count)
        withUnsafeBytes(of: &digits) { bytes in buffer.append(contentsOf: bytes[(bytes.count - count)...]) }
    }

    private func appendDigits(_ value: Int, _ count: Int) {
        var divisor = 1
        for _ in 1..<count { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            buffer.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
            rest %= divisor
            divisor /= 10
        }
    }

    private static func split(_ milliseconds: Int64) -> (days: Int, seconds: Int, millis: Int) {
        let millis = Int(((milliseconds % 1000) + 1000) % 1000)
        let total = Int((milliseconds - Int64(millis)) / 1000)
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        return (days, total - days * 86_400, millis)
    }

    /// `yyyy-MM-dd HH:mm`, UTC.
    private func appendMinute(_ milliseconds: Int64) {
        let (days, seconds, _) = Self.split(milliseconds)
        appendDate(days)
        buffer.append(UInt8(ascii: " "))
        appendDigits(seconds / 3600, 2)
        buffer.append(UInt8(ascii: ":"))
        appendDigits(seconds / 60 % 60, 2)
    }

    /// `yyyy-MM-ddTHH:mm:ss.SSSZ`.
    private func appendISO(_ milliseconds: Int64) {
        let (days, seconds, millis) = Self.split(milliseconds)
        appendDate(days)
        buffer.append(UInt8(ascii: "T"))
        appendDigits(seconds / 3600, 2)
        buffer.append(UInt8(ascii: ":"))
        appendDigits(seconds / 60 % 60, 2)
        buffer.append(UInt8(ascii: ":"))
        appendDigits(seconds % 60, 2)
        buffer.append(UInt8(ascii: "."))
        appendDigits(millis, 3)
        buffer.append(UInt8(ascii: "Z"))
    }

    private func appendDate(_ days: Int) {
        let (year, month, day) = CivilTime.date(days: days)
        if year > 9999 {
            append(String(year))
        } else if year < 0 {
            buffer.append(UInt8(ascii: "-"))  // -44 → -0044, as CivilTime writes it
            if year < -9999 { append(String(year.magnitude)) } else { appendDigits(-year, 4) }
        } else {
            appendDigits(year, 4)
        }
        buffer.append(UInt8(ascii: "-"))
        appendDigits(month, 2)
        buffer.append(UInt8(ascii: "-"))
        appendDigits(day, 2)
    }
}
