import BatonTesting
import Foundation
import Testing

/// The test kit's `ChildProcess`: output from files, and a deadline of the process's own that kills it
/// and names the command.
@Suite(.timeLimit(.minutes(1))) struct ChildProcessTests {
    @Test func theOutputAndStatusComeBack() async throws {
        let run = try await ChildProcess.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "echo out; echo err >&2; exit 3"])
        #expect(run.status == 3)
        #expect(run.stdout == "out\n")
        #expect(run.stderr == "err\n")
    }

    @Test func aProcessPastItsLimitIsKilledAndNamed() async throws {
        let started = ContinuousClock.now
        var run: ChildRun?
        try await withKnownIssue {
            run = try await ChildProcess.run(URL(fileURLWithPath: "/bin/sleep"), ["30"], limit: .milliseconds(300))
        } matching: { issue in
            issue.description.contains("sleep 30 did not exit within")
        }
        #expect(run?.status == SIGKILL, "killed by the watchdog")
        #expect(ContinuousClock.now - started < .seconds(20), "not left to run its 30 s")
    }
}

/// `ProcessExit`: a task and a blocked thread waiting for the same exit both get its status, and a wait
/// that begins after the exit returns at once.
@Suite(.timeLimit(.minutes(1))) struct ProcessExitTests {
    @Test func aTaskAndAThreadBothGetTheStatus() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "read line; exit 3"]
        let input = Pipe()
        process.standardInput = input
        let exit = ProcessExit(process)
        try process.run()
        let blocked = Task { await offThePool { exit.wait() } }
        let waiting = Task { await exit.status() }
        #expect(!exit.hasExited)
        input.fileHandleForWriting.write(Data("go\n".utf8))  // the child exits once it has read a line
        #expect(await waiting.value == 3)
        #expect(await blocked.value == 3)
        #expect(exit.hasExited)
        #expect(await exit.status() == 3)
        #expect(exit.wait() == 3)
    }
}
