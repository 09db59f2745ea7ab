package import Foundation
public import GRDB
import GRDBSQLite

extension EarthquakeStore {
    /// Inserts new earthquakes and updates known ones (matched by ``Earthquake/id``), in one
    /// transaction.
    ///
    /// The import is all-or-nothing: if any row is refused (for example a latitude outside
    /// -90...90) or the disk fails, the transaction is rolled back and the table is exactly as
    /// it was before the call. A row whose stored value is already identical is counted as
    /// unchanged and not rewritten. An earthquake whose `updated` time is older than the stored row's,
    /// or that has none when the stored row has one, does not replace it (it is counted as unchanged). An `updated` time more than a day after now is
    /// no clock's reading: it is stored as given, and blocks and wins no comparison. An
    /// earthquake the USGS marks deleted (`status` "deleted") is not stored, and removes a stored row of
    /// its id (``ImportSummary/deleted``, ``ImportSummary/removed``); its id and the `updated` time of the
    /// deletion are kept, so that a copy of it that is not newer than the deletion (from a stale or saved
    /// feed) does not store it again (it counts as unchanged); a newer copy does (the USGS restored it).
    /// A deletion whose time is unknown (no `updated`, or one beyond a day ahead) yields to any copy with a
    /// known time. When `quakes` holds the same id more than once, only the
    /// newest copy is imported (the latest known `updated`; copies without one rank below those with
    /// one; the last on a tie), and the summary counts the others in ``ImportSummary/duplicates``.
    ///
    /// When another connection (another process) is importing into the same file, the transaction
    /// waits up to ``busyTimeout`` for it, calling `whileWaiting` once when the wait starts.
    ///
    /// - Parameters:
    ///   - quakes: the earthquakes to store, typically ``Feed/earthquakes``.
    ///   - whileWaiting: Called (from the calling thread) when the import starts waiting for another
    ///     connection's lock, for example to show "waiting for another refresh of this database".
    ///   - commitGate: Decides between a cancel and the commit (see ``ImportCommitGate``): a cancel that
    ///     comes before the commit begins makes the import roll back and throw ``StoreError/Code/cancelled``.
    /// - Returns: how many rows were inserted, updated and left unchanged, and the repeated ids.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/write`` (naming the refused row),
    ///   ``StoreError/Code/busy``, ``StoreError/Code/readOnly`` or ``StoreError/Code/cancelled``.
    /// - Complexity: O(*n* log *m*) for *n* quakes into a table of *m* rows.
    @discardableResult
    public func importFeed(
        _ quakes: [Earthquake], whileWaiting: (@Sendable () -> Void)? = nil, commitGate: ImportCommitGate? = nil
    ) throws(StoreError) -> ImportSummary {
        try importEntries(
            of: Feed(metadata: Feed.Metadata(), earthquakes: quakes), whileWaiting: whileWaiting, gate: commitGate)
    }

    /// The import of ``importFeed(_:whileWaiting:commitGate:)-([Earthquake],_,_)``, of every earthquake of
    /// `feed` (decoded or pending; the summary's ``ImportSummary/skipped`` is left at 0).
    private func importEntries(
        of feed: Feed, whileWaiting: (@Sendable () -> Void)?, gate: ImportCommitGate?
    ) throws(StoreError) -> ImportSummary {
        let count = feed.count
        // A cancel (Ctrl-C) also ends a wait for another process's lock, which may last the whole
        // ``busyTimeout``: the import then stops as cancelled, not when the other process lets go.
        var stop: (@Sendable () -> Bool)?
        if let gate { stop = { gate.isCancelled } }
        let previous = lockWait.setHooks((observer: whileWaiting, stop: stop))
        defer { _ = lockWait.setHooks(previous) }
        if gate?.isCancelled == true { throw Self.cancelled(path: path) }
        var committing = false
        do {
            let summary = try onConnection { db in
                // A page cache big enough for the indexes being changed, so that the transaction writes each
                // page to the journal once instead of spilling and rewriting it (SQLite's default is 2 MB).
                let cacheSize = try Int.fetchOne(db, sql: "PRAGMA cache_size") ?? -2000
                let importCacheKiB = min(max(count / 4, 2000), 256 * 1024)
                try db.execute(sql: "PRAGMA cache_size = -\(importCacheKiB)")
                defer { try? db.execute(sql: "PRAGMA cache_size = \(cacheSize)") }
                var summary = ImportSummary()
                try db.inTransaction(.immediate) {
                    summary = try Self.upsert(feed, in: db, gate: gate)
                    TestPause.at("before-commit")
                    // The last moment a cancel rolls the import back; from here on it is too late.
                    if let gate {
                        guard gate.beginCommit() else { throw CancellationError() }
                        committing = true
                    }
                    return .commit
                }
                return summary
            }
            if committing { gate?.endCommit(succeeded: true) }
            TestPause.at("committed")
            return summary
        } catch {
            if committing { gate?.endCommit(succeeded: false) }
            if error is CancellationError || (!committing && gate?.isCancelled == true) {
                throw Self.cancelled(path: path)
            }
            throw StoreError.classified(path: path, error: error, timeout: busyTimeout)
                ?? StoreError(
                    .write, path: path, doing: "import \(count) earthquake\(count == 1 ? "" : "s") into", error: error,
                    advice: "Nothing was changed: the import was rolled back."
                )
        }
    }

    /// Imports every earthquake of a parsed feed, and counts its skipped features in the summary. See
    /// ``importFeed(_:whileWaiting:commitGate:)-([Earthquake],_,_)``.
    ///
    /// A feed parsed for this store (by ``GetEarthquakes``) may hold features left undecoded because the
    /// store had their fingerprint (a hash of their exact bytes, kept with each row): each is counted
    /// unchanged when its row still has that fingerprint in the import's transaction, and decoded and
    /// imported like the others when not (another process changed or deleted the row meanwhile).
    @discardableResult
    public func importFeed(
        _ feed: Feed, whileWaiting: (@Sendable () -> Void)? = nil, commitGate: ImportCommitGate? = nil
    ) throws(StoreError)
        -> ImportSummary
    {
        var summary = try importEntries(of: feed, whileWaiting: whileWaiting, gate: commitGate)
        summary.skipped = feed.skippedFeatures.count
        return summary
    }

    /// Imports every earthquake of `feed` in a write transaction that the caller owns, on another
    /// connection to this store's file: for an import that must commit together with other writes, such as
    /// a durable job's completion record (`DurableJobContext.complete(writes:)` of a job store opened on
    /// this file). The rules and the summary are those of
    /// ``importFeed(_:whileWaiting:commitGate:)-(Feed,_,_)``; the caller commits or rolls back.
    ///
    /// ```swift
    /// let summary = try await context.complete { db in
    ///     try quakes.importFeed(feed, in: db)   // committed with the job's completion, or not at all
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - feed: The parsed feed.
    ///   - db: A connection to this store's file, inside a transaction (it is refused otherwise).
    ///   - commitGate: Checked as the import goes: a cancel makes it throw ``StoreError/Code/cancelled``.
    ///     Its ``ImportCommitGate/beginCommit()`` is the caller's to ask, just before its commit.
    /// - Throws: ``StoreError`` with code ``StoreError/Code/readOnly`` (a store opened read-only),
    ///   ``StoreError/Code/open`` (`db` is not in a transaction, or is on another file),
    ///   ``StoreError/Code/write`` or ``StoreError/Code/cancelled``.
    public func importFeed(
        _ feed: Feed, in db: Database, commitGate: ImportCommitGate? = nil
    ) throws(StoreError)
        -> ImportSummary
    {
        if refusesWrites {
            throw StoreError(
                .readOnly, path: path, doing: "import into", reason: "the store was opened read-only",
                advice: "Open it with EarthquakeStore(path:) to import.")
        }
        guard db.isInsideTransaction, let path, Self.isSameFile(db, as: path) else {
            throw StoreError(
                .open, path: path, doing: "import into",
                reason: "the connection given is not in a transaction on this store's file",
                advice: "Call importFeed(_:in:) inside a write transaction of a connection to \(path ?? "the file").")
        }
        if commitGate?.isCancelled == true { throw Self.cancelled(path: path) }
        let count = feed.count
        do {
            let cacheSize = try Int.fetchOne(db, sql: "PRAGMA cache_size") ?? -2000
            try db.execute(sql: "PRAGMA cache_size = -\(min(max(count / 4, 2000), 256 * 1024))")
            defer { try? db.execute(sql: "PRAGMA cache_size = \(cacheSize)") }
            var summary = try Self.upsert(feed, in: db, gate: commitGate)
            summary.skipped = feed.skippedFeatures.count
            return summary
        } catch {
            if error is CancellationError { throw Self.cancelled(path: path) }
            throw StoreError(
                .write, path: path, doing: "import \(count) earthquake\(count == 1 ? "" : "s") into", error: error,
                advice: "Nothing was changed: the import was rolled back.")
        }
    }

    /// Whether `db`'s main database is the file at `path` (the same file, whatever the spelling).
    static func isSameFile(_ db: Database, as path: String) -> Bool {
        guard
            let theirs = try? Row.fetchAll(db, sql: "PRAGMA database_list")
                .first(where: { ($0["name"] as String?) == "main" })?["file"] as String?
        else { return false }
        var mine = stat()
        var other = stat()
        return stat(path, &mine) == 0 && stat(theirs, &other) == 0 && mine.st_dev == other.st_dev
            && mine.st_ino == other.st_ino
    }

    /// The error of an import that a cancel rolled back.
    private static func cancelled(path: String?) -> StoreError {
        StoreError(
            .cancelled, path: path, doing: "import into", reason: "the import was cancelled",
            advice: "Nothing was changed: the import was rolled back.")
    }

    /// The body of the import transaction: SQLite's own prepared statements, bound and compared column
    /// by column (no intermediate rows or argument arrays), one lookup per earthquake.
    private static func upsert(_ feed: Feed, in db: Database, gate: ImportCommitGate?) throws -> ImportSummary {
        let columns = Earthquake.columns
        let connection = db.sqliteConnection
        let select = try RawStatement(
            connection,
            "SELECT \(columns.dropFirst().joined(separator: ", ")), fingerprint FROM earthquake WHERE id = ?")
        let insert = try RawStatement(
            connection,
            "INSERT INTO earthquake (\(columns.joined(separator: ", ")), fingerprint, added, changed) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")), ?, ?, ?)"
        )
        let update = try RawStatement(
            connection,
            "UPDATE earthquake SET \(columns.dropFirst().map { "\($0) = ?" }.joined(separator: ", ")), fingerprint = ?, changed = ? WHERE id = ?"
        )
        let fingerprintOnly = try RawStatement(connection, "UPDATE earthquake SET fingerprint = ? WHERE id = ?")
        let delete = try RawStatement(connection, "DELETE FROM earthquake WHERE id = ?")
        // The stored `updated` time, in the columns `select` reads (after the id).
        let updatedColumn = Int32(columns.firstIndex(of: "updated")! - 1)
        let storedFingerprint = try RawStatement(connection, "SELECT fingerprint FROM earthquake WHERE rowid = ?")
        let deletedTable = EarthquakeStore.deletedTable
        let deletion = try RawStatement(connection, "SELECT updated FROM \(deletedTable) WHERE id = ?")
        let recordDeletion = try RawStatement(
            connection,
            """
            INSERT INTO \(deletedTable) (id, updated) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET updated =
                CASE WHEN excluded.updated IS NULL THEN updated WHEN updated IS NULL THEN excluded.updated
                ELSE max(updated, excluded.updated) END
            """)
        let forgetDeletion = try RawStatement(connection, "DELETE FROM \(deletedTable) WHERE id = ?")
        // No deletion recorded (the common case): new rows look for none.
        let hasDeletions = try RawStatement(connection, "SELECT 1 FROM \(deletedTable) LIMIT 1").step()
        // The ids this import recorded deletions of (a later feature of the feed may be of one): looked up
        // here rather than in the table, so that a first import does not look every new row up there.
        var recordedDeletions: Set<String> = []
        let fingerprintColumn = Int32(columns.count - 1)

        var summary = ImportSummary()
        // Fingerprints made with another key (a feed parsed without this store) are not stored: a row's
        // fingerprint must be one a later parse for this store can make (the invariant of `FeatureFingerprint`).
        let keepsFingerprints = try Self.fingerprintKey(db) == feed.fingerprintKey
        let latest = Self.latestKnownUpdated()
        // The mark of the rows this import adds or changes (taken under the write lock: above every mark
        // committed before it).
        let mark = try Self.nextMark(db)
        let lastIndex = Self.lastIndexByID(feed, summary: &summary, latest: latest)
        let hasDuplicates = summary.duplicates > 0
        // Into an empty table (a first import), with no id twice, every row is new: no lookups.
        let wasEmpty = try !RawStatement(connection, "SELECT 1 FROM earthquake LIMIT 1").step()
        // A big first import builds the secondary indexes afterwards from sorted keys, rather than inserting
        // every row into them in random order; in the same transaction, so no reader ever sees them missing.
        let rebuiltIndexes = wasEmpty && feed.count >= rebuildIndexesMinimum ? try dropSecondaryIndexes(db) : []
        var position = 0

        /// Imports one event; returns whether it now stands for the event: stored under its id (written,
        /// unchanged, or kept as a newer copy) or its deletion applied — then its earlier ids are merged
        /// into it. (Not when a recorded deletion kept it out, nor for a deletion older than the copy.)
        @discardableResult
        func importDecoded(_ quake: Earthquake, fingerprint: FeatureFingerprint?) throws -> Bool {
            // An `updated` time more than a day ahead of now is no clock's reading (the seconds bug of older
            // versions stored 1.6e15, the year 52 000): it is stored as given, but it wins and blocks no
            // comparison — so a machine whose clock is behind loses only that protection, never data.
            var found = false
            if !wasEmpty {
                select.bind(text: quake.id, at: 1)
                found = try select.step()
            }
            // An older copy of an event (its `updated` time before the stored one's) never replaces a
            // newer one: the stored row is kept, and counted as unchanged. So does a copy without an
            // `updated` time (a rewritten or trimmed feed): it ranks below any copy with one, as within a
            // feed, rather than wiping the stored row's fields it lacks. A time beyond any clock is unknown:
            // a stored one blocks nothing, an incoming one wins nothing.
            if found, let stored = select.int64(orNilAt: updatedColumn), stored <= latest,
                quake.updated.flatMap({ $0.usgsMilliseconds <= latest ? $0.usgsMilliseconds < stored : nil })
                    ?? !quake.isDeleted
            {
                select.reset()
                if quake.isDeleted {
                    summary.deleted += 1
                } else {
                    if !quake.isEarthquakeType { summary.otherTypes[quake.normalizedType, default: 0] += 1 }
                    summary.unchanged += 1
                }
                return !quake.isDeleted
            }
            // An event the USGS marks deleted is not stored, and a stored copy of it is removed; the deletion
            // is recorded, with its time when it is a clock's reading.
            if quake.isDeleted {
                select.reset()
                summary.deleted += 1
                recordDeletion.bind(text: quake.id, at: 1)
                let time = quake.updated?.usgsMilliseconds
                recordDeletion.bind(time.flatMap { $0 <= latest ? $0 : nil }, at: 2)
                _ = try recordDeletion.step()
                recordDeletion.reset()
                recordedDeletions.insert(quake.id)
                if found {
                    delete.bind(text: quake.id, at: 1)
                    _ = try delete.step()
                    delete.reset()
                    summary.removed += 1
                }
                return true
            }
            if !quake.isEarthquakeType { summary.otherTypes[quake.normalizedType, default: 0] += 1 }
            // A new row of an event the USGS deleted: stored again only by a copy newer than the deletion.
            if !found, hasDeletions || recordedDeletions.contains(quake.id) {
                deletion.bind(text: quake.id, at: 1)
                if try deletion.step() {
                    let deleted = deletion.int64(orNilAt: 0)
                    deletion.reset()
                    let incoming = quake.updated.map(\.usgsMilliseconds).flatMap { $0 <= latest ? $0 : nil }
                    let newer = incoming.map { time in deleted.map { time > $0 } ?? true } ?? false
                    guard newer else {
                        select.reset()
                        summary.unchanged += 1
                        return false
                    }
                    forgetDeletion.bind(text: quake.id, at: 1)
                    _ = try forgetDeletion.step()
                    forgetDeletion.reset()
                } else {
                    deletion.reset()
                }
            }
            let same = found && select.matches(quake, from: 0)
            let refingerprint = same && fingerprint != nil && select.fingerprint(at: fingerprintColumn) != fingerprint
            select.reset()
            if same {
                summary.unchanged += 1
                if refingerprint, let fingerprint {
                    // Same values from other bytes: remember these bytes, so the next import skips them.
                    fingerprintOnly.bind(fingerprint, at: 1)
                    fingerprintOnly.bind(text: quake.id, at: 2)
                    _ = try fingerprintOnly.step()
                    fingerprintOnly.reset()
                }
            } else if found {
                update.bind(quake, from: 1, skippingID: true)
                update.bind(fingerprint, at: Int32(columns.count))
                update.bind(mark, at: Int32(columns.count + 1))
                update.bind(text: quake.id, at: Int32(columns.count + 2))
                _ = try update.step()
                update.reset()
                summary.updated += 1
            } else {
                insert.bind(quake, from: 1, skippingID: false)
                insert.bind(fingerprint, at: Int32(columns.count + 1))
                insert.bind(mark, at: Int32(columns.count + 2))
                insert.bind(mark, at: Int32(columns.count + 3))
                _ = try insert.step()
                insert.reset()
                summary.inserted += 1
            }
            return true
        }

        // The rows stored under an event's earlier ids (the feed's `ids` lists them: the USGS changes an
        // event's preferred id when another network's solution is preferred) are the same event: removed
        // (also when the event is deleted), unless the stored copy is the newer one — or has a time when
        // this copy has none. Each earlier id is remembered as a deletion is, with the newer of the two
        // times, so an older copy under it (an older feed imported again) is not stored again, while a
        // newer one (the USGS preferring that id again) is.
        // A watch's alerts of the event under an earlier id move to its id: an alert queued is delivered
        // once, under the new id, and an event alerted (or known when the watch started) is not news again
        // because its id changed (a watch alerts once per event and id).
        let alertsMoves: (drop: RawStatement, move: RawStatement)? =
            try Self.hasTable("earthquake_alert", db)
            ? (
                try RawStatement(
                    connection,
                    "DELETE FROM earthquake_alert WHERE id = ?1 AND watch IN (SELECT watch FROM earthquake_alert WHERE id = ?2)"
                ),
                try RawStatement(connection, "UPDATE earthquake_alert SET id = ?2 WHERE id = ?1")
            ) : nil

        func mergeEarlierIDs(of quake: Earthquake) throws {
            guard !quake.otherIDs.ids.isEmpty else { return }
            let incoming = quake.updated?.usgsMilliseconds
            for other in quake.otherIDs.ids {
                select.bind(text: other, at: 1)
                let found = try select.step()
                let stored = found ? select.int64(orNilAt: updatedColumn) : nil
                select.reset()
                if found {
                    if let stored, stored <= latest, incoming.map({ $0 <= latest && stored > $0 }) ?? true { continue }
                    delete.bind(text: other, at: 1)
                    _ = try delete.step()
                    delete.reset()
                    summary.merged += 1
                }
                // Remembered even when nothing is stored under it: a later feature of this feed, or a
                // later import of an older feed, may bring a copy under the earlier id.
                let times = [incoming, stored].compactMap { $0 }.filter { $0 <= latest }
                recordDeletion.bind(text: other, at: 1)
                recordDeletion.bind(times.max(), at: 2)
                _ = try recordDeletion.step()
                recordDeletion.reset()
                recordedDeletions.insert(other)
                if let alertsMoves, found {
                    for statement in [alertsMoves.drop, alertsMoves.move] {
                        statement.bind(text: other, at: 1)
                        statement.bind(text: quake.id, at: 2)
                        _ = try statement.step()
                        statement.reset()
                    }
                }
            }
        }

        try feed.forEachEntry { entry in
            defer { position += 1 }
            // A cancel is noticed within a few hundred rows (a few milliseconds), and rolls everything back.
            if position & 255 == 1 {
                if position == 1 { TestPause.at("import-started") }
                if gate?.isCancelled == true { throw CancellationError() }
            }
            switch entry {
            case .decoded(let index):
                let quake = feed.decoded[index]
                guard !hasDuplicates || lastIndex[quake.id] == position else { return }
                do {
                    let fingerprint = feed.fingerprints.isEmpty || !keepsFingerprints ? nil : feed.fingerprints[index]
                    if try importDecoded(quake, fingerprint: fingerprint) { try mergeEarlierIDs(of: quake) }
                } catch {
                    throw RowFailure(index: position, id: quake.id, underlying: error)
                }
            case .pending(let index):
                let pending = feed.pending[index]
                guard !hasDuplicates || lastIndex[pending.known.id] == position else { return }
                do {
                    // The row found by its rowid has the fingerprint: then it is this feature's row (the same
                    // bytes have the same id) and holds exactly its values.
                    storedFingerprint.bind(pending.known.rowid, at: 1)
                    let still =
                        try storedFingerprint.step() && storedFingerprint.fingerprint(at: 0) == pending.fingerprint
                    storedFingerprint.reset()
                    if still {
                        let type = Earthquake.normalizedType(pending.known.type)
                        if type != Earthquake.defaultType { summary.otherTypes[type, default: 0] += 1 }
                        summary.unchanged += 1
                    } else {
                        let quake = try feed.decode(pending)
                        if try importDecoded(quake, fingerprint: pending.fingerprint) {
                            try mergeEarlierIDs(of: quake)
                        }
                    }
                } catch {
                    throw RowFailure(index: position, id: pending.known.id, underlying: error)
                }
            }
        }
        for sql in rebuiltIndexes { try db.execute(sql: sql) }
        return summary
    }

    /// The latest `updated` time (milliseconds) an import believes: a day after now. Later ones are no
    /// clock's reading, and count as unknown.
    static func latestKnownUpdated(now: Date = Date()) -> Int64 {
        now.usgsMilliseconds + 86_400_000
    }

    /// The names of the earthquake table's indexes other than its primary key's, sorted (tests).
    func secondaryIndexNames() throws(StoreError) -> [String] {
        try read("list the indexes of") { db in
            try String.fetchAll(
                db,
                sql:
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'earthquake' AND sql IS NOT NULL ORDER BY name"
            )
        }
    }

    /// From how many rows a first import drops and rebuilds the secondary indexes.
    static let rebuildIndexesMinimum = 10_000

    /// Drops the earthquake table's indexes other than its primary key's; returns the statements that make
    /// them again.
    private static func dropSecondaryIndexes(_ db: Database) throws -> [String] {
        let indexes = try Row.fetchAll(
            db,
            sql:
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'earthquake' AND sql IS NOT NULL"
        )
        for index in indexes {
            let name: String = index["name"]
            try db.execute(sql: "DROP INDEX \(name.quotedDatabaseIdentifier)")
        }
        return indexes.map { $0["sql"] }
    }

    /// The position of the earthquake imported for each id of `feed`; counts the others as duplicates.
    /// (Empty when no id repeats: then every earthquake is imported.)
    ///
    /// Among the features of one id, the newest copy wins, by an explicit ranking: the latest known
    /// `updated` time wins; copies without one (or with one after `latest`, no clock's reading) rank
    /// below every copy with one; on a tie, the last copy wins.
    static func lastIndexByID(
        _ feed: Feed, summary: inout ImportSummary, latest: Int64 = .max
    ) -> [String: Int] {
        var lastIndex: [String: Int] = [:]
        lastIndex.reserveCapacity(feed.count)
        var repeated: Set<String> = []
        var position = 0
        feed.forEachEntry { entry in
            let id: String
            switch entry {
            case .decoded(let index): id = feed.decoded[index].id
            case .pending(let index): id = feed.pending[index].known.id
            }
            if lastIndex.updateValue(position, forKey: id) != nil {
                summary.duplicates += 1
                if repeated.insert(id).inserted { summary.duplicateIDs.append(id) }
            }
            position += 1
        }
        guard summary.duplicates > 0 else { return [:] }
        // Only for the repeated ids: their copies' `updated` times (a pending feature is decoded for it).
        var chosen: [String: (position: Int, updated: Int64?)] = [:]
        position = 0
        feed.forEachEntry { entry in
            defer { position += 1 }
            let id: String
            let updated: Int64?
            switch entry {
            case .decoded(let index):
                id = feed.decoded[index].id
                guard repeated.contains(id) else { return }
                updated = feed.decoded[index].updated?.usgsMilliseconds
            case .pending(let index):
                id = feed.pending[index].known.id
                guard repeated.contains(id) else { return }
                updated = (try? feed.decode(feed.pending[index]))?.updated?.usgsMilliseconds
            }
            let known = updated.flatMap { $0 <= latest ? $0 : nil }
            // (`nil` ranks below every time: Optional's order is not used, to say it plainly.)
            if let current = chosen[id], let old = current.updated, (known.map { $0 < old } ?? true) { return }
            chosen[id] = (position, known)
        }
        for (id, choice) in chosen { lastIndex[id] = choice.position }
        return lastIndex
    }

    /// The store's rows that have a fingerprint, by fingerprint: what ``FeedParser/parse(_:known:)`` needs
    /// to skip decoding the features the store already holds. Read in one pass over the table.
    ///
    /// - Throws: ``StoreError`` with code ``StoreError/Code/read``.
    func knownFeatures() throws(StoreError) -> KnownFeatures {
        try read("read the fingerprints of") { db in
            // No key (a database of an older version, opened read-only): nothing is known, nothing stored.
            guard let key = try Self.fingerprintKey(db) else { return KnownFeatures() }
            let statement = try RawStatement(
                db.sqliteConnection,
                "SELECT fingerprint, id, type, network, rowid FROM earthquake WHERE fingerprint IS NOT NULL "
                    // A row an older version stored although the USGS marked it deleted is decoded again
                    // (and removed), not skipped as known.
                    + "AND (status IS NULL OR status != 'deleted')")
            var entries: [(fingerprint: FeatureFingerprint, feature: KnownFeature)] = []
            while try statement.step() {
                guard let fingerprint = statement.fingerprint(at: 0), let id = statement.text(at: 1) else { continue }
                entries.append(
                    (
                        fingerprint,
                        KnownFeature(
                            rowid: statement.int64(at: 4), id: id, type: statement.text(at: 2),
                            network: statement.text(at: 3))
                    ))
            }
            return KnownFeatures(entries, key: key)
        }
    }

    /// The key of the store's fingerprints (see ``FingerprintKey``), or `nil` in a database of an older
    /// version that has none yet.
    static func fingerprintKey(_ db: Database) throws -> FingerprintKey? {
        guard try db.tableExists(fingerprintKeyTable) else { return nil }
        let statement = try RawStatement(db.sqliteConnection, "SELECT key FROM \(fingerprintKeyTable) LIMIT 1")
        guard try statement.step() else { return nil }
        return statement.key(at: 0)
    }

    /// Parses a feed for an import into this store: the features it holds exactly (by fingerprint) are not
    /// decoded (see ``FeedParser``'s `parse(_:known:)`), and the others are fingerprinted with its key. When
    /// the fingerprints cannot be read, the feed is parsed in full (the import then says what is wrong).
    ///
    /// `isCancelled` stops the parse within a few hundred features once it says yes: the parse then throws
    /// `CancellationError`.
    package func parseForImport(
        _ data: Data, parser: FeedParser, isCancelled: (@Sendable () -> Bool)? = nil
    ) throws -> Feed {
        try parser.parseStoppable(data, known: (try? knownFeatures()) ?? KnownFeatures(), isCancelled: isCancelled)
    }
}
/// A prepared SQLite statement used directly: for the import's inner loop, where GRDB's conveniences
/// (argument arrays, rows) cost more than the database work. Finalized when released.
private final class RawStatement {
    private let connection: OpaquePointer?
    private let handle: OpaquePointer?
    /// Tells SQLite to copy bound text.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(_ connection: OpaquePointer?, _ sql: String) throws {
        self.connection = connection
        var handle: OpaquePointer?
        let code = sqlite3_prepare_v2(connection, sql, -1, &handle, nil)
        guard code == SQLITE_OK else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)), sql: sql)
        }
        self.handle = handle
    }

    deinit { sqlite3_finalize(handle) }

    /// `true` for a row, `false` when done.
    func step() throws -> Bool {
        let code = sqlite3_step(handle)
        if code == SQLITE_ROW { return true }
        if code == SQLITE_DONE { return false }
        let extended = sqlite3_extended_errcode(connection)
        throw DatabaseError(
            resultCode: ResultCode(rawValue: extended), message: String(cString: sqlite3_errmsg(connection)))
    }

    /// Makes the statement ready to run again. Its parameters keep their values (every use binds every
    /// parameter): SQLite then reuses each text parameter's buffer instead of freeing it and allocating
    /// it again for the next row.
    func reset() {
        sqlite3_reset(handle)
    }

    func bind(text: String?, at position: Int32) {
        guard var text else {
            sqlite3_bind_null(handle, position)
            return
        }
        // The string's own UTF-8 bytes with their length (SQLite copies them): passing the `String` itself
        // would make a NUL-terminated copy of it first, one allocation per column and row.
        text.withUTF8 { utf8 in
            if let start = utf8.baseAddress {
                _ = start.withMemoryRebound(to: CChar.self, capacity: utf8.count) { characters in
                    sqlite3_bind_text(handle, position, characters, Int32(utf8.count), Self.transient)
                }
            } else {
                sqlite3_bind_text(handle, position, "", 0, Self.transient)
            }
        }
    }

    func bind(_ fingerprint: FeatureFingerprint?, at position: Int32) {
        guard let fingerprint else {
            sqlite3_bind_null(handle, position)
            return
        }
        fingerprint.withBlob { blob in
            _ = sqlite3_bind_blob(handle, position, blob.baseAddress, Int32(blob.count), Self.transient)
        }
    }

    /// The fingerprint in column `column` of the current row; `nil` for NULL or one of another version.
    func fingerprint(at column: Int32) -> FeatureFingerprint? {
        guard sqlite3_column_type(handle, column) == SQLITE_BLOB, let bytes = sqlite3_column_blob(handle, column) else {
            return nil
        }
        return FeatureFingerprint(
            blob: UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))))
    }

    /// The integer in column `column` of the current row.
    func int64(at column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    /// The fingerprint key in column `column` of the current row; `nil` for another size.
    func key(at column: Int32) -> FingerprintKey? {
        guard sqlite3_column_type(handle, column) == SQLITE_BLOB, let bytes = sqlite3_column_blob(handle, column) else {
            return nil
        }
        return FingerprintKey(
            blob: UnsafeRawBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))))
    }

    /// The integer in column `column` of the current row; `nil` for NULL.
    func int64(orNilAt column: Int32) -> Int64? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, column)
    }

    func bind(_ value: Int64, at position: Int32) { sqlite3_bind_int64(handle, position, value) }

    /// The text in column `column` of the current row; `nil` for NULL.
    func text(at column: Int32) -> String? {
        guard sqlite3_column_type(handle, column) != SQLITE_NULL, let text = sqlite3_column_text(handle, column) else {
            return nil
        }
        return String(
            decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, column))), as: UTF8.self)
    }

    private func bind(_ value: Double?, at position: Int32) {
        if let value { sqlite3_bind_double(handle, position, value) } else { sqlite3_bind_null(handle, position) }
    }

    func bind(_ value: Int64?, at position: Int32) {
        if let value { sqlite3_bind_int64(handle, position, value) } else { sqlite3_bind_null(handle, position) }
    }

    /// Binds the columns of ``Earthquake/columns`` (without the id when `skippingID`) from `first` on.
    func bind(_ quake: Earthquake, from first: Int32, skippingID: Bool) {
        var position = first
        func next() -> Int32 {
            defer { position += 1 }
            return position
        }
        if !skippingID { bind(text: quake.id, at: next()) }
        bind(quake.latitude, at: next())
        bind(quake.longitude, at: next())
        bind(quake.depth, at: next())
        bind(quake.magnitude, at: next())
        bind(text: quake.magnitudeType, at: next())
        bind(text: quake.place, at: next())
        bind(quake.time?.usgsMilliseconds, at: next())
        bind(quake.updated?.usgsMilliseconds, at: next())
        bind(quake.timeZoneOffset.map(Int64.init), at: next())
        bind(text: quake.url, at: next())
        bind(text: quake.detailURL, at: next())
        bind(quake.felt.map(Int64.init), at: next())
        bind(quake.cdi, at: next())
        bind(quake.mmi, at: next())
        bind(text: quake.alert, at: next())
        bind(text: quake.status?.lowercased(), at: next())
        bind(quake.tsunami.map { $0 ? Int64(1) : Int64(0) }, at: next())
        bind(quake.significance.map(Int64.init), at: next())
        bind(text: quake.network, at: next())
        bind(text: quake.code, at: next())
        bind(text: Earthquake.storedType(quake.type), at: next())
        bind(text: quake.title, at: next())
    }

    /// Whether the current row (the columns after the id, from column `first`) holds exactly what
    /// binding `quake` would store.
    func matches(_ quake: Earthquake, from first: Int32) -> Bool {
        var column = first
        func next() -> Int32 {
            defer { column += 1 }
            return column
        }
        func same(_ value: Double?) -> Bool {
            let index = next()
            guard let value else { return sqlite3_column_type(handle, index) == SQLITE_NULL }
            return sqlite3_column_type(handle, index) == SQLITE_FLOAT && sqlite3_column_double(handle, index) == value
        }
        func same(_ value: Int64?) -> Bool {
            let index = next()
            guard let value else { return sqlite3_column_type(handle, index) == SQLITE_NULL }
            return sqlite3_column_type(handle, index) == SQLITE_INTEGER && sqlite3_column_int64(handle, index) == value
        }
        func same(_ value: String?) -> Bool {
            let index = next()
            guard let value else { return sqlite3_column_type(handle, index) == SQLITE_NULL }
            guard sqlite3_column_type(handle, index) == SQLITE_TEXT, let text = sqlite3_column_text(handle, index)
            else { return false }
            let length = Int(sqlite3_column_bytes(handle, index))
            var utf8 = value
            return utf8.withUTF8 { mine in
                mine.count == length && (length == 0 || memcmp(mine.baseAddress!, text, length) == 0)
            }
        }
        return same(quake.latitude) && same(quake.longitude) && same(quake.depth) && same(quake.magnitude)
            && same(quake.magnitudeType) && same(quake.place) && same(quake.time?.usgsMilliseconds)
            && same(quake.updated?.usgsMilliseconds) && same(quake.timeZoneOffset.map(Int64.init))
            && same(quake.url) && same(quake.detailURL) && same(quake.felt.map(Int64.init)) && same(quake.cdi)
            && same(quake.mmi) && same(quake.alert) && same(quake.status?.lowercased())
            && same(quake.tsunami.map { $0 ? Int64(1) : Int64(0) }) && same(quake.significance.map(Int64.init))
            && same(quake.network) && same(quake.code) && same(Earthquake.storedType(quake.type))
            && same(quake.title)
    }
}
