import Baton
import Dispatch

/// `async`: n jobs with `async` bodies (a non-suspending call of an opaque `async` function that adds
/// one to an atomic counter). Baton: ``AsyncJob``s at default width, waited for from the main thread.
/// Swift concurrency: one child task each in a `withTaskGroup`.
enum AsyncWorkload {
    static var async: Workload {
        Workload(
            name: "async",
            summary: "n jobs with a trivial async body (AsyncJob vs withTaskGroup child tasks), default width",
            runners: [.baton: baton, .taskgroup: taskGroup]
        )
    }

    static func baton(_ n: Int) -> Sample {
        let counter = Counter()
        var sample = measure {
            let queue = JobQueue(name: "async")
            for _ in 0..<n { queue.add(AsyncJob { _ in await trivialAsyncBody(counter) }) }
            queue.waitUntilAllJobsAreFinished()
            return queue
        }
        sample.problem = counter.check(n)
        return sample
    }

    static func taskGroup(_ n: Int) -> Sample {
        let counter = Counter()
        var sample = measure {
            blockingWait {
                await withTaskGroup(of: Void.self) { group in
                    for _ in 0..<n { group.addTask { await trivialAsyncBody(counter) } }
                }
            }
        }
        sample.problem = counter.check(n)
        return sample
    }
}
