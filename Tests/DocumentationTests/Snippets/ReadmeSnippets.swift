// The README's blocks (its first example is also run by Tests/BatonTests/ReadmeExampleTests.swift).

// snippet: first-example
import Baton

// end snippet

/// The README's first example (Tests/BatonTests/ReadmeExampleTests.swift runs it).
func readmeFirstExample() async {
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
    _ = outcome
}
