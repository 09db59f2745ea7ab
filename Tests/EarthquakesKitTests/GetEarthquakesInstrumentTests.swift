import Baton
import BatonTesting
import EarthquakesKit
import Foundation
import Testing

/// A refresh can be watched: the instruments given see every job of it.
@Suite struct GetEarthquakesInstrumentTests {
    final class Names: JobInstrument {
        let finished = Recorder<String>()
        func jobDidFinish(_ job: Job, in queue: JobQueue, outcome: JobOutcome) {
            finished.record("\(queue.name): \(outcome.didSucceed ? "ok" : "not ok")")
        }
    }

    @Test func theInstrumentsGivenSeeEveryJobOfARefresh() async throws {
        let names = Names()
        let store = try EarthquakeStore.inMemory()
        let get = GetEarthquakes(
            source: .data(SampleFeed.data, label: "sample"), store: store, instruments: [names])
        let summary = try await get.run()
        #expect(summary.total == SampleFeed.defaultCount)
        let seen = names.finished.values
        #expect(seen.count >= 2, "parse and import at least: \(seen)")
        #expect(seen.allSatisfy { $0.hasSuffix(": ok") }, "\(seen)")
        // The refresh's own queue; a group's children have a queue of their own.
        #expect(seen.contains("get earthquakes: ok"), "\(seen)")
    }
}
