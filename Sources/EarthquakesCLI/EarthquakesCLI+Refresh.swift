import BatonNetworking
import EarthquakesKit
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension EarthquakesCLI {
    /// `refresh [--feed URL-or-path]`: downloads or reads a feed and imports it.
    ///
    /// Everything that can be checked before downloading is checked first (the feed path, the database
    /// file and folder). Ctrl-C cancels the jobs (which delete their temporary files) and, when the
    /// import had not begun to commit, rolls it back and throws ``CLIError/cancelled``; a Ctrl-C after that
    /// moment cancels nothing, and the result is printed with a line saying that the data is in. A second
    /// Ctrl-C ends the process at once (status 130), saying whether the import had committed.
    ///
    /// - Parameters:
    ///   - timeout: how long the download may go without a byte.
    ///   - totalTimeout: a limit on the whole download; nil for none.
    ///   - strict: reject a feed with any unreadable feature (by default such features are skipped, each
    ///     named in a warning).
    ///   - picture: the files to write a picture of the refresh's jobs to (`--timeline`, `--trace`). When
    ///     one cannot be written after the import, the refresh is still reported and recorded, then a
    ///     ``CLIError`` (exit status 1) says which file was not written.
    public func refresh(
        feed: String?, database: String?, json: Bool, timeout: Duration = .seconds(30), totalTimeout: Duration? = nil,
        strict: Bool = false, picture: RunPicture = RunPicture()
    ) async throws {
        let source = try Self.source(feed)
        let path = DatabaseLocation.path(option: database, environment: environment)
        // With --json, a refresh that fails still writes its one JSON object (with `error`): a script read
        // nothing at all exactly when something went wrong.
        let failing = JSONFailure(json: json, source: source.description, database: path, console: console)
        let (created, store) = try failing.reported { () throws -> (Bool, EarthquakeStore) in
            try picture.check(database: path, feeds: feed.map { [$0] } ?? [])
            if case .url(let url) = source, url.isFileURL { try Self.checkFeedFile(url.path) }
            try DatabaseLocation.prepareForWriting(path, explicit: isExplicit(database))
            let created = !FileManager.default.fileExists(atPath: path)
            return (created, try openForWriting(path))
        }
        defer { closeAtEnd(store.close) }
        let display = console.isErrorTerminal ? ProgressDisplay(console: console) : nil
        var progress: (@Sendable (GetEarthquakes.Progress) -> Void)?
        if let display { progress = { display.report($0) } }
        let get = GetEarthquakes(
            source: source, store: store, timeout: timeout, totalTimeout: totalTimeout, session: session,
            strict: strict, progress: progress, instruments: picture.instruments)
        // The whole rest, reports included, is one cancellable part: a Ctrl-C after the import committed is
        // told as such (the data is in), never lost and never ending the process without a word.
        let console = console
        try await interrupts.cancellable(
            onInterrupt: { get.cancel() },
            onSecondInterrupt: {
                Self.stopAtOnce(gate: get.commitGate, console: console, unchanged: Self.cancelledText(created, path))
            }
        ) {
            let summary: ImportSummary
            do {
                summary = try await get.run()
                display?.finish()
            } catch {
                display?.finish()
                // The refresh's own error is what to report; the picture is written if it can be.
                try? picture.write(title: "earthquakes refresh \(source) (failed)", console: console)
                // Nothing is deleted, not even a database this refresh created: another process (another
                // refresh, a `list`) may have opened it meanwhile and written to it, and deleting a SQLite file
                // (or its -wal) under a connection loses that process's writes. The message says what is there.
                let createdEmpty = created && (try? store.count()) == 0
                let unchanged =
                    createdEmpty
                    ? Self.nothingImported(createdEmpty: true, database: path) : "The database was not changed."
                // (A cancel before the commit began rolled the import back: see `ImportCommitGate`.)
                if error is CancellationError, interrupts.wasInterrupted {
                    throw failing.report(createdEmpty ? CLIError.cancelled(unchanged) : CLIError.cancelled)
                }
                throw failing.report(Self.refreshFailure(error, source: source, database: path, unchanged: unchanged))
            }
            await Self.testPause("imported")
            try report(
                summary, of: get, source: source, path: path, json: json, picture: picture, store: store,
                created: created)
            await Self.testPause("reported")
            if interrupts.wasInterrupted {
                // The Ctrl-C came once the import had begun to commit: nothing was undone.
                console.error(Self.lateInterruptNote(summary, database: path))
            }
        }
    }

    /// What `refresh --json` of one feed writes when it fails: `{"source", "database", "error"}`, then the
    /// error is thrown as without `--json` (its message on standard error, its exit status). A mistake in
    /// the command line is only a usage error.
    struct JSONFailure {
        struct Object: Encodable {
            var source: String
            var database: String
            var error: String
        }
        let json: Bool
        let source: String
        let database: String
        let console: Console

        /// `error`, after writing it as JSON when asked to.
        func report(_ error: any Error) -> any Error {
            guard json, !((error as? CLIError)?.isUsage ?? false) else { return error }
            let message = (error as? CLIError)?.message ?? "\(error)"
            if let text = try? JSONText.encode(Object(source: source, database: database, error: message)) {
                console.print(text)
            }
            return error
        }

        /// `body`'s result, or its error after writing it as JSON when asked to.
        func reported<T>(_ body: () throws -> T) throws -> T {
            do { return try body() } catch { throw report(error) }
        }
    }

    /// A ``TestPause`` point in async code: the wait runs on a thread of its own, not on one of Swift
    /// concurrency's (which also handle the Ctrl-C the test sends meanwhile).
    static func testPause(_ point: String) async {
        guard TestPause.isEnabled else { return }
        _ = try? await offThePool { TestPause.at(point) }
    }

    /// What a Ctrl-C that came after the import began to commit leaves: the whole import.
    static func lateInterruptNote(_ summary: ImportSummary, database: String) -> String {
        "Ctrl-C came after the import had committed, so nothing was cancelled: the \(counted(summary.total, "event")) "
            + "of this refresh are in \(database).\n"
    }

    /// What a refresh stopped before its commit says of the database.
    private static func cancelledText(_ created: Bool, _ path: String) -> String {
        created ? "nothing was imported; the new database \(path) holds no events" : "the database was not changed"
    }

    /// A second Ctrl-C: ends the process with status 130 at once — or, when the import is committing,
    /// as soon as its commit returned — saying whether the import is in.
    static func stopAtOnce(gate: ImportCommitGate, console: Console, unchanged: String) {
        gate.whenSettled { settlement in
            switch settlement {
            case .committed:
                console.error(
                    "Stopped at once (a second Ctrl-C); the import had committed: its events are in the database.\n")
            case .notCommitted:
                console.error("Stopped at once (a second Ctrl-C); \(unchanged).\n")
            }
            exit(130)
        }
    }

    /// After the import committed: records it, removes old sample events, prints the result.
    private func report(
        _ summary: ImportSummary, of get: GetEarthquakes, source: GetEarthquakes.Source, path: String, json: Bool,
        picture: RunPicture, store: EarthquakeStore, created: Bool
    ) throws {
        // A picture that cannot be written (its folder was checked, but may have gone since) does not undo
        // the import: the refresh is recorded and reported, then the command fails saying why.
        let pictureError = picture.writeAfterWork(title: "earthquakes refresh \(source)", console: console)
        let warnings = (get.feed?.warnings ?? []).map { (warning: FeedWarning) in warning.description }
        // A feed none of whose features could be read fails the refresh: it is not recorded as one.
        let unreadable = Self.unreadableFeed(summary, feed: source.description)
        // After the import committed: remember it (for "last refreshed 2 h ago"), and take out the sample
        // events that versions before the sample had its own database put here. Neither may fail the refresh.
        if unreadable == nil {
            try? store.recordRefresh(RefreshRecord(date: now(), source: source.description, summary: summary))
        }
        // (A feed that itself holds sample events, such as a saved sample feed, keeps them.)
        let feedHasSample = get.feed?.containsEarthquake(ofNetwork: "sample") ?? false
        let oldSample = feedHasSample || unreadable != nil ? 0 : (try? store.deleteSampleEarthquakes()) ?? 0
        let types = Self.typeCounts(summary)
        if json {
            let result = RefreshJSON(
                source: source.description, database: path, inserted: summary.inserted, updated: summary.updated,
                unchanged: summary.unchanged, total: summary.total, duplicates: summary.duplicates,
                duplicateIDs: summary.duplicateIDs, skipped: summary.skipped, warnings: warnings,
                types: Dictionary(types.map { ($0.type, $0.count) }, uniquingKeysWith: +),
                removedSampleEvents: oldSample, deleted: summary.deleted, removedDeleted: summary.removed,
                merged: summary.merged, error: unreadable)
            console.print(try JSONText.encode(result))
        } else {
            for warning in Self.warningLines(warnings: warnings, summary: summary) { console.error(warning) }
            let onlyEarthquakes = types.allSatisfy { $0.type == "earthquake" }
            let noun = (onlyEarthquakes ? "earthquake" : "event") + (summary.total == 1 ? "" : "s")
            var line =
                "Imported \(summary.total) \(noun) from \(TerminalText.safe("\(source)")) into \(TerminalText.safe(path)) (\(Self.counts(summary)))"
            if !onlyEarthquakes {
                // (Types come from the feed: safe for a terminal.)
                line +=
                    ": "
                    + types.map { "\($0.count) \(TerminalText.safe(Self.plural($0.type, $0.count)))" }.joined(
                        separator: ", ")
            }
            let notes = Self.importNotes(summary)
            console.print(line + (notes.isEmpty ? "" : "; " + notes.joined(separator: "; ")) + ".")
            if oldSample > 0 {
                console.print(
                    "Removed \(oldSample) SAMPLE events that an older version of this tool put into this database.")
            }
        }
        if let unreadable {
            // As every failed first refresh does: the new database is kept, and holds nothing.
            let createdEmpty = created && (try? store.count()) == 0
            throw CLIError(unreadable + (createdEmpty ? ". The new database \(path) holds no events" : ""))
        }
        if let pictureError { throw pictureError }
    }

    /// The warnings of an import, each a line for standard error: the feed's own (one per unreadable
    /// feature skipped, …), then the ids it repeated. `feed` prefixes each when several feeds are refreshed.
    ///
    /// At most ``shownWarnings`` of the feed's own, then a line counting the rest: a feed whose every
    /// feature is unreadable would otherwise print a line for each (`--json` keeps them all).
    static func warningLines(warnings: [String], summary: ImportSummary, feed: String? = nil) -> [String] {
        let prefix = feed.map { "warning: \(TerminalText.safe($0)): " } ?? "warning: "
        var lines = warnings.prefix(shownWarnings).map { prefix + TerminalText.safe($0) + "\n" }
        if warnings.count > shownWarnings {
            let more = warnings.count - shownWarnings
            lines.append(prefix + "\(more) more warning\(more == 1 ? "" : "s") not shown (--json lists every one)\n")
        }
        if summary.duplicates > 0 {
            let shown = TerminalText.safe(summary.duplicateIDs.prefix(5).joined(separator: ", "))
            let more = summary.duplicateIDs.count > 5 ? " and \(summary.duplicateIDs.count - 5) more" : ""
            let ids = summary.duplicateIDs.isEmpty ? "" : " (\(shown)\(more))"
            lines.append(
                prefix
                    + "\(summary.duplicates) feature\(summary.duplicates == 1 ? "" : "s") of the feed repeated an id "
                    + "given earlier in it\(ids); only the newest copy of each id (by its updated time, copies without one last; the last on a tie) was imported\n"
            )
        }
        return lines
    }

    /// The most warnings of a feed printed one per line (``warningLines(warnings:summary:feed:)``).
    static let shownWarnings = 20

    /// The failure of a feed none of whose features could be read, if `summary` is one: its format has
    /// probably changed (or it is not a USGS feed), and a refresh that imports nothing from it must not
    /// look like one that succeeded (a refresh run by `cron` would import nothing, quietly, for ever).
    static func unreadableFeed(_ summary: ImportSummary, feed: String) -> String? {
        guard summary.skipped > 0, summary.total == 0, summary.deleted == 0, summary.duplicates == 0 else { return nil }
        return
            "none of the \(summary.skipped) features of \(TerminalText.safe(feed)) could be read (see the warnings); "
            + "nothing was imported from it. Its format may have changed, or it is not a USGS GeoJSON feed; "
            + "`--strict` stops at the first unreadable feature with its whole error"
    }

    /// What an import's summary line adds after its counts: repeated ids, skipped features, deleted events.
    static func importNotes(_ summary: ImportSummary) -> [String] {
        var notes: [String] = []
        if summary.duplicates > 0 {
            notes.append("\(summary.duplicates) repeated id\(summary.duplicates == 1 ? "" : "s") not counted")
        }
        if summary.skipped > 0 {
            notes.append(
                "\(summary.skipped) unreadable feature\(summary.skipped == 1 ? "" : "s") skipped (see the warnings; --strict refuses such a feed)"
            )
        }
        if let deleted = deletedNote(summary) { notes.append(deleted) }
        if summary.merged > 0 {
            let rows = summary.merged == 1 ? "1 row" : "\(summary.merged) rows"
            notes.append("\(rows) of events the USGS now lists under another id replaced")
        }
        return notes
    }

    /// How many imported events are of each type, most common first (untyped events count as earthquakes).
    static func typeCounts(_ summary: ImportSummary) -> [(type: String, count: Int)] {
        var counts: [String: Int] = [:]
        for (type, count) in summary.otherTypes { counts[type.lowercased(), default: 0] += count }
        if summary.earthquakes > 0 { counts["earthquake", default: 0] += summary.earthquakes }
        return counts.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { ($0.key, $0.value) }
    }

    /// Adds the source to feed errors and says what the database holds (`unchanged`, from
    /// ``nothingImported(createdEmpty:database:)``).
    static func refreshFailure(
        _ error: any Error, source: GetEarthquakes.Source, database: String,
        unchanged: String = "The database was not changed."
    ) -> any Error {
        switch error {
        case is CancellationError:
            return CLIError("refresh cancelled. \(unchanged)")
        case let error as FeedError where looksLikeHTML(error):
            return CLIError(
                "\(source) sent an HTML page, not a GeoJSON feed: check the address (USGS feeds end in .geojson, "
                    + "for example \(defaultFeedURL.absoluteString)). \(unchanged)")
        case let error as StoreError where error.code == .readOnly || error.underlying.contains("SQLite error 8"):
            return DatabaseLocation.readOnlyError(database)
        case let error as FeedError:
            return CLIError(
                "the feed from \(source) is not usable: \(sentence(error.description)) \(unchanged)")
        case let error as StoreError:
            return error
        case let error as NetworkError where error.code == .httpStatus:
            return CLIError("\(sentence(message(for: withAdvice(error)))) \(unchanged)")
        default:
            return CLIError("\(sentence(message(for: error))) \(unchanged)")
        }
    }

    /// An HTTP error status with what to do about it ("HTTP 404 (Not Found) from …. There is no feed at
    /// that address: …"); any other error as it is.
    static func withAdvice(_ error: any Error) -> any Error {
        guard let network = error as? NetworkError, network.code == .httpStatus, let status = network.statusCode
        else { return error }
        let advice: String
        switch status {
        case 404, 410:
            advice =
                "There is no feed at that address: check it (USGS feeds end in .geojson, for example \(defaultFeedURL.absoluteString))."
        case 401, 403, 407:
            advice = "The server refused access: check the address, and a proxy that may need signing in to."
        case 408, 429, 500...599:
            advice = "The server is busy or failing: try again later."
        case 400...499:
            advice = "The server refused the request: check the address (for an FDSN event query, its parameters)."
        default:
            return error
        }
        return CLIError("\(sentence(network.description)) \(advice)")
    }

    /// What a refresh that imported nothing says of the database: a database it created (which it never
    /// deletes: another process may have it open) and that holds no events is named as such.
    static func nothingImported(createdEmpty: Bool, database: String) -> String {
        createdEmpty
            ? "Nothing was imported; the new database \(database) holds no events."
            : "Nothing was imported; the database was not changed."
    }

    /// `text` ending with exactly one full stop.
    static func sentence(_ text: String) -> String {
        var text = text.trimmingCharacters(in: .whitespaces)
        while text.hasSuffix(".") { text.removeLast() }
        return text + "."
    }

    /// "2 events marked deleted by the USGS not stored (1 removed from the database)", or nil.
    static func deletedNote(_ summary: ImportSummary) -> String? {
        guard summary.deleted > 0 else { return nil }
        let events = summary.deleted == 1 ? "1 event" : "\(summary.deleted) events"
        return "\(events) marked deleted by the USGS not stored (\(summary.removed) removed from the database)"
    }

    static func counts(_ summary: ImportSummary) -> String {
        "\(summary.inserted) new, \(summary.updated) updated, \(summary.unchanged) unchanged"
    }

}
