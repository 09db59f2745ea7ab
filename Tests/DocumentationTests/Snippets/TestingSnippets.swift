import BatonTesting
import Foundation

// The example of `ProcessExit`'s documentation (a doc comment: compiled here, not checked by
// SnippetTests, which reads the articles).
func processExitExample() async throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/true")
    let exit = ProcessExit(process)
    try process.run()
    let status = await exit.status()
    return status
}
