import BatonDurable
import BatonPostgres
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import BatonDashboard

/// The dashboard over HTTP, against its real server on 127.0.0.1: status codes, escaping of what users
/// wrote, and the refusals that keep a store safe (read-only, CSRF, token).
@Suite("Dashboard over HTTP")
struct DashboardHTTPTests {
    @Test func everyPageRendersWithHostileTextEscaped() async throws {
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        try await Self.checkPages(fixture)
    }

    static func checkPages(_ fixture: DashboardFixture) async throws {
        try await fixture.withServer { client in
            let paths = [
                "/", "/?state=failed", "/runs/\(fixture.failed.rawValue)", "/runs/\(fixture.running.rawValue)",
                "/runs/\(fixture.grown.rawValue)", "/jobs/\(fixture.failedJob.rawValue)",
                "/jobs/\(fixture.runningJob.rawValue)", "/workers", "/schedules",
            ]
            for path in paths {
                let response = try await client.execute(uri: path, method: .get)
                #expect(response.status == .ok, "\(path)")
                #expect(response.headers[.contentType] == "text/html; charset=utf-8", "\(path)")
                #expect(response.headers[.contentSecurityPolicy]?.contains("script-src 'self'") == true, "\(path)")
                // Not `no-referrer`: a browser then sends `Origin: null` with the page's own forms, which are
                // refused (see `DashboardBrowserTests.aButtonPressedInTheBrowserDoesWhatItSays`).
                #expect(response.headers[.init("referrer-policy")!] == "same-origin", "\(path)")
                let page = response.text
                for raw in Hostile.raw { #expect(!page.contains(raw), "\(path) shows \(raw.debugDescription) raw") }
                #expect(page.hasPrefix("<!DOCTYPE html>"), "\(path)")
                #expect(!page.contains("<form method=\"post\""), "\(path): read-only pages offer no actions")
            }
            let runs = try await client.execute(uri: "/", method: .get).text
            #expect(runs.contains("&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;"), "the run's name, escaped")
            #expect(runs.contains(">failed <span class=\"count\">1</span>"), "the count of failed runs")
            #expect(runs.contains("data-live"), "the runs table updates itself")

            let failed = try await client.execute(uri: "/runs/\(fixture.failed.rawValue)", method: .get).text
            #expect(failed.contains("&lt;img src=x onerror=alert(&#39;error&#39;)&gt; failed"), "the error, escaped")
            #expect(failed.contains("\\u{1B}[31m"), "a terminal escape is shown as text")
            #expect(failed.contains("<svg class=\"graph\""), "the dependency graph")
            #expect(failed.contains("href=\"/jobs/\(fixture.cancelledJob.rawValue)\""), "links to its jobs")
            #expect(!failed.contains("data-live"), "a finished run does not poll")

            let running = try await client.execute(uri: "/runs/\(fixture.running.rawValue)", method: .get).text
            #expect(running.contains("data-live"), "a running run updates itself")
            #expect(running.contains("lease held by worker"), "what its running job waits for")

            let grown = try await client.execute(uri: "/runs/\(fixture.grown.rawValue)", method: .get).text
            #expect(grown.contains("added by <a href="), "added jobs name the job that added them")

            let job = try await client.execute(uri: "/jobs/\(fixture.failedJob.rawValue)", method: .get).text
            #expect(job.contains("w&quot;&gt;&lt;script&gt;"), "the worker, escaped")
            #expect(job.contains("&lt;i&gt;x&lt;/i&gt;"), "the input JSON, escaped")
            #expect(job.contains("<h2>Attempts</h2>"))
            let cancelled = try await client.execute(uri: "/jobs/\(fixture.cancelledJob.rawValue)", method: .get).text
            #expect(cancelled.contains("It never ran: it was cancelled before it started."), "\(cancelled)")
            let waiting = try await client.execute(uri: "/jobs/\(fixture.runningJob.rawValue)", method: .get).text
            #expect(!waiting.contains("It never ran"))

            let workers = try await client.execute(uri: "/workers", method: .get).text
            #expect(workers.contains("download"), "the hostile worker holds download's lease")
            #expect(workers.contains("&lt;k&gt;"), "its kinds, escaped")

            let schedules = try await client.execute(uri: "/schedules", method: .get).text
            #expect(schedules.contains("nightly &lt;b&gt;bold&lt;/b&gt;"), "the schedule's name, escaped")

            let css = try await client.execute(uri: "/assets/dashboard.css", method: .get)
            #expect(css.status == .ok && css.headers[.contentType] == "text/css; charset=utf-8")
            let script = try await client.execute(uri: "/assets/live.js", method: .get)
            #expect(script.status == .ok && script.text.contains("data-live"))
        }
    }

    /// A schedule written by a newer version (a timing this one does not know) made the schedules page
    /// fail as a whole; it is listed with its state and the reason, escaped, beside the others.
    @Test func aScheduleThisProgramCannotReadIsListedWithItsReason() async throws {
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        try await fixture.addUnreadableSchedule(named: Hostile.unreadableSchedule)
        let configuration = Dashboard.Configuration(port: 0, allowActions: true, timeZone: TimeZone(identifier: "UTC")!)
        try await fixture.withServer(configuration) { client in
            let response = try await client.execute(uri: "/schedules", method: .get)
            #expect(response.status == .ok)
            let page = response.text
            for raw in Hostile.raw { #expect(!page.contains(raw), "shows \(raw.debugDescription) raw") }
            #expect(page.contains("nightly &lt;b&gt;bold&lt;/b&gt;"), "the readable schedule")
            #expect(page.contains("<tr class=\"unreadable\"><td>later &lt;img src=x"), "the unreadable one, escaped")
            #expect(page.contains("is stored in a form this program cannot read"), "the reason")
            // By name, the unreadable one among the others ("later …" before "nightly …").
            let later = try #require(page.range(of: "<td>later &lt;img"))
            let nightly = try #require(page.range(of: "<td>nightly &lt;b&gt;"))
            #expect(later.lowerBound < nightly.lowerBound, "the schedules by name")
            // Two schedules, both active: two pause buttons (the unreadable one can be paused here).
            #expect(page.components(separatedBy: "action=\"/schedules/pause\"").count == 3, "\(page)")
        }
    }

    @Test func unknownAndMalformedAddressesAreClearErrors() async throws {
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let run = try await client.execute(uri: "/runs/987654", method: .get)
            #expect(run.status == .notFound)
            #expect(run.text.contains("is not in the store"), "\(run.text)")
            #expect(try await client.execute(uri: "/jobs/987654", method: .get).status == .notFound)
            let word = try await client.execute(uri: "/runs/abc", method: .get)
            #expect(word.status == .notFound)
            #expect(word.text.contains("There is no run &#39;abc&#39;: a run is named by its number"), "\(word.text)")
            let state = try await client.execute(uri: "/?state=%3Cdone%3E", method: .get)
            #expect(state.status == .badRequest)
            #expect(state.text.contains("state=&lt;done&gt;: give running"), "\(state.text)")
            // An address no page has: the dashboard's 404 page, with the headers of every page (a request
            // that matched no route had none of them).
            for (path, method, status) in [
                ("/nothing", HTTPRequest.Method.get, HTTPResponse.Status.notFound), ("/x", .post, .notFound),
                ("/runs/2/delete", .get, .methodNotAllowed),
            ] {
                let missing = try await client.execute(uri: path, method: method)
                #expect(missing.status == status, "\(path)")
                #expect(missing.headers[.contentSecurityPolicy]?.contains("script-src 'self'") == true, "\(path)")
            }
        }
    }

    @Test func aReadOnlyDashboardRefusesEveryAction() async throws {
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            for path in [
                "/runs/\(fixture.running.rawValue)/cancel", "/runs/\(fixture.failed.rawValue)/retry",
                "/runs/\(fixture.succeeded.rawValue)/delete", "/jobs/\(fixture.runningJob.rawValue)/cancel",
                "/jobs/\(fixture.failedJob.rawValue)/retry", "/schedules/pause",
            ] {
                let response = try await client.execute(
                    uri: path, method: .post, headers: formHeaders, body: form(["csrf": "x", "name": Hostile.schedule]))
                #expect(response.status == .forbidden, "\(path)")
                #expect(response.text.contains("--allow-actions"), "\(path): says how to turn actions on")
            }
        }
        // Nothing changed.
        #expect(try await fixture.store.record(of: fixture.running).finished == nil)
        #expect(try await fixture.store.explain(job: fixture.failedJob).state == .failed)
        #expect(try await fixture.store.schedules().allSatisfy { !$0.paused })
    }

    @Test func actionsNeedThePagesCSRFTokenAndTheirOrigin() async throws {
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        try await Self.checkActions(fixture)
    }

    static func checkActions(_ fixture: DashboardFixture) async throws {
        let configuration = Dashboard.Configuration(port: 0, allowActions: true, timeZone: TimeZone(identifier: "UTC")!)
        try await fixture.withServer(configuration) { client in
            let page = try await client.execute(uri: "/runs/\(fixture.running.rawValue)", method: .get).text
            let token = try #require(csrfToken(in: page), "the run page has an action form")
            #expect(page.contains("Cancel the run"))
            let cancel = "/runs/\(fixture.running.rawValue)/cancel"
            let missing = try await client.execute(uri: cancel, method: .post, headers: formHeaders, body: form([:]))
            #expect(missing.status == .forbidden)
            #expect(missing.text.contains("CSRF token"))
            let wrong = try await client.execute(
                uri: cancel, method: .post, headers: formHeaders, body: form(["csrf": token + "0"]))
            #expect(wrong.status == .forbidden)
            var foreign = formHeaders
            foreign[.origin] = "http://evil.example"
            let crossSite = try await client.execute(
                uri: cancel, method: .post, headers: foreign, body: form(["csrf": token]))
            #expect(crossSite.status == .forbidden)
            #expect(
                try await fixture.store.explain(job: fixture.runningJob).waitingFor.contains { reason in
                    if case .cancelRequested = reason { return true } else { return false }
                } == false, "no refused form cancelled anything")

            // A browser's form from the dashboard's own page names its origin.
            var sameSite = formHeaders
            sameSite[.origin] = "http://127.0.0.1:\(client.port ?? 0)"
            let done = try await client.execute(
                uri: cancel, method: .post, headers: sameSite, body: form(["csrf": token]))
            #expect(done.status == .seeOther)
            #expect(done.headers[.location] == "/runs/\(fixture.running.rawValue)?notice=cancelled")
            let after = try await client.execute(uri: done.headers[.location]!, method: .get).text
            #expect(after.contains("Cancelled. Running jobs stop"), "the notice")
            #expect(page.contains("data-confirm=\"Cancel the run?\""), "a destructive action asks first (the script)")
            // A run or job that had finished (a page shown before it did): said so, not "Cancelled".
            let finishedRun = try await client.execute(
                uri: "/runs/\(fixture.succeeded.rawValue)/cancel", method: .post, headers: formHeaders,
                body: form(["csrf": token]))
            #expect(finishedRun.headers[.location] == "/runs/\(fixture.succeeded.rawValue)?notice=already-finished")
            let finishedJob = try await client.execute(
                uri: "/jobs/\(fixture.cancelledJob.rawValue)/cancel", method: .post, headers: formHeaders,
                body: form(["csrf": token]))
            #expect(finishedJob.headers[.location] == "/jobs/\(fixture.cancelledJob.rawValue)?notice=already-finished")
            let told = try await client.execute(uri: finishedJob.headers[.location]!, method: .get).text
            #expect(told.contains("It had already finished; nothing was cancelled."))

            // Retry the failed run: its failed job and the dependent it cancelled run again.
            let retry = try await client.execute(
                uri: "/runs/\(fixture.failed.rawValue)/retry", method: .post, headers: formHeaders,
                body: form(["csrf": token]))
            #expect(retry.status == .seeOther)
            #expect(try await fixture.store.explain(job: fixture.failedJob).state == .ready)
            // A refused repair is a conflict with the store's reason.
            let again = try await client.execute(
                uri: "/jobs/\(fixture.failedJob.rawValue)/retry", method: .post, headers: formHeaders,
                body: form(["csrf": token]))
            #expect(again.status == .conflict)
            #expect(again.text.contains("only a failed or cancelled job can be retried"), "\(again.text)")

            let pause = try await client.execute(
                uri: "/schedules/pause", method: .post, headers: formHeaders,
                body: form(["csrf": token, "name": Hostile.schedule]))
            #expect(pause.status == .seeOther)
            #expect(try await fixture.store.schedules().first?.paused == true)
            let unknown = try await client.execute(
                uri: "/schedules/resume", method: .post, headers: formHeaders,
                body: form(["csrf": token, "name": "no such"]))
            #expect(unknown.status == .notFound)

            let delete = try await client.execute(
                uri: "/runs/\(fixture.succeeded.rawValue)/delete", method: .post, headers: formHeaders,
                body: form(["csrf": token]))
            #expect(delete.status == .seeOther)
            #expect(
                try await client.execute(uri: "/runs/\(fixture.succeeded.rawValue)", method: .get).status == .notFound)
        }
    }

    /// A probe (7 December 2026): the pause and resume forms sent the name as the page showed it
    /// (control characters written out, a line break turned into CRLF by the browser), so a schedule
    /// with one was answered "There is no schedule of that name"; and direction overrides were shown as
    /// they act (a job named `\u{202E}txt.exe` read `exe.txt`).
    @Test func aScheduleWithControlCharactersInItsNameIsPausedFromItsForm() async throws {
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        let name = "ctl\u{1B}[31m red\r\nsecond line \u{202E}txt.exe 👩\u{200D}💻"
        var graph = JobGraph(name: "odd")
        graph.add(FixtureJob.self, input: "x")
        try await fixture.store.schedule(name: name, every: .seconds(3_600), graph: graph)
        let configuration = Dashboard.Configuration(port: 0, allowActions: true, timeZone: TimeZone(identifier: "UTC")!)
        try await fixture.withServer(configuration) { client in
            let page = try await client.execute(uri: "/schedules", method: .get).text
            #expect(!page.contains("\u{202E}") && page.contains("\\u{202E}txt.exe"), "the override, shown escaped")
            #expect(page.contains("txt.exe 👩\u{200D}💻"), "an emoji sequence, whole (its joiner kept)")
            let token = try #require(csrfToken(in: page))
            // The form's own fields, as a browser sends them: every hidden field of the row's form.
            let row = try #require(page.components(separatedBy: "<tr>").first { $0.contains("second line") })
            var fields: [String: String] = [:]
            for piece in row.components(separatedBy: "<input type=\"hidden\" name=\"").dropFirst() {
                let parts = piece.components(separatedBy: "\" value=\"")
                fields[parts[0]] = parts[1].components(separatedBy: "\"")[0]
            }
            #expect(fields["csrf"] == token)
            let pause = try await client.execute(
                uri: "/schedules/pause", method: .post, headers: formHeaders, body: form(fields))
            #expect(pause.status == .seeOther, "\(pause.status): \(pause.text)")
            #expect(try await fixture.store.schedules().first { $0.schedule.name == name }?.paused == true)
        }
    }

    /// A probe (7 December 2026): the "Older runs" link dropped the page size asked for.
    @Test func theNextPageKeepsThePageSize() async throws {
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let page = try await client.execute(uri: "/?limit=1", method: .get).text
            let link = try #require(
                page.components(separatedBy: "href=\"").first { $0.contains("rel=\"next\"") }?
                    .components(separatedBy: "\"").first)
            #expect(link.contains("limit=1") && link.contains("before="), "\(link)")
            let older = try await client.execute(uri: link.replacingOccurrences(of: "&amp;", with: "&"), method: .get)
            #expect(older.text.components(separatedBy: "<tr><td class=\"number\"><a href=\"/runs/").count - 1 == 1)
        }
    }

    /// A review (7 December 2026): attempts that ended at the same time as the cut (a store stamps a
    /// batch of reports with one time) filled the timeline's quota in job order, leaving out later ones.
    @Test func theTimelineKeepsTheAttemptsThatEndedLast() {
        let t5 = Date(timeIntervalSince1970: 5)
        let t9 = Date(timeIntervalSince1970: 9)
        func attempt(_ number: Int, _ ended: Date) -> AttemptRecord {
            AttemptRecord(
                attempt: number, worker: nil, started: Date(timeIntervalSince1970: 1), ended: ended,
                outcome: .succeeded, result: .succeeded, error: nil)
        }
        let attempts: [DurableJobID: [AttemptRecord]] = [
            DurableJobID(1): [attempt(1, t5)], DurableJobID(2): [attempt(1, t5)], DurableJobID(3): [attempt(1, t9)],
        ]
        let (kept, ended) = Pages.latestAttempts(attempts, limit: 2)
        #expect(ended == 3)
        #expect(kept.keys.map(\.rawValue).sorted() == [2, 3], "the newest, then the later job of a tie: \(kept)")
        #expect(Pages.latestAttempts(attempts, limit: 3).attempts.count == 3, "under the limit: all")
    }

    @Test func aDashboardOnLoopbackAnswersOnlyToLoopbackNames() {
        // What the Host header of a request names: another site's name resolved to 127.0.0.1 (DNS
        // rebinding) must not reach a dashboard that trusts being on loopback.
        for allowed in ["127.0.0.1:8080", "localhost", "LOCALHOST:80", "[::1]:8080", "127.1.2.3"] {
            #expect(Guard<BasicRequestContext>.isLoopbackAuthority(allowed), "\(allowed)")
        }
        for refused in [
            "evil.example:8080", "127.0.0.1.evil.example", "127.example.com", "localhost.evil", "[::2]:80", "",
            "0.0.0.0",
        ] {
            #expect(!Guard<BasicRequestContext>.isLoopbackAuthority(refused), "\(refused)")
        }
        #expect(!Guard<BasicRequestContext>.isLoopbackAuthority(nil))
        #expect(Dashboard.Configuration(host: "127.0.0.1").isLoopback)
        #expect(!Dashboard.Configuration(host: "127.example.com").isLoopback)
        #expect(!Dashboard.Configuration(host: "0.0.0.0").isLoopback)
    }

    @Test func aTokenIsNeededAsBearerOrCookie() async throws {
        let fixture = try await DashboardFixture.make()
        defer { fixture.remove() }
        let secret = "s3cret-token"
        let configuration = Dashboard.Configuration(port: 0, token: secret, timeZone: TimeZone(identifier: "UTC")!)
        try await fixture.withServer(configuration) { client in
            let none = try await client.execute(uri: "/", method: .get)
            #expect(none.status == .unauthorized)
            #expect(none.text.contains("needs its token"))
            #expect(!none.text.contains("nightly report"), "nothing of the store")
            #expect(try await client.execute(uri: "/assets/live.js", method: .get).status == .unauthorized)
            let bearer = try await client.execute(uri: "/", method: .get, headers: [.authorization: "Bearer \(secret)"])
            #expect(bearer.status == .ok)
            let badBearer = try await client.execute(uri: "/", method: .get, headers: [.authorization: "Bearer nope"])
            #expect(badBearer.status == .unauthorized)
            let wrong = try await client.execute(uri: "/workers?token=wrong", method: .get)
            #expect(wrong.status == .unauthorized)
            #expect(wrong.text.contains("not this dashboard"))
            let opened = try await client.execute(uri: "/workers?token=\(secret)", method: .get)
            #expect(opened.status == .seeOther)
            #expect(opened.headers[.location] == "/workers", "the token leaves the address bar")
            // The page's other parameters stay (a probe, 7 December 2026: they were dropped).
            let filtered = try await client.execute(uri: "/?state=failed&token=\(secret)&name=a%26b", method: .get)
            #expect(filtered.headers[.location] == "/?state=failed&name=a%26b", "\(filtered.headers[.location] ?? "")")
            let cookie = try #require(opened.headers[.setCookie])
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "\(cookie)")
            let pair = String(cookie.prefix { $0 != ";" })
            let withCookie = try await client.execute(uri: "/workers", method: .get, headers: [.cookie: pair])
            #expect(withCookie.status == .ok)
            #expect(
                try await client.execute(uri: "/", method: .get, headers: [.cookie: "baton_dashboard_token=nope"])
                    .status
                    == .unauthorized)
        }
    }
}

/// The same pages and actions on a PostgreSQL store (skipped without a server, except in CI).
@Suite("Dashboard over HTTP, PostgreSQL")
struct DashboardPostgresTests {
    static var url: String? {
        ProcessInfo.processInfo.environment["BATON_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }
    static var required: Bool { !(ProcessInfo.processInfo.environment["BATON_CI"] ?? "").isEmpty }

    @Test(.enabled(if: url != nil || required, "set BATON_POSTGRES_URL to run the dashboard's PostgreSQL tests"))
    func pagesAndActionsWorkOnPostgreSQL() async throws {
        let url = try #require(Self.url, "CI must set BATON_POSTGRES_URL")
        for check in [DashboardHTTPTests.checkPages, DashboardHTTPTests.checkActions] {
            let scratch = try Scratch()
            defer { scratch.remove() }
            try await withPostgresJobStore(url: url, schema: "dash_\(UInt32.random(in: 0...UInt32.max))") { store in
                try await check(try await DashboardFixture.fill(store, directory: scratch.url))
            }
        }
    }
}
