import Foundation
package import GRDB

extension SQLiteJobStore {
    static func prepareSchema(_ db: Database, description: String) throws {
        try prepareVersionedSchema(db, description: description)
        try prepareReadIndexes(db)
    }

    /// Whether ``prepareSchema(_:description:)`` would change nothing: the schema is this version's and
    /// the read indexes are as it makes them. Read without the write lock, so that opening a store that
    /// needs nothing neither waits for another process's write (a `baton runs` during a long transaction
    /// failed after the busy timeout) nor writes to the file.
    static func isPrepared(_ db: Database) throws -> Bool {
        guard (try? storedSchemaVersion(db, description: "")) == schemaVersion else { return false }
        let indexes = Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index'"))
        return indexes.isSuperset(of: readIndexes) && indexes.isDisjoint(with: droppedIndexes)
    }

    /// The indexes ``prepareReadIndexes(_:)`` makes, and those it drops.
    static let readIndexes: Set = [
        "baton_jobs_run_name", "baton_jobs_run_wide_name", "baton_jobs_claim", "baton_jobs_waiting",
    ]
    static let droppedIndexes: Set = ["baton_jobs_ready", "baton_jobs_ready_kind", "baton_jobs_ready_start"]

    /// Indexes that only make reads faster, made when missing whatever the schema's version: a version
    /// is for what an older program would misread, and an older program reads these tables as before
    /// (SQLite keeps every index up to date on its writes too).
    ///
    /// - The names of a run's jobs, for the jobs a running job adds (``takenNames(_:run:among:)``):
    ///   reading every name of the run at each addition made a crawler's growing run quadratic.
    /// - The claimable jobs by kind, in the order claims take them (`baton_jobs_claim`), and the jobs
    ///   that wait for their time by kind and time (`baton_jobs_waiting`): a claim, its promotion of the
    ///   waiting jobs that are due (``promoteDue(_:kinds:limit:now:)``) and ``nextDueDate(kinds:)`` read only
    ///   the jobs of their kinds that matter. With one index of all ready jobs in priority order
    ///   (`baton_jobs_ready`, dropped here), a worker with nothing to do read past every ready job of
    ///   every other kind at each look: 100,000 of them took 19 ms. With the waiting jobs in the claims'
    ///   index (`baton_jobs_ready_kind` and `baton_jobs_ready_start`, versions 4 and earlier, dropped
    ///   here), a claim read past every retry of its kind that was backing off.
    static func prepareReadIndexes(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE INDEX IF NOT EXISTS baton_jobs_run_name ON baton_jobs(run, name);
                CREATE INDEX IF NOT EXISTS baton_jobs_run_wide_name ON baton_jobs(run)
                    WHERE length(name) <> length(CAST(name AS BLOB));
                CREATE INDEX IF NOT EXISTS baton_jobs_claim ON baton_jobs(kind, priority DESC, id)
                    WHERE state = 'ready' AND waiting = 0;
                CREATE INDEX IF NOT EXISTS baton_jobs_waiting ON baton_jobs(kind, not_before)
                    WHERE state = 'ready' AND waiting = 1;
                DROP INDEX IF EXISTS baton_jobs_ready;
                DROP INDEX IF EXISTS baton_jobs_ready_kind;
                DROP INDEX IF EXISTS baton_jobs_ready_start;
                """)
    }

    /// The schema version the file records: nil when it holds no store (no `baton_durable_meta`), 0 for
    /// a store of before versions were recorded.
    /// - Throws: ``DurableError/Code/notAStore`` for a value no BatonDurable writes ("abc", "5.0", a
    ///   blob): read as 0, it made an upgrade fail with "duplicate column name".
    package static func storedSchemaVersion(_ db: Database, description: String) throws -> Int? {
        guard try db.tableExists("baton_durable_meta") else { return nil }
        guard
            let value = try DatabaseValue.fetchOne(db, sql: "SELECT value FROM baton_durable_meta WHERE key = 'schema'")
        else { return 0 }
        switch value.storage {
        case .int64(let number): return Int(number)
        case .string(let text) where Int(text) != nil: return Int(text)
        default:
            throw DurableError(
                code: .notAStore,
                message:
                    "the job store at '\(description)' records its schema version as \(value), which no BatonDurable writes: its table baton_durable_meta was changed by hand or damaged. Set the value back (\(schemaVersion) for a store of this version), restore the file from a copy, or move it away to start a new store."
            )
        }
    }

    private static func prepareVersionedSchema(_ db: Database, description: String) throws {
        var found = 0
        if let version = try storedSchemaVersion(db, description: description) {
            found = version
            if version > schemaVersion {
                throw DurableError(
                    code: .newerSchema,
                    message:
                        "the job store at '\(description)' has schema version \(version), written by a newer BatonDurable (this one knows version \(schemaVersion)). Upgrade this program; the store was not changed."
                )
            }
            if version == schemaVersion { return }
        }
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS baton_durable_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS baton_runs (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL,
                    unique_key TEXT UNIQUE,
                    created REAL NOT NULL,
                    finished REAL,
                    unfinished INTEGER NOT NULL
                );
                CREATE INDEX IF NOT EXISTS baton_runs_finished ON baton_runs(finished) WHERE finished IS NOT NULL;
                CREATE TABLE IF NOT EXISTS baton_jobs (
                    id INTEGER PRIMARY KEY,
                    run INTEGER NOT NULL REFERENCES baton_runs(id) ON DELETE CASCADE,
                    idx INTEGER NOT NULL,
                    name TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    state TEXT NOT NULL,
                    input BLOB,
                    input_from INTEGER,
                    remaining INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    max_attempts INTEGER NOT NULL,
                    retry TEXT NOT NULL,
                    priority INTEGER NOT NULL,
                    timeout REAL,
                    has_categories INTEGER NOT NULL,
                    not_before REAL NOT NULL,
                    lease_owner TEXT,
                    lease_token INTEGER,
                    lease_expires REAL,
                    cancel_request TEXT,
                    last_error TEXT,
                    output BLOB,
                    finished REAL
                );
                CREATE INDEX IF NOT EXISTS baton_jobs_running ON baton_jobs(lease_expires) WHERE state = 'running';
                CREATE INDEX IF NOT EXISTS baton_jobs_run ON baton_jobs(run, idx);
                CREATE TABLE IF NOT EXISTS baton_edges (
                    dependency INTEGER NOT NULL,
                    job INTEGER NOT NULL,
                    run_regardless INTEGER NOT NULL,
                    PRIMARY KEY (dependency, job)
                ) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS baton_edges_job ON baton_edges(job);
                CREATE TABLE IF NOT EXISTS baton_job_categories (
                    job INTEGER NOT NULL,
                    category TEXT NOT NULL,
                    max_holders INTEGER NOT NULL,
                    PRIMARY KEY (job, category)
                ) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS baton_holders (
                    category TEXT NOT NULL,
                    job INTEGER NOT NULL,
                    PRIMARY KEY (category, job)
                ) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS baton_holders_job ON baton_holders(job);
                CREATE TABLE IF NOT EXISTS baton_workers (
                    id TEXT PRIMARY KEY,
                    kinds TEXT NOT NULL,
                    expires REAL NOT NULL
                );
                """)
        if found < 2 {
            // Version 2: the submitter's trace context, kept with the run (NULL for older runs).
            try db.execute(sql: "ALTER TABLE baton_runs ADD COLUMN trace_context TEXT")
        }
        if found < 3 {
            // Version 3: what operators read. Each run counts its jobs and how many finished failed or
            // cancelled (kept by the statements that finish jobs, so that listing runs by state reads no
            // jobs), with indexes for the run list's filters; and the attempts that did not succeed, one
            // row each (a success is the job's own row). And runs that grow: the job that added a job,
            // and edges that wait for what their dependency adds. And schedules.
            try db.execute(
                sql: """
                    ALTER TABLE baton_runs ADD COLUMN jobs INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE baton_runs ADD COLUMN failed INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE baton_runs ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;
                    UPDATE baton_runs SET
                        jobs = (SELECT count(*) FROM baton_jobs j WHERE j.run = baton_runs.id),
                        failed = (SELECT count(*) FROM baton_jobs j WHERE j.run = baton_runs.id AND j.state = 'failed'),
                        cancelled = (SELECT count(*) FROM baton_jobs j WHERE j.run = baton_runs.id AND j.state = 'cancelled');
                    CREATE INDEX baton_runs_open ON baton_runs(id) WHERE finished IS NULL;
                    CREATE INDEX baton_runs_failed ON baton_runs(id) WHERE finished IS NOT NULL AND failed > 0;
                    CREATE INDEX baton_runs_cancelled ON baton_runs(id)
                        WHERE finished IS NOT NULL AND failed = 0 AND cancelled > 0;
                    CREATE INDEX baton_runs_name ON baton_runs(name, id);
                    CREATE INDEX baton_runs_created ON baton_runs(created);
                    ALTER TABLE baton_edges ADD COLUMN includes_added INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE baton_jobs ADD COLUMN added_by INTEGER;
                    CREATE TABLE baton_schedules (
                        name TEXT PRIMARY KEY,
                        definition TEXT NOT NULL,
                        next_tick REAL,
                        last_tick REAL,
                        paused INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE TABLE baton_attempts (
                        seq INTEGER PRIMARY KEY,
                        job INTEGER NOT NULL,
                        token INTEGER NOT NULL,
                        attempt INTEGER NOT NULL,
                        worker TEXT,
                        ended REAL NOT NULL,
                        outcome TEXT NOT NULL,
                        result TEXT NOT NULL,
                        error TEXT,
                        UNIQUE (job, token)
                    );
                    """)
        }
        if found < 4 {
            // Version 4: when each attempt started (its claim), for timelines of stored runs: kept on the job
            // while it runs, and with each attempt that ended. NULL for attempts recorded before.
            for table in ["baton_jobs", "baton_attempts"]
            where try !db.columns(in: table).contains(where: { $0.name == "started" }) {
                try db.execute(sql: "ALTER TABLE \(table) ADD COLUMN started REAL")
            }
        }
        if found < 5 {
            // Version 5: jobs that wait for their time (a retry backing off, a start date) are marked, and
            // kept out of the claims' index until they are due (`promoteDue`). An older program would
            // make retries claimable without clearing the mark's index, so it must not write this file.
            if try !db.columns(in: "baton_jobs").contains(where: { $0.name == "waiting" }) {
                try db.execute(sql: "ALTER TABLE baton_jobs ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0")
            }
            try db.execute(
                sql: "UPDATE baton_jobs SET waiting = 1 WHERE state IN ('pending', 'ready') AND not_before > 0")
        }
        try db.execute(
            sql: "INSERT OR REPLACE INTO baton_durable_meta (key, value) VALUES ('schema', ?)",
            arguments: [schemaVersion])
    }
}

extension Date {
    /// Seconds since 1970, as the store keeps times.
    var storeTime: Double { timeIntervalSince1970 }
    init(storeTime: Double) { self.init(timeIntervalSince1970: storeTime) }

    /// Throws ``DurableError/Code/misuse`` when the date is no point in time (NaN or infinite): stores
    /// compare such a time each their own way (PostgreSQL counts NaN above every number, SQLite reads it
    /// as NULL), so `prune(finishedBefore:)` given NaN would delete every finished run on one and none on
    /// the other. `call` names the call and its argument.
    package func checkStorable(in call: String) throws {
        guard !timeIntervalSince1970.isFinite else { return }
        // The seconds, not the date: describing a NaN date stops the program (FoundationEssentials traps).
        throw DurableError(
            code: .misuse,
            message:
                "\(call) was given \(timeIntervalSince1970) seconds since 1970, which is no point in time; give a real date. Nothing was changed."
        )
    }
}
