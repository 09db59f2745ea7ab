// Interim entry point: imports the embedded SAMPLE feed into an in-memory store and prints it.
// The full tool (refresh, list, show, --database, --json) replaces this file.
import EarthquakesKit
import Foundation

do {
    let feed = try FeedParser().parse(SampleFeed.data)
    let store = try EarthquakeStore.inMemory()
    let summary = try store.importFeed(feed.earthquakes)
    print("\(SampleFeed.title)")
    print("Imported \(summary.total) sample earthquakes. Most recent:")
    for quake in try store.recent(limit: 10) {
        let magnitude = quake.magnitude.map { String(format: "%4.1f", $0) } ?? "   ?"
        print("\(magnitude)  \(quake.place ?? "?")")
    }
} catch {
    FileHandle.standardError.write(Data("earthquakes: \(error)\n".utf8))
    exit(1)
}
