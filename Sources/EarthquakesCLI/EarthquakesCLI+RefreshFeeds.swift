import Baton
import BatonDurable
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
    /// `refresh --feed A --feed B …` (or `--feeds A,B`, or `--resume`): one durable graph, fetch → parse →
    /// import for each feed, imports one at a time. See ``FeedRefresh``.
    ///
    /// Ctrl-C cancels the running jobs at once (a download deletes its temporary file) and throws a
    /// ``CLIError`` (exit status 130) that names the feeds not imported; `--resume` finishes them.
    ///
    /// - Parameters:
    ///   - feeds: the feeds, in order; empty with `resume` for the newest unfinished refresh.
    ///   - resume: finish an interrupted refresh; with no feeds, the newest one.
    ///   - picture: the files to write a picture of this process's attempts to (`--timeline`, `--trace`);
    ///     a resumed refresh shows only what ran after the resume.
    public func refresh(
        feeds: [String], resume: Bool, database: String?, json: Bool, timeout: Duration = .seconds(30),
        totalTimeout: Duration? = nil, strict: Bool = false, picture: RunPicture = RunPicture()
    ) async throws {
        let given = feeds.map(FeedRefresh.expand)
        // Refused before anything is created: the refresh's key holds one feed a line.
        if let broken = given.first(where: { $0.contains(where: \.isNewline) }) {
            throw CLIError.usage(
                "the feed \"\(TerminalText.safe(broken))\" has a line break in its name, which a refresh of several "
                    + "feeds cannot record (one feed a line); rename the file, or refresh it alone with --feed")
        }
        if FeedRefresh.distinct(given).count < given.count, !json {
            console.error(
                "note: a feed was given more than once (after expanding short names); it is refreshed once.\n")
        }
        let path = DatabaseLocation.path(option: database, environment: environment)
        try picture.check(database: path, feeds: feeds.map(FeedRefresh.expand))
        // What can be refused without the database is refused before it (or its job store) is created: a
        // missing feed file, or a resume with no job store to resume from.
        for feed in FeedRefresh.distinct(given) {
            if case .url(let url) = try Self.source(feed), url.isFileURL { try Self.checkFeedFile(url.path) }
        }
        if given.isEmpty, resume, !FileManager.default.fileExists(atPath: path),
            !FileManager.default.fileExists(atPath: LegacyJobStore.path(forDatabase: path))
        {
            throw CLIError(
                "there is no interrupted refresh to resume in \(path) (there is no such database); "
                    + "run `earthquakes refresh --feed …` to start one")
        }
        try DatabaseLocation.prepareForWriting(path, explicit: isExplicit(database))
        // Whether this refresh creates the database: only for what a refresh that imports nothing says. No
        // file is ever deleted for it (another process may have opened the database or the job store).
        let created = !FileManager.default.fileExists(atPath: path)
        let store = try Self.mappingReadOnly(path) { () throws(StoreError) in try EarthquakeStore(path: path) }
        defer { closeAtEnd(store.close) }
        try store.checkWritable()
        let (jobs, note) = try FeedRefresh.openJobs(database: path)
        defer { closeAtEnd(jobs.close) }
        if let note, !json { console.error(note) }

        var feeds = FeedRefresh.distinct(feeds.map { FeedRefresh.recorded(FeedRefresh.expand($0)) })
        var strict = strict
        var refreshingFailed = false
        if feeds.isEmpty {
            guard resume else { throw CLIError.usage("give the feeds to refresh (--feed or --feeds), or --resume") }
            let unfinished = try await jobs.unfinishedRuns(named: FeedRefresh.runName).first.flatMap {
                $0.uniqueKey.flatMap(FeedRefresh.parse(uniqueKey:))
            }
            // A refresh that ended with a feed failed (one that was not usable, say, and has been fixed since)
            // is kept until the next refresh starts: resuming it refreshes its feeds again, as running the
            // same command again does — a retry of the failed steps alone would parse the old download.
            let failed = try await unfinished == nil ? Self.lastFailedRefresh(in: jobs) : nil
            guard let key = unfinished ?? failed?.key else {
                throw CLIError(
                    "there is no interrupted refresh to resume in \(path); run `earthquakes refresh --feed …` to "
                        + "start one")
            }
            refreshingFailed = failed != nil
            if let failed, !json {
                console.error(
                    "The last refresh of \(TerminalText.safe(key.feeds.map(Self.feedName).joined(separator: ", "))) ended "
                        + "with \(Self.counted(failed.failedJobs, "step")) failed; refreshing its feeds again.\n")
            }
            // The run keeps the `--strict` it was submitted with (it is part of its unique key): a
            // different one given now is refused rather than dropped without a word.
            if strict, !key.strict {
                throw CLIError.usage(
                    "--resume --strict: the interrupted refresh of \(key.feeds.joined(separator: ", ")) was started "
                        + "without --strict, and resuming it cannot change that. Resume it without --strict, or start "
                        + "a strict refresh of those feeds with --feeds and --strict")
            }
            if key.strict, !strict, !json {
                console.error("note: the interrupted refresh was started with --strict; it is resumed with --strict.\n")
            }
            (feeds, strict) = key
        }
        for feed in feeds {
            if case .url(let url) = try Self.source(feed), url.isFileURL { try Self.checkFeedFile(url.path) }
        }
        try picture.check(database: path, feeds: feeds)  // (the feeds of a resumed refresh are known only now)

        // Finished refreshes are kept until the next one starts (for inspection), then pruned: their
        // unique keys are free again, so the same feeds are downloaded afresh.
        _ = try await jobs.prune(finishedBefore: jobs.clock.now().addingTimeInterval(1))
        var key = FeedRefresh.uniqueKey(feeds: feeds, strict: strict)
        // An unfinished refresh of the same files recorded by an earlier version, with paths as typed
        // (relative ones): this one is that one, resumed, not a second refresh of the same feeds.
        if let earlier = try await jobs.unfinishedRuns(named: FeedRefresh.runName).lazy.compactMap({ run in
            run.uniqueKey.flatMap { key in
                FeedRefresh.parse(uniqueKey: key).map { (key: key, feeds: $0.feeds, strict: $0.strict) }
            }
        }).first(where: { $0.key != key && $0.strict == strict && $0.feeds.map(FeedRefresh.recorded) == feeds }) {
            key = earlier.key
            feeds = earlier.feeds
        }
        let (graph, imports, folder) = FeedRefresh.graph(feeds: feeds, strict: strict, database: path)
        let run = try await jobs.submit(graph, uniqueKey: key)
        var before: [Int: ImportFeed.Output] = [:]
        // Whether another refresh of these feeds is running now: this one joined it (its imports so far
        // were not interrupted).
        var joined = false
        if run.existing {
            // Feeds imported before the interruption; and jobs held by a worker that no longer exists
            // (the killed refresh) are taken back now rather than when its leases run out.
            let snapshot = try await jobs.snapshot(of: run.id)
            for (index, handle) in imports.enumerated() {
                if let output = try await jobs.output(of: handle, in: run) { before[index] = output }
            }
            let owners = Set(snapshot.jobs.compactMap(\.leaseOwner))
            let gone = owners.filter(FeedRefresh.isGone)
            for owner in gone { try await jobs.endLeases(ofWorker: owner) }
            let live = owners.subtracting(gone).subtracting([FeedRefresh.workerID()])
            joined = !live.isEmpty
            if !json {
                console.error(
                    FeedRefresh.existingRunNote(
                        imported: before.count, of: feeds.count, liveWorkers: live.count, deadWorkers: gone.count,
                        started: snapshot.jobs.contains { $0.attempts > 0 }) + "\n")
            }
        } else if resume, !refreshingFailed, !json {
            console.error("There was no interrupted refresh of these feeds; refreshing them all.\n")
        }
        await Self.testPause("submitted")

        let ownImports = RefreshImports()
        let display = console.isErrorTerminal && !json ? FeedsProgressDisplay(console: console) : nil
        let worker = try DurableWorker(
            store: jobs,
            jobs: [
                FetchFeed(session: session, timeout: timeout, totalTimeout: totalTimeout, display: display),
                ParseFeed(strict: strict), ImportFeed(store: store, strict: strict, now: now, imports: ownImports),
            ],
            configuration: {
                var configuration = DurableWorker.Configuration(
                    id: FeedRefresh.workerID(), maxConcurrentJobs: 4, shutdownGracePeriod: shutdownGracePeriod,
                    retention: nil, instruments: picture.instruments)
                // An import holds the database's write lock (the job store's too) for as long as it takes:
                // the other attempts' renewals wait for it (up to the busy timeout), so their leases must
                // outlast that wait. A killed refresh's leases end at once on resume (its process is gone).
                configuration.leaseDuration = FeedRefresh.leaseDuration
                configuration.renewInterval = FeedRefresh.leaseDuration / 8
                return configuration
            }()
        )
        // Each import is reported once its completion is recorded (the store wakes its watchers after
        // each recorded outcome), so a line on the screen means "done, not done again".
        let wakeups = jobs.outcomes()
        // Captured by value: `imports` is a `var` above, and a task must not share a variable with this
        // function (a ThreadSanitizer build's region checker refuses it).
        let (console, alreadyDone, importHandles) = (console, Set(before.keys), imports)
        let watcher = Task { () -> Set<Int> in
            var printed = alreadyDone
            for await _ in wakeups {
                for (index, handle) in importHandles.enumerated() where !printed.contains(index) {
                    guard let output = try? await jobs.output(of: handle, in: run) else { continue }
                    printed.insert(index)
                    display?.clear()
                    if !json { Self.printImported(output, into: path, console: console) }
                    await Self.testPause("feed-reported")
                }
            }
            return printed
        }
        // Ctrl-C cancels the worker's task: an immediate shutdown, which cancels the running downloads
        // at once (they delete their temporary files) and gives their jobs back to the store for
        // `--resume`. (`shutdown()` would let them run on for the worker's grace period, 10 s.)
        let working = Task { try await worker.run(until: run) }
        do {
            _ = try await withTaskCancellationHandler {
                try await interrupts.cancellable(
                    onInterrupt: { working.cancel() },
                    onSecondInterrupt: { Self.stopFeedsAtOnce(imports: ownImports, console: console) }
                ) { try await working.value }
            } onCancel: {
                working.cancel()
            }
            watcher.cancel()
        } catch {
            // Awaited, not just cancelled: a read it has under way must end before the job store closes
            // (closing waits for the store's readers, and a read that cannot resume would hold it).
            watcher.cancel()
            _ = await watcher.value
            display?.clear()
            // The refresh's own error is what to report; the picture is written if it can be.
            try? picture.write(title: "earthquakes refresh \(feeds.joined(separator: " ")) (stopped)", console: console)
            if interrupts.wasInterrupted {
                throw await cancellation(
                    created: created, path: path, run: run, feeds: feeds, imports: imports, before: before, jobs: jobs,
                    store: store, committed: ownImports.committedOutputs)
            }
            throw CLIError(
                "the refresh stopped: \(Self.message(for: error)). `earthquakes refresh --resume` finishes it.")
        }
        let printed = await watcher.value
        display?.clear()
        let record = try await jobs.record(of: run.id)
        let outcome = record.finished == nil ? " (unfinished)" : ""
        // A picture that cannot be written does not stop the rest: the downloads are cleaned up and the
        // imports reported first, then the command fails saying which file was not written.
        let pictureError = picture.writeAfterWork(
            title: "earthquakes refresh \(feeds.joined(separator: " "))\(outcome)", console: console)
        guard record.finished != nil else {
            if let pictureError { console.error("warning: \(pictureError.message)\n") }
            if interrupts.wasInterrupted {
                throw await cancellation(
                    created: created, path: path, run: run, feeds: feeds, imports: imports, before: before, jobs: jobs,
                    store: store, committed: ownImports.committedOutputs)
            }
            throw CLIError("the refresh stopped before its end; `earthquakes refresh --resume` finishes the rest")
        }
        try? FileManager.default.removeItem(at: folder)
        // And `<database>.downloads/` when nothing else is in it (another refresh's downloads or a watch's
        // lock keep it): `rmdir` removes only an empty folder, so it cannot take what another process put there.
        _ = rmdir(folder.deletingLastPathComponent().path)
        do {
            try await report(
                run: run, feeds: feeds, imports: imports, before: before, joined: joined, printed: printed, jobs: jobs,
                store: store, path: path, json: json, created: created)
        } catch {
            if let pictureError { console.error("warning: \(pictureError.message)\n") }
            throw error
        }
        if let pictureError { throw pictureError }
    }

    /// The error of a refresh that Ctrl-C stopped: the feeds imported so far are kept; when there are none,
    /// what the database holds (a database this refresh created is never deleted: another process may
    /// have opened it, even written to it, meanwhile).
    private func cancellation(
        created: Bool, path: String, run: DurableRun, feeds: [String], imports: [JobGraph.Handle<ImportFeed.Output>],
        before: [Int: ImportFeed.Output], jobs: SQLiteJobStore, store: EarthquakeStore,
        committed: [String: ImportFeed.Output]
    ) async -> CLIError {
        var importedAny = !before.isEmpty
        var stopped: [String] = []
        for (index, handle) in imports.enumerated() {
            // (An import that committed here is in, even if Ctrl-C stopped the worker before it recorded it.)
            var imported = before[index] != nil || committed[feeds[index]] != nil
            if !imported { imported = (try? await jobs.output(of: handle, in: run)) != nil }
            if imported {
                importedAny = true
            } else {
                stopped.append(feeds[index])
            }
        }
        let what = "Stopped before importing \(stopped.joined(separator: ", "))."
        if importedAny {
            return CLIError.cancelled(
                "The feeds imported so far are kept. \(what)",
                more: "`earthquakes refresh --resume` finishes the rest.")
        }
        let unchanged = Self.nothingImported(createdEmpty: created && (try? store.count()) == 0, database: path)
        return CLIError.cancelled(
            unchanged + " " + what, more: "`earthquakes refresh --resume` finishes the refresh.")
    }

    /// A second Ctrl-C: ends the process with status 130 at once — or, when an import is committing, as
    /// soon as its commit returned — saying what became of it.
    static func stopFeedsAtOnce(imports: RefreshImports, console: Console) {
        imports.whenSettled { committedAny in
            let current =
                committedAny
                ? "the import under way had committed and is kept" : "an import under way (if any) was rolled back"
            console.error(
                "Stopped at once (a second Ctrl-C): the feeds imported so far are kept; \(current). "
                    + "`earthquakes refresh --resume` finishes the refresh.\n")
            exit(130)
        }
    }

    /// After the run: per feed, what was imported or why not; throws when a feed failed.
    private func report(
        run: DurableRun, feeds: [String], imports: [JobGraph.Handle<ImportFeed.Output>],
        before: [Int: ImportFeed.Output], joined: Bool, printed: Set<Int>, jobs: SQLiteJobStore,
        store: EarthquakeStore, path: String, json: Bool, created: Bool
    ) async throws {
        let snapshot = try await jobs.snapshot(of: run.id)
        let records = Dictionary(snapshot.jobs.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var results: [FeedsRefreshJSON.FeedResult] = []
        var failures: [String] = []
        var hasSample = false
        for (index, feed) in feeds.enumerated() {
            if let output = try await jobs.output(of: imports[index], in: run) {
                if !json, !printed.contains(index) { Self.printImported(output, into: path, console: console) }
                hasSample = hasSample || output.hasSample
                let summary = output.summary
                let unreadable = Self.unreadableFeed(summary, feed: feed)
                results.append(
                    FeedsRefreshJSON.FeedResult(
                        source: feed, inserted: summary.inserted, updated: summary.updated,
                        unchanged: summary.unchanged,
                        total: summary.total, skipped: summary.skipped, duplicates: summary.duplicates,
                        duplicateIDs: summary.duplicateIDs, warnings: output.warnings, deleted: summary.deleted,
                        removedDeleted: summary.removed, merged: summary.merged,
                        importedBeforeResume: before[index] != nil, error: unreadable))
                if let unreadable { failures.append(unreadable) }
                continue
            }
            // The first of the feed's three jobs that did not succeed says why.
            let steps = (0..<3).compactMap { records[run.jobs[index * 3 + $0]] }
            let failed = steps.first { $0.state != .succeeded }
            let why = failed?.lastError ?? "it did not finish"
            let reason = Self.sentence(why.split(whereSeparator: \.isNewline).joined(separator: " "))
            // One line per feed, naming its address once (the reason often names it already).
            failures.append(reason.contains(feed) ? reason : "\(feed): \(reason)")
            results.append(FeedsRefreshJSON.FeedResult(source: feed, error: reason))
        }
        let imported = feeds.count - failures.count
        // (When nothing was imported, the database is left as it was.)
        if !hasSample, imported > 0 { _ = try? store.deleteSampleEarthquakes() }
        if json {
            console.print(
                try JSONText.encode(
                    FeedsRefreshJSON(
                        database: path, resumed: !before.isEmpty && !joined, joined: joined, feeds: results)))
        } else {
            // Imported before this process started: by a refresh that was interrupted, or by the one it joined.
            let label = joined ? "By the refresh this one joined: " : "Before the interruption: "
            for index in before.keys.sorted() {
                console.print(label + Self.importedLine(before[index]!, into: path))
            }
        }
        guard failures.isEmpty else {
            let failed = "\(failures.count) of \(Self.counted(feeds.count, "feed")) could not be refreshed (below). "
            let rest: String
            if imported > 0 {
                rest =
                    imported == 1
                    ? "The other feed was imported into \(path)."
                    : "The other \(imported) feeds were imported into \(path)."
            } else {
                rest = Self.nothingImported(createdEmpty: created && (try? store.count()) == 0, database: path)
            }
            throw CLIError(failed + rest, details: failures)
        }
        if !json { console.print("Refreshed \(Self.counted(feeds.count, "feed")) into \(path).") }
    }

    static func importedLine(_ output: ImportFeed.Output, into path: String) -> String {
        let summary = output.summary
        let line =
            "Imported \(summary.total) event\(summary.total == 1 ? "" : "s") from \(TerminalText.safe(output.feed)) into \(TerminalText.safe(path)) (\(counts(summary)))"
        let notes = importNotes(summary)
        return line + (notes.isEmpty ? "" : "; " + notes.joined(separator: "; ")) + "."
    }

    /// A feed's import as the one-feed refresh reports it: its warnings (each skipped feature, the
    /// repeated ids) on standard error, named by feed, then its line.
    static func printImported(_ output: ImportFeed.Output, into path: String, console: Console) {
        for warning in warningLines(warnings: output.warnings, summary: output.summary, feed: output.feed) {
            console.error(warning)
        }
        console.print(importedLine(output, into: path))
    }

    /// The newest refresh of several feeds, when it ended with a step failed: its key and how many steps
    /// failed.
    static func lastFailedRefresh(
        in jobs: SQLiteJobStore
    ) async throws -> (key: (feeds: [String], strict: Bool), failedJobs: Int)? {
        let newest = try await jobs.runs(RunFilter(name: FeedRefresh.runName, limit: 1)).runs.first
        guard let newest, newest.state == .failed,
            let key = newest.uniqueKey.flatMap(FeedRefresh.parse(uniqueKey:))
        else { return nil }
        return ((key.feeds, key.strict), newest.failed)
    }
}
