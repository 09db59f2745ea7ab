/// Text from a feed made safe to print on a terminal.
///
/// A feed is data from the network: a place name holding an escape sequence (`ESC [ 2 J`, a colour, a
/// title change) or a line break would act on the user's terminal or break the table's rows, and a
/// bidirectional override would make the line read differently from its bytes. The table and `show`
/// print feed text through these functions: a control character (C0, DEL, C1) or a bidirectional
/// control becomes U+FFFD (�), a tab or line break a space. `--json` keeps the text as it is (escaped by
/// its format); `--csv` keeps line breaks (quoted) but replaces the other control characters and the
/// bidirectional controls (``csvSafe(_:)``), which CSV cannot escape and which would reach the terminal
/// (or the spreadsheet) of whoever shows it.
enum TerminalText {
    /// Whether `scalar` must not reach a terminal as it is.
    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true  // directional marks and overrides
        default: false
        }
    }

    /// `text` with every unsafe character replaced.
    static func safe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if !isUnsafe(scalar) {
                result.append(scalar)
            } else {
                result.append(scalar == "\t" || scalar == "\n" || scalar == "\r" ? " " : "\u{FFFD}")
            }
        }
        return String(result)
    }

    /// `text` for a CSV field: every C0 or C1 control character, DEL and bidirectional control replaced by
    /// U+FFFD (as the table does: a U+202E would make the field, and the rest of its line, read backwards
    /// wherever the file is shown), a tab by a space; line breaks (CR, LF) are kept, as the field's quotes
    /// hold them.
    static func csvSafe(_ text: String) -> String {
        func replaced(_ scalar: Unicode.Scalar) -> Bool {
            isUnsafe(scalar) && scalar != "\n" && scalar != "\r"
        }
        guard text.unicodeScalars.contains(where: replaced) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            result.append(!replaced(scalar) ? scalar : scalar == "\t" ? " " : "\u{FFFD}")
        }
        return String(result)
    }

    /// Whether UTF-8 `bytes` may hold a character ``csvSafe(_:)`` replaces (true for a few it keeps:
    /// other characters led by 0xC2 or 0xE2).
    static func mayHaveCSVControl(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        bytes.contains { ($0 < 0x20 && $0 != 10 && $0 != 13) || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }
    }

    /// Whether UTF-8 `bytes` may hold an unsafe character: a quick test that is true for every text
    /// ``safe(_:)`` would change (and for a few it would not: other characters led by 0xC2 or 0xE2).
    static func mayBeUnsafe(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        bytes.contains { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }
    }
}
