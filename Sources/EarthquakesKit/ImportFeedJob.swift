public import Baton

/// A job that imports earthquakes into an ``EarthquakeStore`` with ``EarthquakeStore/importFeed(_:)-([Earthquake])``,
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
/// runs at a time across all queues of an ``ExclusivityScope`` (the database serialises writes anyway;
/// the category also keeps imports in the order they became ready and lets a caller wait its turn
/// without holding a database connection or a thread).
///
/// The job fails with the ``StoreError`` of the store; the database is then exactly as it was.
///
/// ## Thread safety
/// Every property may be read from any thread; the job's state is guarded by a lock, and the
/// `willImport` closure is called without holding it.
public final class ImportFeedJob: Job, @unchecked Sendable {
    // @unchecked Sendable: `store` is immutable; the other stored properties are guarded by `lock`.

    /// The store that receives the earthquakes.
    public let store: EarthquakeStore
    private let lock = Lock()
    private var source: (@Sendable () throws -> [Earthquake])?
    private var willImport: (@Sendable (Int) -> Void)?
    private var storedSummary: ImportSummary?

    /// Creates a job that imports the earthquakes that `earthquakes` returns when the job runs.
    ///
    /// - Parameters:
    ///   - earthquakes: Called once, when the job runs; throw to fail the job.
    ///   - willImport: Called with the number of earthquakes just before the transaction starts.
    public init(
        name: String? = nil,
        store: EarthquakeStore,
        earthquakes: @escaping @Sendable () throws -> [Earthquake],
        willImport: (@Sendable (Int) -> Void)? = nil
    ) {
        self.store = store
        self.source = earthquakes
        self.willImport = willImport
        super.init(name: name ?? "import earthquakes")
        addCondition(MutuallyExclusive<EarthquakeImport>())
    }

    /// Creates a job that imports the feed of `parse`, and makes it depend on `parse`. If `parse` did not
    /// succeed, this job finishes as cancelled without touching the store.
    public convenience init(
        name: String? = nil, store: EarthquakeStore, parse: ParseFeedJob, willImport: (@Sendable (Int) -> Void)? = nil
    ) {
        self.init(
            name: name, store: store,
            earthquakes: {
                guard let feed = parse.feed else { throw CancellationError() }
                return feed.earthquakes
            },
            willImport: willImport
        )
        addDependency(parse)
    }

    /// What the import did, once the job succeeded.
    public var summary: ImportSummary? { lock.withLock { storedSummary } }

    public override func execute() throws {
        let (source, willImport) = lock.withLock {
            defer { (self.source, self.willImport) = (nil, nil) }
            return (self.source, self.willImport)
        }
        guard let source, !isCancelled else { throw CancellationError() }
        let quakes = try source()
        willImport?(quakes.count)
        if isCancelled { throw CancellationError() }
        let summary = try store.importFeed(quakes)
        lock.withLock { storedSummary = summary }
    }
}

/// The exclusivity category of earthquake imports: one at a time (see ``ImportFeedJob``).
public enum EarthquakeImport {}
