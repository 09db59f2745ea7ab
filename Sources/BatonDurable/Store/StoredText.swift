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

    /// The most bytes (UTF-8) of a name that a store looks things up by: a unique key, a graph's name,
    /// a kind, a category, a worker id, a schedule's name. PostgreSQL indexes them, and an index entry
    /// holds at most about 2.7 KB, so a longer one would work on SQLite and fail on PostgreSQL; both
    /// stores refuse it. (A job's name may be longer.) Hash a longer key: SHA-256 in hex is 64 bytes.
    public static let nameLimit = 1_024

    /// The most bytes of a job's input or output that a store keeps (256 MB). SQLite refuses a value
    /// past its own limit (1 GB by default, less when the application lowered it) and PostgreSQL one past
    /// 1 GB, each with an error that retrying cannot cure; a larger result belongs in a file or an object
    /// store, with its address as the output.
    public static let valueLimit = 256 * 1_048_576

    /// Why `name`, a `what`, cannot be stored, or nil when it can.
    public static func problem(with name: String, _ what: String) -> String? {
        if !isStorable(name) {
            return "\(what) \(quoted(name)) contains a NUL character (\\0), which no store can keep"
        }
        let length = name.utf8.count
        if length > nameLimit {
            return
                "\(what) '\(name.prefix(40))…' is \(length) bytes long, over the \(nameLimit) bytes a store keeps for one (hash a longer one)"
        }
        return nil
    }

    /// `name` as a message quotes it: NUL characters shown as `\0`.
    public static func quoted(_ name: String) -> String {
        var result = "'"
        for scalar in name.unicodeScalars {
            if scalar == "\0" { result += "\\0" } else { result.unicodeScalars.append(scalar) }
        }
        return result + "'"
    }

    /// Throws `DurableError.Code.invalidConfiguration` when `id`, a worker's identity, is empty, holds a
    /// NUL character or is longer than ``nameLimit``.
    public static func checkWorker(_ id: String) throws(DurableError) {
        if id.isEmpty {
            throw DurableError(
                code: .invalidConfiguration,
                message: "the worker id is empty; give the worker a name (DurableWorker.defaultID() makes one).")
        }
        if let problem = problem(with: id, "worker id") {
            throw DurableError(code: .invalidConfiguration, message: "\(problem); give the worker another id.")
        }
    }

    /// Throws `DurableError.Code.invalidGraph` when `key`, a run's unique key, holds a NUL character or
    /// is longer than ``nameLimit``.
    public static func checkUniqueKey(_ key: String?) throws(DurableError) {
        guard let key, let problem = problem(with: key, "unique key") else { return }
        throw DurableError(
            code: .invalidGraph,
            message: "\(problem); use another key (hex or base64 for binary values). Nothing was submitted.")
    }
}
