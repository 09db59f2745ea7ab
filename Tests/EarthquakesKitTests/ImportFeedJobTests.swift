import Baton
import BatonTesting
import EarthquakesKit
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1))) struct ImportFeedJobTests {
    @Test func importsTheFeedOfItsParseJob() async throws {
        let store = try EarthquakeStore.inMemory()
        let counts = Recorder<Int>()
        let parse = ParseFeedJob(input: .data(SampleFeed.data))
        let save = ImportFeedJob(store: store, parse: parse, willImport: { counts.record($0) })
        #expect(save.dependencies.count == 1)
        JobQueue().add([parse, save])
        #expect(await save.outcome.didSucceed)
        #expect(save.summary?.inserted == 40)
        #expect(save.summary?.total == 40)
        #expect(counts.values == [40])
        #expect(try store.count() == 40)
    }

    @Test func doesNothingWhenItsParseJobFailed() async throws {
        let store = try EarthquakeStore.inMemory()
        let parse = ParseFeedJob(input: .data(Data("not json".utf8)))
        let save = ImportFeedJob(store: store, parse: parse)
        JobQueue().add([parse, save])
        #expect(await save.outcome.isCancelled)
        #expect(save.summary == nil)
        #expect(try store.count() == 0)
    }

    @Test func aRefusedRowFailsWithTheStoreErrorAndChangesNothing() async throws {
        let store = try EarthquakeStore.inMemory()
        try store.importFeed(Quakes.all)
        let before = try store.list()
        let save = ImportFeedJob(
            store: store, earthquakes: { [Quakes.make("new"), Quakes.make("bad", latitude: 123)] })
        JobQueue().add(save)
        let error = try #require(await save.outcome.error as? StoreError)
        #expect(error.code == .write)
        #expect(try store.list() == before)
    }

    @Test func importsRunOneAtATimeEvenOnAWideQueue() async throws {
        let store = try EarthquakeStore.inMemory()
        let inside = ConcurrencyGauge()
        let jobs = (0..<8).map { index in
            ImportFeedJob(
                store: store, earthquakes: { [Quakes.make("q\(index)")] },
                willImport: { _ in
                    inside.enter()
                    for _ in 0..<10_000 { _ = inside.value }  // linger, so overlaps would show
                    inside.leave()
                })
        }
        #expect(jobs[0].conditions.map(\.name) == ["MutuallyExclusive(\(String(reflecting: EarthquakeImport.self)))"])
        let queue = JobQueue(maxConcurrentJobs: 8, exclusivityScope: ExclusivityScope(name: "imports"))
        queue.add(jobs)
        for job in jobs { #expect(await job.outcome.didSucceed) }
        #expect(inside.highest == 1)
        #expect(try store.count() == 8)
    }
}
