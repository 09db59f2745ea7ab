import EarthquakesTestData
import Foundation
import Synchronization
import Testing

@testable import EarthquakesKit

/// A probe (7 December 2026): Ctrl-C during the parse of a big feed (400,000 features) was noticed
/// only once the whole feed was parsed — up to two minutes later in a debug build. The parse asks
/// `isCancelled` every few hundred features and stops.
@Suite("FeedParser: a cancelled parse stops early")
struct ParseCancellationTests {
    static func feed(_ count: Int) -> Data { SyntheticFeed.data(count) }

    /// Says yes from its `after`-th question on, counting them.
    final class Canceller: Sendable {
        let asked = Atomic<Int>(0)
        let after: Int
        init(after: Int) { self.after = after }
        var check: @Sendable () -> Bool { { self.asked.add(1, ordering: .relaxed).newValue >= self.after } }
    }

    @Test("the first parse of a feed stops at the first question after the cancel", arguments: [1, 3])
    func firstParse(after: Int) throws {
        let canceller = Canceller(after: after)
        let error = #expect(throws: FeedError.self) {
            _ = try FeedParser().parse(Self.feed(5_000), known: KnownFeatures(), isCancelled: canceller.check)
        }
        #expect(error?.code == .cancelled)
        // Asked every 256 features of the scan (in two halves: one question each), not after the end.
        #expect(canceller.asked.load(ordering: .relaxed) <= after + 1)
    }

    @Test("a re-import's parse stops too")
    func reimport() throws {
        let store = try EarthquakeStore.inMemory()
        let data = Self.feed(3_000)
        try store.importFeed(try store.parseForImport(data, parser: FeedParser()))
        let known = try store.knownFeatures()
        #expect(!known.isEmpty)
        let canceller = Canceller(after: 1)
        let error = #expect(throws: FeedError.self) {
            _ = try FeedParser().parse(data, known: known, isCancelled: canceller.check)
        }
        #expect(error?.code == .cancelled)
    }

    @Test("a parse nobody cancels reads everything, asking along the way")
    func notCancelled() throws {
        let canceller = Canceller(after: .max)
        let feed = try FeedParser().parse(Self.feed(2_000), known: KnownFeatures(), isCancelled: canceller.check)
        #expect(feed.count == 2_000)
        #expect(canceller.asked.load(ordering: .relaxed) >= 2_000 / 256)
    }
}
