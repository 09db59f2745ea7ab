import Baton
import BatonNetworking
import BatonTesting
import EarthquakesKit
import Foundation
import Testing

// The catalogs of BatonNetworking, BatonTesting and EarthquakesKit.

func networking(feedURL: URL, destination: URL) async throws {
    // snippet: networking
    let queue = JobQueue(name: "network", maxConcurrentJobs: 4)
    let download = HTTPDownloadJob(url: feedURL, to: destination)
    if let reachable = ReachabilityCondition(url: feedURL) { download.addCondition(reachable) }
    queue.add(download)
    try await download.outcome.get()
    // end snippet
}

@Test("BatonTesting's example: a gate holds a job in its body until the test opens it")
func gateExample() async {
    let queue = JobQueue(name: "gated", workerThreads: .dedicated)
    // snippet: gate
    let gate = Gate()
    let job = BlockJob { gate.wait() }
    queue.add(job)
    #expect(await eventually { job.state == .executing })
    gate.open()
    await queue.waitUntilAllJobsAreFinished()
    // end snippet
}

func earthquakes(feedURL: URL) async throws {
    // snippet: earthquakes-kit
    let store = try EarthquakeStore(path: "quakes.sqlite")
    let refresh = GetEarthquakes(source: .url(feedURL), store: store)
    JobQueue(name: "earthquakes").add(refresh.job)
    _ = await refresh.job.outcome
    for quake in try store.list(minMagnitude: 2.5, limit: 10, sort: .magnitude) {
        print(quake.magnitude ?? 0, quake.place ?? "")
    }
    // end snippet
}
