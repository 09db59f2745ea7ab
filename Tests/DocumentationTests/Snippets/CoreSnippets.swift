import Baton
import Testing

// Baton's DocC catalog.

func batonOverview(parseFeed: @escaping @Sendable () async throws -> Void) async {
    // snippet: baton-overview
    let queue = JobQueue(name: "import", maxConcurrentJobs: 4)
    let download = BlockJob(name: "download") { /* synchronous work */  }
    let parse = AsyncJob(name: "parse") { _ in try await parseFeed() }
    parse.addDependency(download)
    parse.onFinish { outcome in print(outcome) }
    queue.add([download, parse])
    let outcome = await parse.outcome
    // end snippet
    _ = outcome
}

// snippet: conditions
enum Alert {}
// end snippet

struct Session: Sendable {
    var isSignedIn: Bool
}

func conditions(session: Session, save: Job, showAlert: Job, download: Job, queue: JobQueue) {
    // snippet: conditions
    let signIn = ClosureCondition(name: "signed in") { _ in session.isSignedIn }  // answered at once, no Task
    save.addCondition(signIn)  // fails (no body runs) if not signed in
    showAlert.addCondition(MutuallyExclusive<Alert>())  // one alert at a time, across all queues
    download.addCondition(MutuallyExclusive(category: "downloads", limit: 2))
    print(queue.diagnose())
    // queue 'import': 2 unfinished, 0 running of at most 64
    //   - 'save' (pending) waits for dependencies 'sign in' (initialized, in no queue: add it to one …)
    //   - 'alert 2' (ready) waits for exclusivity category '…Alert' held by 'alert 1'
    // end snippet
}

func backPressure(
    lines: AsyncThrowingStream<String, any Error>, store: @escaping @Sendable (String) throws -> Void
)
    async throws
{
    // snippet: back-pressure
    let queue = JobQueue(name: "import", maxConcurrentJobs: 8, maxUnfinishedJobs: 10_000)
    for try await line in lines {
        try await queue.addWhenRoom(BlockJob(name: "store") { try store(line) })
    }
    await queue.waitUntilAllJobsAreFinished()
    // end snippet
}

func blockingQueue() -> JobQueue {
    // snippet: dedicated-threads
    let downloads = JobQueue(name: "downloads", maxConcurrentJobs: 8, workerThreads: .dedicated)
    // end snippet
    return downloads
}
