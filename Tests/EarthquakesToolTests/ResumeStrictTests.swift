import EarthquakesKit
import Foundation
import Testing

@testable import EarthquakesCLI

/// `refresh --resume --strict` with no feeds resumes the newest unfinished refresh, which keeps the
/// `--strict` it was started with.
@Suite(.timeLimit(.minutes(1))) struct ResumeStrictTests {
    /// The review: `--strict` was dropped without a word when the refresh resumed had been started
    /// without it, and unreadable features were skipped after all. Now it is refused, saying why.
    @Test func strictIsRefusedForARefreshStartedWithoutIt() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let (a, b) = (scratch.path("a.geojson"), scratch.path("b.geojson"))
        try RefreshReportTests.awkwardFeed().data.write(to: URL(fileURLWithPath: a))
        try SampleFeed.geoJSON(count: 3, seed: 2).write(to: URL(fileURLWithPath: b))
        let database = scratch.path("q.sqlite")
        try EarthquakeStore(path: database).close()
        try await FeedRefresh.submitOnly(feeds: [a, b], strict: false, database: database)

        let captured = CapturedConsole()
        let error = await #expect(throws: CLIError.self) {
            try await EarthquakesCLI.forTests(captured).refresh(
                feeds: [], resume: true, database: database, json: false, strict: true)
        }
        #expect(error?.isUsage == true)
        #expect(
            error?.message.hasPrefix(
                "--resume --strict: the interrupted refresh of \(a), \(b) was started without --strict")
                == true, "\(error?.message ?? "")")
        #expect(try EarthquakeStore(path: database).count() == 0, "the refresh ran without --strict")

        // Without --strict it is resumed as it was started.
        try await EarthquakesCLI.forTests(CapturedConsole()).refresh(
            feeds: [], resume: true, database: database, json: false)
        #expect(try EarthquakeStore(path: database).count() > 0, "the resumed refresh imported nothing")
    }
}
