/// Text as the stores keep it, the same in every store.
///
/// PostgreSQL's `text` cannot hold the NUL character (U+0000): a statement carrying one fails
/// (SQLSTATE 22021), and SQLite returns such text cut short at the NUL. So messages — a failure's
/// message, a cancellation's reason, which come from any error's description — are stored with each
/// NUL replaced by U+FFFD (the replacement character), and names that identify something (a graph,
/// a job, a kind, a category, a unique key, a worker) are refused when they contain one.
public enum StoredText {
    /// The most bytes (UTF-8) of a failure message or cancellation reason that a store keeps.
    public static let messageLimit = 65_536

    /// `text` with every NUL character replaced by U+FFFD, and cut to ``messageLimit`` bytes (at a
    /// character's boundary, saying how much was left out) — a message is read in `explain`, logs and
    /// spans, and one past SQLite's limit on a value (1 GB) would be refused, and its report with it;
    /// unchanged (and not copied) when it is neither.
    public static func message(_ text: String) -> String {
        var text = text
        let length = text.utf8.count
        if length > messageLimit {
            var end = text.utf8.index(text.startIndex, offsetBy: messageLimit)
            while String.Index(end, within: text.unicodeScalars) == nil { end = text.utf8.index(before: end) }
            let head = String(text[..<end])  // (rounded down to a whole character)
            text = head + "… (\(length - head.utf8.count) more bytes not stored)"
        }
        guard text.utf8.contains(0) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { $0 == "\0" ? "\u{FFFD}" : $0 }))
    }

    /// Whether `name` can be stored as it is (it holds no NUL character).
    public static func isStorable(_ name: String) -> Bool { !name.utf8.contains(0) }

    /// `name` as a message quotes it: NUL characters shown as `\0`.
    public static func quoted(_ name: String) -> String {
        var result = "'"
        for scalar in name.unicodeScalars {
            if scalar == "\0" { result += "\\0" } else { result.unicodeScalars.append(scalar) }
        }
        return result + "'"
    }

    /// Throws `DurableError.Code.invalidConfiguration` when `id`, a worker's identity, holds a NUL character.
    public static func checkWorker(_ id: String) throws(DurableError) {
        if id.isEmpty {
            throw DurableError(
                code: .invalidConfiguration,
                message: "the worker id is empty; give the worker a name (DurableWorker.defaultID() makes one).")
        }
        guard isStorable(id) else {
            throw DurableError(
                code: .invalidConfiguration,
                message:
                    "worker id \(quoted(id)) contains a NUL character (\\0), which no store can keep; give the worker an id without one."
            )
        }
    }

    /// Throws `DurableError.Code.invalidGraph` when `key`, a run's unique key, holds a NUL character.
    public static func checkUniqueKey(_ key: String?) throws(DurableError) {
        guard let key, !isStorable(key) else { return }
        throw DurableError(
            code: .invalidGraph,
            message:
                "unique key \(quoted(key)) contains a NUL character (\\0), which no store can keep; use a key without one (hex or base64 for binary values). Nothing was submitted."
        )
    }
}
