import Baton
import BatonObservability
import CoreMetrics
import Synchronization

/// `metrics-off`, `metrics-on`, `timeline` (Baton only): as `independent`, on a queue given a ``JobMetrics``
/// instrument. Off: no metrics backend is bootstrapped, as in a program that never chose one, so the
/// queue leaves the instrument out. On: a backend that adds to atomic tallies, so the time is the
/// instrument's own. `timeline` records every job's instants. The report's targets compare both with plain `independent` of the same run.
enum InstrumentWorkloads {
    static var metricsOff: Workload {
        Workload(
            name: "metrics-off",
            summary: "Baton only: as independent, the queue given JobMetrics() with no metrics backend bootstrapped",
            runners: [.baton: run { [JobMetrics()] }]
        )
    }

    static var metricsOn: Workload {
        Workload(
            name: "metrics-on",
            summary: "Baton only: as independent, with JobMetrics on a backend of atomic tallies",
            runners: [.baton: run { [JobMetrics(factory: TallyMetrics())] }]
        )
    }

    static var timeline: Workload {
        Workload(
            name: "timeline",
            summary: "Baton only: as independent, with a JobTimeline recording every job",
            runners: [.baton: run { [JobTimeline()] }]
        )
    }

    static func run(_ instruments: @escaping () -> [any JobInstrument]) -> (Int) -> Sample {
        { n in
            let counter = Counter()
            var sample = measure {
                let queue = JobQueue(name: "bench", instruments: instruments())
                for _ in 0..<n { queue.add { counter.increment() } }
                queue.waitUntilAllJobsAreFinished()
                return queue
            }
            sample.problem = counter.check(n)
            return sample
        }
    }
}

/// A metrics backend that only adds to atomics: the cheapest real backend there can be.
final class TallyMetrics: MetricsFactory {
    final class Tally: CounterHandler, MeterHandler, RecorderHandler, TimerHandler {
        let value = Atomic<Int64>(0)
        func increment(by amount: Int64) { value.wrappingAdd(amount, ordering: .relaxed) }
        func reset() { value.store(0, ordering: .relaxed) }
        func set(_ value: Int64) { self.value.store(value, ordering: .relaxed) }
        func set(_ value: Double) { self.value.store(Int64(value), ordering: .relaxed) }
        func increment(by amount: Double) { value.wrappingAdd(Int64(amount), ordering: .relaxed) }
        func decrement(by amount: Double) { value.wrappingSubtract(Int64(amount), ordering: .relaxed) }
        func record(_ value: Int64) { self.value.wrappingAdd(value, ordering: .relaxed) }
        func record(_ value: Double) { self.value.wrappingAdd(Int64(value), ordering: .relaxed) }
        func recordNanoseconds(_ duration: Int64) { value.wrappingAdd(duration, ordering: .relaxed) }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { Tally() }
    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler { Tally() }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        Tally()
    }
    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler { Tally() }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}
