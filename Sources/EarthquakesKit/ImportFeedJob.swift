public import Baton

/// A job that imports earthquakes into an ``EarthquakeStore`` with ``EarthquakeStore/importFeed(_:whileWaiting:commitGate:)-([Earthquake],_,_)``,
/// in one all-or-nothing transaction.
///
/// ```swift
/// let parse = ParseFeedJob(input: .file(feedFile))
/// let save = ImportFeedJob(store: store, parse: parse)    // depends on `parse`
/// queue.add([parse, save])
/// try await save.outcome.get()
/// print(save.summary!)   // "40 earthquakes: 40 inserted, 0 updated, 0 unchanged"
/// ```
///
/// Every import holds the ``EarthquakeImport`` exclusivity category while it runs, so only one import
/// runs at a time across all queues of an `ExclusivityScope` (the database serialises writes anyway;
/// the category also keeps imports in the order they became ready and lets a caller wait its turn
/// without holding a database connection or a thread).
///
/// The job fails with the ``StoreError`` of the store; the database is then exactly as it was.
///
/// A cancel that reaches the job while it imports rolls the import back (the job finishes cancelled)
/// unless the import had already begun to commit: ``commitGate`` decides, and tells the canceller which.
///
/// ## Thread safety
/// Every property may be read from any thread; the job's state is guarded by a lock, and the
/// `willImport` closure is called without holding it.
public final class ImportFeedJob: Job, @unchecked Sendable {
    // @unchecked Sendable: `store` is immutable; the other stored properties are guarded by `lock`.

    /// The store that receives the earthquakes.
    public let store: EarthquakeStore
    /// Decides between a cancel and the import's commit: ``ImportCommitGate/cancel()`` says whether the
    /// import rolls back or had already begun to commit. Cancelling the job cancels through it.
    public let commitGate = ImportCommitGate()
    private let lock = Lock()
    private var source: (@Sendable () throws -> Feed)?
    private var willImport: (@Sendable (Int) -> Void)?
    private var whileWaiting: (@Sendable () -> Void)?
    private var storedSummary: ImportSummary?

    /// Creates a job that imports the earthquakes that `earthquakes` returns when the job runs.
    ///
    /// - Parameters:
    ///   - name: Used in diagnostics and errors; "import earthquakes" by default.
    ///   - store: The database the earthquakes go into.
    ///   - earthquakes: Called once, when the job runs; throw to fail the job.
    ///   - willImport: Called with the number of earthquakes just before the transaction starts.
    ///   - whileWaiting: Called once if the import has to wait for another process that is writing to
    ///     the same database file (see ``EarthquakeStore``).
    public convenience init(
        name: String? = nil,
        store: EarthquakeStore,
        earthquakes: @escaping @Sendable () throws -> [Earthquake],
        willImport: (@Sendable (Int) -> Void)? = nil,
        whileWaiting: (@Sendable () -> Void)? = nil
    ) {
        self.init(
            name: name, store: store, source: { Feed(metadata: Feed.Metadata(), earthquakes: try earthquakes()) },
            willImport: willImport,
            whileWaiting: whileWaiting)
    }

    private init(
        name: String?,
        store: EarthquakeStore,
        source: @escaping @Sendable () throws -> Feed,
        willImport: (@Sendable (Int) -> Void)?,
        whileWaiting: (@Sendable () -> Void)?
    ) {
        self.store = store
        self.source = source
        self.willImport = willImport
        self.whileWaiting = whileWaiting
        super.init(name: name ?? "import earthquakes")
        addCondition(MutuallyExclusive<EarthquakeImport>())
    }

    /// Creates a job that imports the feed of `parse`, and makes it depend on `parse`. If `parse` did not
    /// succeed, this job finishes as cancelled without touching the store. The summary counts the
    /// features the parser skipped.
    public convenience init(
        name: String? = nil, store: EarthquakeStore, parse: ParseFeedJob, willImport: (@Sendable (Int) -> Void)? = nil,
        whileWaiting: (@Sendable () -> Void)? = nil
    ) {
        self.init(
            name: name, store: store,
            source: {
                guard let feed = parse.feed else { throw CancellationError() }
                return feed
            },
            willImport: willImport,
            whileWaiting: whileWaiting
        )
        addDependency(parse)
    }

    /// What the import did, once the job succeeded.
    public var summary: ImportSummary? { lock.withLock { storedSummary } }

    public override func execute() throws {
        let (source, willImport, whileWaiting) = lock.withLock {
            defer { (self.source, self.willImport, self.whileWaiting) = (nil, nil, nil) }
            return (self.source, self.willImport, self.whileWaiting)
        }
        guard let source, !isCancelled else { throw CancellationError() }
        let feed = try source()
        willImport?(feed.count)
        if isCancelled { throw CancellationError() }
        let summary: ImportSummary
        do {
            summary = try store.importFeed(feed, whileWaiting: whileWaiting, commitGate: commitGate)
        } catch {
            if error.code == .cancelled { throw CancellationError() }
            throw error
        }
        lock.withLock { storedSummary = summary }
    }

    public override func didCancel(reason: any Error) {
        commitGate.cancel()
    }
}

/// The exclusivity category of earthquake imports: one at a time (see ``ImportFeedJob``).
public enum EarthquakeImport {}
