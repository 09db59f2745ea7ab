import Baton
import BatonObservability
import BatonTesting
import Foundation
import Testing

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The timeline records every job's instants and writes them as Chrome trace JSON and as an HTML page
/// whose SVG parses and shows every job.
@Suite(.timeLimit(.minutes(2))) struct JobTimelineTests {
    struct Boom: Error {}

    /// A known run: a chain, a failure, a cancel, a group, on a serial queue so slots are known.
    func knownRun() async -> (JobTimeline, [Job]) {
        let timeline = JobTimeline()
        let queue = JobQueue(name: "known", maxConcurrentJobs: 2, instruments: [timeline])
        let first = BlockJob(name: "first") {}
        let second = BlockJob(name: "second \"quoted\" <b>") {}
        second.addDependency(first)
        let failing = BlockJob(name: "failing") { throw Boom() }
        failing.addDependency(second)
        let cancelled = BlockJob(name: "cancelled") {}
        cancelled.cancel()
        let child = BlockJob(name: "child") {}
        let group = GroupJob(name: "group", children: [child])
        queue.add([first, second, failing, cancelled, group])
        await queue.waitUntilAllJobsAreFinished()
        return (timeline, [first, second, failing, cancelled, group, child])
    }

    @Test func everyJobsInstantsAreRecordedInLifecycleOrder() async throws {
        let (timeline, jobs) = await knownRun()
        let entries = Dictionary(uniqueKeysWithValues: timeline.entries.map { ($0.id, $0) })
        #expect(entries.count == jobs.count)
        for job in jobs where job.name != "cancelled" {
            let entry = try #require(entries[job.id])
            let (ready, started, finished) = (
                try #require(entry.ready), try #require(entry.started), try #require(entry.finished)
            )
            #expect(entry.added <= ready && ready <= started && started <= finished, "\(job.name)")
            #expect(entry.slot != nil)
        }
        let cancelled = try #require(entries[jobs[3].id])
        #expect(cancelled.started == nil && cancelled.outcome == .cancelled && cancelled.finished != nil)
        #expect(entries[jobs[2].id]?.outcome == .failed)
        #expect(entries[jobs[1].id]?.dependencies == [jobs[0].id])
        #expect(entries[jobs[5].id]?.group == jobs[4].id)
        #expect(entries[jobs[5].id]?.queue == "group.children")
        #expect(entries[jobs[5].id]?.slot == 0)
        // A dependent starts after its dependency finished.
        #expect(entries[jobs[1].id]!.started! >= entries[jobs[0].id]!.finished!)
    }

    @Test func slotsAreNeverSharedByTwoRunningJobs() async throws {
        let timeline = JobTimeline()
        let queue = JobQueue(name: "wide", maxConcurrentJobs: 4, instruments: [timeline])
        queue.add((0..<400).map { index in BlockJob(name: "job \(index)") {} })
        await queue.waitUntilAllJobsAreFinished()
        let bySlot = Dictionary(grouping: timeline.entries, by: { $0.slot! })
        #expect(bySlot.keys.allSatisfy { (0..<4).contains($0) })
        for (_, runs) in bySlot {
            let sorted = runs.sorted { $0.started! < $1.started! }
            for (a, b) in zip(sorted, sorted.dropFirst()) { #expect(a.finished! <= b.started!) }
        }
    }

    @Test func theChromeTraceParsesAndHoldsEveryJobSlotAndDependencyArrow() async throws {
        let (timeline, jobs) = await knownRun()
        let json = timeline.chromeTraceJSON()
        let root = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let events = try #require(root["traceEvents"] as? [[String: Any]])
        let ids = Set(events.compactMap { ($0["args"] as? [String: Any])?["id"] as? Int })
        #expect(ids == Set(jobs.map { Int($0.id) }))
        let complete = events.filter { $0["ph"] as? String == "X" }
        #expect(complete.count == 5)  // all but the cancelled one ran
        let instants = events.filter { $0["ph"] as? String == "i" }
        #expect(instants.map { $0["name"] as? String } == ["cancelled"])
        #expect(complete.contains { $0["name"] as? String == "second \"quoted\" <b>" })
        #expect(complete.first { $0["name"] as? String == "failing" }?["cat"] as? String == "failed")
        // Two dependencies between jobs that ran: two arrows, each a start and a finish with one id.
        let flows = events.filter { $0["cat"] as? String == "dependency" }
        #expect(flows.count == 4)
        #expect(Set(flows.compactMap { $0["id"] as? Int }).count == 2)
        let names = events.filter { $0["ph"] as? String == "M" }.compactMap {
            ($0["args"] as? [String: Any])?["name"] as? String
        }
        #expect(names.contains("queue known") && names.contains("queue group.children"))
        #expect(names.contains("slot 0") && names.contains("not run"))
    }

    @Test func marksRecordedBeforeOrAfterAJobWasAddedAreOnItsEntry() async throws {
        let timeline = JobTimeline()
        let queue = JobQueue(name: "durable", instruments: [timeline])
        let job = BlockJob(name: "claimed job") {}
        timeline.mark(.claimed, of: job)
        queue.add(job)
        await queue.waitUntilAllJobsAreFinished()
        timeline.mark(.retried, of: job)
        let entry = try #require(timeline.entries.first)
        #expect(entry.marks.map(\.kind) == [.claimed, .retried])
        let json = timeline.chromeTraceJSON()
        #expect(json.contains("\"claimed: claimed job\"") && json.contains("\"retried: claimed job\""))
        #expect(timeline.html().contains("lease lost"))  // the legend names the durable marks
    }

    /// The `<svg>` element of a page, parsed as XML: the `data-id` of every job group.
    func jobIDs(inSVGOf html: String) throws -> [UInt64] {
        let start = try #require(html.range(of: "<svg"))
        let end = try #require(html.range(of: "</svg>"))
        let svg = String(html[start.lowerBound..<end.upperBound])
        let collector = SVGCollector()
        let parser = XMLParser(data: Data(svg.utf8))
        parser.delegate = collector
        #expect(parser.parse(), "the SVG is not well-formed XML: \(String(describing: parser.parserError))")
        return collector.jobIDs
    }

    final class SVGCollector: NSObject, XMLParserDelegate {
        var jobIDs: [UInt64] = []
        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String]
        ) {
            if name == "g", attributes["class"] == "job", let id = attributes["data-id"].flatMap(UInt64.init) {
                jobIDs.append(id)
            }
        }
    }

    @Test func theHTMLPageIsSelfContainedAndItsSVGShowsEveryJob() async throws {
        let (timeline, jobs) = await knownRun()
        let html = timeline.html(title: "known <run>")
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(html.contains("<title>known &lt;run&gt;</title>"))
        #expect(!html.contains("<script"))
        #expect(!html.replacingOccurrences(of: "http://www.w3.org/2000/svg", with: "").contains("://"))
        #expect(try jobIDs(inSVGOf: html).sorted() == jobs.map(\.id).sorted())
        // The dependent's arrows are drawn inside its own group, shown on hover.
        #expect(html.contains("class=\"deps\""))
        #expect(html.contains("marker-end=\"url(#arrow)\""))
    }

    @Test func tenThousandJobsArePackedIntoLanesAndAllShown() async throws {
        let timeline = JobTimeline()
        let queue = JobQueue(name: "big", maxConcurrentJobs: 8, instruments: [timeline])
        // Made and drawn off Swift concurrency's pool (one thread per core), which other tests need.
        let jobs = await offThePool { () -> [Job] in
            var jobs: [Job] = []
            for index in 0..<10_000 {
                let job = BlockJob(name: "job \(index)") {}
                if index % 10 != 0 { job.addDependency(jobs[index - 1]) }
                jobs.append(job)
            }
            return jobs
        }
        jobs[5].cancel()
        queue.add(jobs)
        await queue.waitUntilAllJobsAreFinished()
        let html = await offThePool { timeline.html(title: "ten thousand") }
        let ids = try jobIDs(inSVGOf: html)
        #expect(ids.count == 10_000)
        #expect(Set(ids) == Set(jobs.map(\.id)))
        // Packed: lanes for at most 8 jobs at once, not a row per job.
        #expect(html.contains(">lane 0<"))
        #expect(!html.contains(">lane 8<"))
        #expect(html.contains("ready, waiting for a slot (max"))
        #expect(html.utf8.count < 12_000_000)
    }

    @Test func aHeadlessBrowserRendersThePage() async throws {
        let browser = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let browser else {
            print("JobTimelineTests: no headless browser (apt-get install chromium); the structure tests stand.")
            return
        }
        let (timeline, jobs) = await knownRun()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("baton-timeline-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let page = directory.appendingPathComponent("run.html")
        try timeline.html().write(to: page, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: browser)
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--user-data-dir=\(directory.path)/profile",
            "--dump-dom", page.absoluteString,
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Read and wait on a thread of its own: the browser takes seconds, and a pool thread blocked that
        // long stalls the other tests (on Linux, Swift concurrency's pool is Dispatch's global queue).
        let dom = await offThePool { () -> String in
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return String(decoding: data, as: UTF8.self)
        }
        #expect(process.terminationStatus == 0)
        // The browser built the SVG: every job's group is in its DOM.
        for job in jobs { #expect(dom.contains("data-id=\"\(job.id)\""), "\(job.name)") }
    }
    /// The review: the page's time axis ended at the last finish or addition, so a job still running
    /// (started after that) was drawn past the chart's right edge, as was a mark recorded after the last
    /// finish. Now a running job ends at the call and the axis covers every instant.
    @Test func aRunningJobAndALateMarkAreDrawnInsideTheChart() async throws {
        let timeline = JobTimeline()
        let queue = JobQueue(name: "live", instruments: [timeline], workerThreads: .dedicated)
        let started = Gate()
        let release = Gate()
        defer { release.open() }
        let done = BlockJob(name: "done") {}
        queue.add(done)
        try await withDeadline(.seconds(30), "the first job finishes") { await queue.waitUntilAllJobsAreFinished() }
        timeline.mark(.retried, of: done)
        let running = BlockJob(name: "running") {
            started.open()
            release.wait()
        }
        queue.add(running)
        await started.waitAsync()
        let html = timeline.html()
        release.open()
        try await withDeadline(.seconds(30), "the running job finishes") { await queue.waitUntilAllJobsAreFinished() }

        let right = 250.0 + 10 + 1000  // the chart's right edge (GanttChart's label and chart widths)
        var drawn = 0
        for piece in html.components(separatedBy: "<rect class=\"run\"").dropFirst() {
            let x = try #require(Self.number(after: " x=\"", in: piece))
            let width = try #require(Self.number(after: " width=\"", in: piece))
            #expect(x + width <= right + 0.5, "a bar ends at \(x + width), past the chart's edge \(right)")
            drawn += 1
        }
        #expect(drawn == 2)
        for piece in html.components(separatedBy: "stroke=\"#8e44ad\"").dropLast() {
            let line = try #require(piece.components(separatedBy: "<line").last)
            let x = try #require(Self.number(after: " x1=\"", in: line))
            #expect(x <= right + 0.5, "a mark at \(x), past the chart's edge \(right)")
        }
        #expect(html.contains("1 running"))
    }

    static func number(after prefix: String, in text: String) -> Double? {
        guard let start = text.range(of: prefix) else { return nil }
        return Double(text[start.upperBound...].prefix { $0 != "\"" })
    }
}

/// A review (7 December 2026): a recorded timeline read "now" back through the machine's uptime, so for
/// a run older than the uptime a running job's Chrome trace `dur` wrapped to about 584 years and the
/// page drew it ending at its start.
@Suite struct RecordedTimelineNowTests {
    @Test func aRunOlderThanTheMachinesUptimeEndsItsRunningJobsNow() throws {
        let first = Date(timeIntervalSince1970: 1_000_000_000)  // 2001: older than any uptime
        let now = first.addingTimeInterval(10 * 365 * 86_400 + 3600)
        let running = JobTimeline.RecordedJob(
            id: 1, name: "long", queue: "q", kind: "k", group: nil, dependencies: [], added: first,
            started: now.addingTimeInterval(-3600), finished: nil, outcome: nil)
        let timeline = JobTimeline.recorded([running], now: now)
        let trace = try #require(
            try JSONSerialization.jsonObject(with: Data(timeline.chromeTraceJSON().utf8)) as? [String: Any])
        let events = try #require(trace["traceEvents"] as? [[String: Any]])
        let span = try #require(events.first { $0["name"] as? String == "long" && $0["ph"] as? String == "X" })
        let duration = try #require((span["dur"] as? NSNumber)?.doubleValue)
        #expect(abs(duration - 3600e6) < 1e6, "dur \(duration) µs, not an hour")
    }
}
