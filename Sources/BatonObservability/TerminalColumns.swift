/// How many columns a terminal gives text: 2 for an emoji shown as one and for East Asian wide and
/// full-width characters, 0 for a mark or format character alone, 1 otherwise. The tables of the `baton`
/// and `earthquakes` commands pad and clip by it (counting characters or UTF-16 units put a row's later
/// columns out of line, or cut a cell's end, as soon as a name held one of these).
///
/// Stateless; for this package's commands (`package`), not part of the library's API.
package enum TerminalColumns {
    /// The columns a terminal gives `text`.
    package static func of(_ text: some StringProtocol) -> Int { text.reduce(0) { $0 + of($1) } }

    /// The columns a terminal gives one character.
    package static func of(_ character: Character) -> Int {
        guard let first = character.unicodeScalars.first else { return 0 }
        if first.isASCII { return first.value < 0x20 || first.value == 0x7F ? 0 : 1 }
        if character.unicodeScalars.contains(where: { $0.properties.isEmojiPresentation || $0 == "\u{FE0F}" }) {
            return 2
        }
        switch first.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
            0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
            return 2
        default:
            break
        }
        switch first.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: return 1
        }
    }

    /// `text` cut to at most `width` columns, ending with `…` when it was cut.
    package static func clipped(_ text: String, to width: Int) -> String {
        guard of(text) > width else { return text }
        var kept = ""
        var used = 0
        for character in text {
            let wide = of(character)
            if used + wide > width - 1 { break }
            kept.append(character)
            used += wide
        }
        return kept + "…"
    }
}
