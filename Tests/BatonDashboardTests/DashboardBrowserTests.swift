import Baton
import BatonDashboard
import BatonDurable
import BatonTesting
import Dispatch
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

/// Each page in a real browser (Debian's headless Chromium): it loads, its script runs (the live
/// update's first poll included) with no console error and no content-security-policy violation, and
/// its screenshot is saved (to `$BATON_SCREENSHOTS` when set: how the README's pictures are made).
/// Skipped, saying so, where no browser is installed.
/// The browser and scale tests take both cores of a small machine for seconds at a time (Chromium
/// laying out pages, 10,000-job runs): run beside the whole suite, they pushed the tests that start
/// processes past their time limits. `.ci/run` runs them alone, with `BATON_DASHBOARD_ALONE` set.
enum DashboardAlone {
    static var enabled: Bool { !(ProcessInfo.processInfo.environment["BATON_DASHBOARD_ALONE"] ?? "").isEmpty }
}

@Suite(
    "Dashboard in a browser", .serialized,
    .enabled(if: DashboardAlone.enabled, "set BATON_DASHBOARD_ALONE=1 to run (.ci/run runs it after swift test)"))
struct DashboardBrowserTests {

    static let browser = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// What the browser printed: the page's DOM (`--dump-dom`) and its log on standard error.
    static func load(
        _ url: String, screenshot: String?, profile: String
    ) async throws -> (
        dom: String, log: String, status: Int32
    ) {
        guard let browser else { return ("", "", -1) }
        var arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
            "--user-data-dir=\(profile)", "--enable-logging=stderr", "--v=0",
            // Long enough for the live script's first poll (after 2 s) to run and swap its section in.
            "--virtual-time-budget=5000", "--window-size=1280,900",
        ]
        arguments += screenshot.map { ["--screenshot=\($0)"] } ?? ["--dump-dom"]
        // Output in files (``ChildProcess``): the browser's helper processes inherit it and may outlive it,
        // so a pipe's end of file could come long after the browser exited. A browser that hangs is
        // killed after 120 s.
        let run = try await ChildProcess.run(
            URL(fileURLWithPath: browser), arguments + [url],
            environment: ProcessInfo.processInfo.environment, limit: .seconds(120))
        return (run.stdout, run.stderr, run.status)
    }

    /// The console's errors and the policy's refusals in a browser log.
    static func problems(in log: String) -> [String] {
        log.split(separator: "\n").map(String.init).filter { line in
            line.contains("CONSOLE") || line.contains("Refused to") || line.contains("Uncaught")
        }
    }

    @Test func aScheduleThisProgramCannotReadRendersEscapedInABrowser() async throws {
        guard Self.browser != nil else {
            print("DashboardBrowserTests: no headless browser (apt-get install chromium); the HTTP tests stand.")
            return
        }
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        try await fixture.addUnreadableSchedule(named: Hostile.unreadableSchedule)
        let configuration = Dashboard.Configuration(port: 0, allowActions: true, timeZone: TimeZone(identifier: "UTC")!)
        try await fixture.withServer(configuration) { client in
            let port = try #require(client.port)
            let (dom, log, status) = try await Self.load(
                "http://127.0.0.1:\(port)/schedules", screenshot: nil,
                profile: fixture.directory.appendingPathComponent("profile-unreadable").path)
            #expect(status == 0, "the browser exited with \(status)")
            #expect(dom.contains("<tr class=\"unreadable\">"), "the unreadable schedule's row")
            // Chromium writes the DOM's attributes quoted: an injected image would show as `<img src="x"`.
            #expect(dom.contains("later &lt;img src=x"), "the name, as text")
            #expect(!dom.contains("<img"), "no image in the DOM")
            #expect(dom.contains("cannot read"), "the reason")
            #expect(Self.problems(in: log).isEmpty, "\(Self.problems(in: log))")
        }
    }

    /// A probe (7 December 2026): every button was refused in Chromium ("A form of another site (null)
    /// was refused"): the pages' `Referrer-Policy: no-referrer` made the browser send `Origin: null`
    /// with their own forms. The HTTP tests post without an origin, so only a browser shows it.
    @Test func aButtonPressedInTheBrowserDoesWhatItSays() async throws {
        guard let browser = Self.browser else {
            print("DashboardBrowserTests: no headless browser (apt-get install chromium); the HTTP tests stand.")
            return
        }
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        let configuration = Dashboard.Configuration(port: 0, allowActions: true, timeZone: TimeZone(identifier: "UTC")!)
        try await fixture.withServer(configuration) { client in
            let port = try #require(client.port)
            let url = "http://127.0.0.1:\(port)/jobs/\(fixture.failedJob.rawValue)"
            let profile = fixture.directory.appendingPathComponent("profile-press").path
            let shown: String = try await withCheckedThrowingContinuation { continuation in
                // The session blocks on the browser's pipe (with deadlines): not on a task's thread.
                DispatchQueue.global().async {
                    continuation.resume(
                        with: Result {
                            let deadline = Date().addingTimeInterval(90)
                            let session = try BrowserSession(browser: browser, profile: profile)
                            try session.open(url, deadline: deadline)
                            try session.submit(
                                "document.querySelector('form[action$=\"/retry\"] button').click(); true",
                                deadline: deadline)
                            return try session.evaluate(
                                "location.pathname + '\\n' + document.body.innerText", deadline: deadline)
                        })
                }
            }
            #expect(!shown.contains("refused"), "the browser's form was refused: \(shown.prefix(300))")
            #expect(shown.hasPrefix("/jobs/\(fixture.failedJob.rawValue)\n"), "the job's page: \(shown.prefix(300))")
            #expect(try await fixture.store.explain(job: fixture.failedJob).state == .ready, "the job was retried")
        }
    }

    @Test func everyPageRendersInABrowserWithoutConsoleErrors() async throws {
        guard Self.browser != nil else {
            print("DashboardBrowserTests: no headless browser (apt-get install chromium); the HTTP tests stand.")
            return
        }
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        let folder =
            ProcessInfo.processInfo.environment["BATON_SCREENSHOTS"].map { URL(fileURLWithPath: $0) }
            ?? fixture.directory.appendingPathComponent("screenshots")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let pages = [
            ("runs", "/"), ("run", "/runs/\(fixture.failed.rawValue)"),
            ("running-run", "/runs/\(fixture.running.rawValue)"),
            ("job", "/jobs/\(fixture.failedJob.rawValue)"), ("workers", "/workers"), ("schedules", "/schedules"),
        ]
        let configuration = Dashboard.Configuration(port: 0, allowActions: true, timeZone: TimeZone(identifier: "UTC")!)
        try await fixture.withServer(configuration) { client in
            let port = try #require(client.port)
            for (name, path) in pages {
                let url = "http://127.0.0.1:\(port)\(path)"
                let profile = fixture.directory.appendingPathComponent("profile-\(name)").path
                let (dom, log, status) = try await Self.load(url, screenshot: nil, profile: profile)
                #expect(status == 0, "\(name): the browser exited with \(status)")
                #expect(dom.contains("<main>"), "\(name): the page's DOM")
                #expect(!dom.contains("<script>alert"), "\(name): no injected script in the DOM")
                #expect(Self.problems(in: log).isEmpty, "\(name): \(Self.problems(in: log))")
                let picture = folder.appendingPathComponent("dashboard-\(name).png").path
                let shot = try await Self.load(url, screenshot: picture, profile: profile + "-shot")
                #expect(shot.status == 0, "\(name): the screenshot")
                #expect(FileManager.default.fileExists(atPath: picture), "\(name): \(picture)")
                #expect(Self.problems(in: shot.log).isEmpty, "\(name): \(Self.problems(in: shot.log))")
            }
            // The running run's page, after its first poll (in the browser's virtual time): still live.
            let live = try await Self.load(
                "http://127.0.0.1:\(port)/runs/\(fixture.running.rawValue)", screenshot: nil,
                profile: fixture.directory.appendingPathComponent("profile-live").path)
            #expect(live.dom.contains("data-live"), "the running run's page keeps polling")
            #expect(live.dom.contains("lease held by worker"))
        }
    }
}
