// The README's blocks (SnippetRunTests runs the first example).

// snippet: first-example
import Baton

// end snippet

/// The README's first example (SnippetRunTests runs it): the download job and the parse job's outcome.
func readmeFirstExample() async -> (download: BlockJob, outcome: JobOutcome) {
    // snippet: first-example
    let queue = JobQueue(name: "import", maxConcurrentJobs: 4)
    let download = BlockJob(name: "download") { print("downloading") }
    let parse = AsyncJob(name: "parse") { job in
        guard !job.isCancelled else { throw CancellationError() }
        print("parsing")
    }
    parse.addDependency(download)
    parse.onFinish { outcome in print("parse finished: \(outcome)") }
    queue.add([download, parse])
    let outcome = await parse.outcome  // async callers; synchronous ones use waitUntilFinished()
    print(outcome)  // "succeeded"
    // end snippet
    return (download, outcome)
}
