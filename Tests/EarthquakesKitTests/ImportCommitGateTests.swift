import BatonTesting
import Testing

@testable import EarthquakesKit

/// The decision between a cancel (Ctrl-C) and an import's commit, without threads.
@Suite("ImportCommitGate")
struct ImportCommitGateTests {
    @Test("a cancel before the commit began rolls the import back")
    func cancelFirst() {
        let gate = ImportCommitGate()
        #expect(gate.cancel() == .willRollBack)
        #expect(gate.isCancelled)
        #expect(!gate.beginCommit())
        #expect(!gate.hasCommitted)
        #expect(gate.cancel() == .willRollBack)  // asking again changes nothing
    }

    @Test("a cancel once the commit began is too late, before and after the commit returned")
    func commitFirst() {
        let gate = ImportCommitGate()
        #expect(gate.beginCommit())
        #expect(gate.cancel() == .tooLate)
        gate.endCommit(succeeded: true)
        #expect(gate.cancel() == .tooLate)
        #expect(gate.hasCommitted && !gate.isCancelled)
    }

    @Test("a failed commit changed nothing: a cancel after it is not too late")
    func failedCommit() {
        let gate = ImportCommitGate()
        #expect(gate.beginCommit())
        gate.endCommit(succeeded: false)
        #expect(!gate.hasCommitted)
        #expect(gate.cancel() == .willRollBack)
    }

    @Test("whenSettled runs at once, except during a commit: then when it returns, with its outcome")
    func whenSettled() {
        let settled = Recorder<ImportCommitGate.Settlement>()
        let gate = ImportCommitGate()
        gate.whenSettled { settled.record($0) }
        #expect(settled.values == [.notCommitted])
        #expect(gate.beginCommit())
        gate.whenSettled { settled.record($0) }
        gate.whenSettled { settled.record($0) }
        #expect(settled.values == [.notCommitted])  // waiting for the commit
        gate.endCommit(succeeded: true)
        #expect(settled.values == [.notCommitted, .committed, .committed])
        gate.whenSettled { settled.record($0) }
        #expect(settled.values.last == .committed)
    }
}
