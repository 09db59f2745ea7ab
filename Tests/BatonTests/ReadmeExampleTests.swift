import Baton
import Foundation
import Testing

/// Runs the README's first example and checks that the README still shows this exact code.
@Suite(.timeLimit(.minutes(1))) struct ReadmeExampleTests {
    @Test func theReadmeExampleRunsAndSucceeds() async {
        // README example begins
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
        // README example ends
        #expect(outcome.isSucceeded)
        #expect(download.outcomeIfDecided?.isSucceeded == true)
    }

    @Test func theReadmeShowsTheCodeThatThisTestRuns() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        let body = source.components(separatedBy: "// README example begins\n")[1]
            .components(separatedBy: "        // README example ends")[0]
        let tested = body.split(separator: "\n").map { $0.dropFirst(8) }.joined(separator: "\n")
        #expect(readme.contains("import Baton\n\n" + tested + "\n```"))
    }
}
