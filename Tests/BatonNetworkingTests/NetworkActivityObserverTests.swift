import Baton
import BatonNetworking
import BatonTesting
import Testing

@Suite(.timeLimit(.minutes(1))) struct NetworkActivityObserverTests {
    @Test func countsJobsInFlightUpAndDown() async {
        let changes = Recorder<Int>()
        let activity = NetworkActivityObserver { changes.record($0) }
        let bothRunning = Gate()
        let release = Gate()
        let running = ConcurrencyGauge()
        let jobs = (0..<2).map { _ in
            AsyncJob { _ in
                if running.enter() == 2 { bothRunning.open() }
                await release.waitAsync()
            }
        }
        for job in jobs { job.addObserver(activity) }
        #expect(activity.activeCount == 0)

        JobQueue(maxConcurrentJobs: 2).add(jobs)
        await bothRunning.waitAsync()
        #expect(activity.activeCount == 2)
        release.open()
        for job in jobs { _ = await job.outcome }

        #expect(activity.activeCount == 0)
        #expect(changes.values.sorted() == [0, 1, 1, 2])
        #expect(changes.values.max() == 2)
    }

    @Test func aJobCancelledBeforeItStartedIsNeverCounted() async {
        let changes = Recorder<Int>()
        let activity = NetworkActivityObserver { changes.record($0) }
        let job = BlockJob {}
        job.addObserver(activity)
        job.cancel()
        JobQueue().add(job)
        #expect(await job.outcome.isCancelled)
        #expect(activity.activeCount == 0)
        #expect(changes.values.isEmpty)
    }
}
