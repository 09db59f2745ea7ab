import BatonCLI
import BatonDurable
import BatonObservability
import Foundation
import Hummingbird

/// The dashboard's pages and actions, each a read of the store rendered to HTML.
struct Pages: Sendable {
    let dashboard: Dashboard
    var store: any JobStore { dashboard.store }
    var layout: Layout {
        Layout(
            storeName: dashboard.storeName, actions: dashboard.configuration.allowActions,
            timeZone: dashboard.configuration.timeZone)
    }
    var clock: Clock { Clock(timeZone: dashboard.configuration.timeZone, now: dashboard.now) }

    /// Jobs per page of a run's job table.
    static let jobPage = 200
    /// Bytes of an input or output shown on a job's page.
    static let payloadLimit = 100_000

    /// A page, or the store's error as a page with its status: 404 for an unknown run or job, 409 for a
    /// repair the store refuses, 500 for a store that fails.
    struct Failure: Error {
        var status: HTTPResponse.Status
        var message: String
    }

    func respond(_ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let failure as Failure {
            return errorPage(failure.status, failure.message)
        } catch let error as HTTPError {
            return errorPage(error.status, error.body ?? error.status.reasonPhrase)
        } catch let error as DurableError {
            switch error.code {
            case .unknownRun, .unknownJob: return errorPage(.notFound, error.message)
            case .misuse: return errorPage(.conflict, error.message)
            default: return errorPage(.internalServerError, "The store failed: \(error.message)")
            }
        } catch {
            return errorPage(.badRequest, String(describing: error))
        }
    }

    func errorPage(_ status: HTTPResponse.Status, _ message: String) -> Response {
        html(
            layout.page(
                title: "\(status.code) \(status.reasonPhrase)", section: "",
                body:
                    "<h1>\(status.code) \(HTML.escape(status.reasonPhrase))</h1><p class=\"error\">\(HTML.escape(message))</p>"
            ), status: status)
    }

    func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// The line an action's redirect asks the page to show (fixed texts: a link cannot make a page say
    /// anything else).
    static let notices: [String: String] = [
        "cancelled": "Cancelled. Running jobs stop at their workers' next lease renewal.",
        "retried": "The failed and cancelled jobs run again.",
        "nothing-to-retry": "Nothing to retry: no job failed or was cancelled.",
        "already-finished": "It had already finished; nothing was cancelled.",
        "deleted": "The run was deleted.",
        "paused": "The schedule is paused.",
        "resumed": "The schedule is resumed from its next tick.",
    ]

    func notice(_ request: Request) -> String {
        guard let key = QueryItems(request.uri.query)["notice"], let text = Self.notices[key] else { return "" }
        return "<p class=\"notice\" role=\"status\">\(HTML.escape(text))</p>"
    }

    /// A POST form for one action, with the CSRF token; nothing in a read-only dashboard. A `confirm`
    /// action (delete, cancel) asks the browser's confirmation first (the page's script: `data-confirm`).
    func button(_ path: String, _ label: String, fields: [String: String] = [:], confirm: Bool = false) -> String {
        guard dashboard.configuration.allowActions else { return "" }
        let hidden = fields.sorted { $0.key < $1.key }.map {
            "<input type=\"hidden\" name=\"\(HTML.escape($0.key))\" value=\"\(HTML.escape($0.value))\">"
        }.joined()
        return
            "<form method=\"post\" action=\"\(HTML.escape(path))\" class=\"action\"><input type=\"hidden\" name=\"csrf\" value=\"\(dashboard.csrf)\">\(hidden)<button\(confirm ? " class=\"danger\" data-confirm=\"\(HTML.escape(label))?\"" : "")>\(HTML.escape(label))</button></form>"
    }

    // MARK: runs

    func runs(_ request: Request) async throws -> Response {
        let query = QueryItems(request.uri.query)
        let state = try query["state"].map { value in
            guard let state = RunState(rawValue: value) else {
                throw Failure(
                    status: .badRequest, message: "state=\(value): give running, succeeded, failed or cancelled")
            }
            return state
        }
        let limit = min(max(Int(query["limit"] ?? "") ?? 50, 1), 1_000)
        let filter = RunFilter(
            state: state, name: query["name"], before: query["before"].flatMap(Int64.init).map { DurableRunID($0) },
            limit: limit)
        let page = try await store.runs(filter)
        let counts = try await store.runCounts()
        let all = counts.values.reduce(0, +)
        func tab(_ label: String, _ value: RunState?, _ count: Int) -> String {
            let href = "/" + HTML.query([("state", value?.rawValue), ("name", filter.name)])
            return
                "<a href=\"\(HTML.escape(href))\" class=\"tab\(value == state ? " here" : "")\">\(label) <span class=\"count\">\(count)</span></a>"
        }
        var body = """
            <h1>Runs</h1>
            <section data-live>
            <nav class="tabs">\(tab("all", nil, all))\(RunState.allCases.map { tab($0.rawValue, $0, counts[$0] ?? 0) }.joined())</nav>
            """
        body += """
            <form method="get" action="/" class="filter">\(state.map { "<input type=\"hidden\" name=\"state\" value=\"\($0.rawValue)\">" } ?? "")\
            <label>Name <input name="name" value="\(HTML.escape(filter.name ?? ""))"></label> <button>Filter</button>\
            \(filter.name != nil ? " <a href=\"/\(HTML.escape(HTML.query([("state", state?.rawValue)])))\">clear</a>" : "")</form>
            """
        if page.runs.isEmpty {
            body += "<p class=\"empty\">No runs match.</p>"
        } else {
            body += """
                <table class="runs"><thead><tr><th>Run</th><th>Name</th><th>State</th><th>Progress</th><th>Failed</th><th>Created</th><th>Took</th></tr></thead><tbody>
                """
            for run in page.runs {
                let share = run.jobs == 0 ? 100 : run.done * 100 / run.jobs
                body += """
                    <tr><td class="number"><a href="/runs/\(run.id.rawValue)">\(run.id.rawValue)</a></td>\
                    <td><a href="/runs/\(run.id.rawValue)">\(HTML.short(run.name, 60))</a></td><td>\(HTML.badge(run.state.rawValue))</td>\
                    <td><progress max="100" value="\(share)"></progress> \(run.done)/\(run.jobs)</td>\
                    <td>\(run.failed + run.cancelled > 0 ? "\(run.failed) failed, \(run.cancelled) cancelled" : "")</td>\
                    <td>\(clock.stamp(run.created))</td><td>\(HTML.escape(clock.duration(from: run.created, to: run.finished)))</td></tr>
                    """
            }
            body += "</tbody></table>"
        }
        var links: [String] = []
        // The page size asked for goes along (it is not the default's when given).
        let size = query["limit"] == nil ? nil : "\(limit)"
        if filter.before != nil {
            links.append(
                "<a href=\"/\(HTML.escape(HTML.query([("state", state?.rawValue), ("name", filter.name), ("limit", size)])))\">Newest</a>"
            )
        }
        if let next = page.next {
            links.append(
                "<a href=\"/\(HTML.escape(HTML.query([("state", state?.rawValue), ("name", filter.name), ("limit", size), ("before", "\(next.rawValue)")])))\" rel=\"next\">Older runs</a>"
            )
        }
        if !links.isEmpty { body += "<p class=\"pages\">\(links.joined(separator: " · "))</p>" }
        body += "</section>"
        return html(layout.page(title: "Runs", section: "Runs", body: body, status: notice(request)))
    }

    // MARK: a run

    func run(_ id: Int64, _ request: Request) async throws -> Response {
        let run = DurableRunID(id)
        let query = QueryItems(request.uri.query)
        let snapshot = try await store.snapshot(of: run)
        let attempts = try await store.attempts(ofRun: run)
        let explanation = snapshot.explain()
        let record = snapshot.run
        let unfinished = snapshot.jobs.filter { !$0.state.isFinished }.count
        let failed = snapshot.jobs.filter { $0.state == .failed }.count
        let cancelled = snapshot.jobs.filter { $0.state == .cancelled }.count
        let state: RunState =
            unfinished > 0 ? .running : failed > 0 ? .failed : cancelled > 0 ? .cancelled : .succeeded
        let names = Dictionary(snapshot.jobs.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })

        var body = """
            <h1>Run \(id) <span class="name">\(HTML.escape(record.name))</span> \(HTML.badge(state.rawValue))</h1>
            <section\(unfinished > 0 ? " data-live" : "")>
            <dl class="facts"><dt>Created</dt><dd>\(clock.stamp(record.created))</dd>\
            <dt>Finished</dt><dd>\(record.finished.map { clock.stamp($0) } ?? "not yet")</dd>\
            <dt>Took</dt><dd>\(HTML.escape(clock.duration(from: record.created, to: record.finished)))</dd>\
            <dt>Jobs</dt><dd>\(snapshot.jobs.count - unfinished) of \(snapshot.jobs.count) finished; \(failed) failed, \(cancelled) cancelled</dd>\
            \(record.uniqueKey.map { "<dt>Unique key</dt><dd>\(HTML.escape($0))</dd>" } ?? "")\
            <dt>Clock</dt><dd>\(HTML.escape(snapshot.clock))</dd></dl>
            """
        var actions = ""
        if unfinished > 0 { actions += button("/runs/\(id)/cancel", "Cancel the run", confirm: true) }
        if failed + cancelled > 0 { actions += button("/runs/\(id)/retry", "Retry failed and cancelled jobs") }
        if unfinished == 0 { actions += button("/runs/\(id)/delete", "Delete the run", confirm: true) }
        if !actions.isEmpty { body += "<div class=\"actions\">\(actions)</div>" }

        // The jobs, a page at a time, optionally in one state.
        let filterState = try query["state"].map { value in
            guard let state = DurableJobState(rawValue: value) else {
                throw Failure(
                    status: .badRequest,
                    message: "state=\(value): give pending, ready, running, succeeded, failed or cancelled")
            }
            return state
        }
        let matching = explanation.jobs.filter { filterState == nil || $0.state == filterState }
        let start = min(max(Int(query["from"] ?? "") ?? 0, 0), max(matching.count - 1, 0))
        let shown = matching.dropFirst(start).prefix(Self.jobPage)
        let counts = explanation.counts
        func tab(_ label: String, _ value: DurableJobState?, _ count: Int) -> String {
            "<a href=\"/runs/\(id)\(HTML.escape(HTML.query([("state", value?.rawValue)])))#jobs\" class=\"tab\(value == filterState ? " here" : "")\">\(label) <span class=\"count\">\(count)</span></a>"
        }
        body += """
            <h2 id="jobs">Jobs</h2>
            <nav class="tabs">\(tab("all", nil, snapshot.jobs.count))\(DurableJobState.allCases.filter { (counts[$0] ?? 0) > 0 }.map { tab($0.rawValue, $0, counts[$0] ?? 0) }.joined())</nav>
            <table class="jobs"><thead><tr><th>Job</th><th>Name</th><th>Kind</th><th>State</th><th>Attempt</th><th>Waiting for, or last error</th></tr></thead><tbody>
            """
        for job in shown {
            var detail = job.waitingFor.map { HTML.escape($0.description) }.joined(separator: "<br>")
            if let error = job.lastError {
                detail += (detail.isEmpty ? "" : "<br>") + "<span class=\"error\">\(HTML.short(error, 160))</span>"
            }
            let adder = job.addedBy.map { adder in
                " <span class=\"added\">added by <a href=\"/jobs/\(adder.rawValue)\">\(HTML.escape(names[adder] ?? "job \(adder.rawValue)"))</a></span>"
            }
            body += """
                <tr><td class="number"><a href="/jobs/\(job.id.rawValue)">\(job.id.rawValue)</a></td>\
                <td><a href="/jobs/\(job.id.rawValue)">\(HTML.short(job.name, 60))</a>\(adder ?? "")</td><td>\(HTML.short(job.kind, 40))</td>\
                <td>\(HTML.badge(job.state.rawValue))</td><td class="number">\(job.attempts)/\(job.maxAttempts)</td><td>\(detail)</td></tr>
                """
        }
        body += "</tbody></table>"
        if matching.count > Self.jobPage {
            var links: [String] = []
            if start > 0 {
                links.append(
                    "<a href=\"/runs/\(id)\(HTML.escape(HTML.query([("state", filterState?.rawValue), ("from", "\(max(start - Self.jobPage, 0))")])))#jobs\">Previous \(Self.jobPage)</a>"
                )
            }
            if start + Self.jobPage < matching.count {
                links.append(
                    "<a href=\"/runs/\(id)\(HTML.escape(HTML.query([("state", filterState?.rawValue), ("from", "\(start + Self.jobPage)")])))#jobs\" rel=\"next\">Next \(Self.jobPage)</a>"
                )
            }
            body +=
                "<p class=\"pages\">Jobs \(start + 1)–\(start + shown.count) of \(matching.count). \(links.joined(separator: " · "))</p>"
        }

        // The timeline of its attempts (the latest, in a large run), then its graph.
        let (drawn, ended) = Self.latestAttempts(attempts, limit: Self.timelineLimit)
        let chart = BatonTool.timeline(of: snapshot, attempts: drawn).chart()
        let cut =
            ended > Self.timelineLimit
            ? " The latest \(Self.timelineLimit) of \(ended) attempts are drawn; <code>baton timeline</code> draws them all."
            : ""
        body += """
            </section>
            <h2>Timeline</h2>
            <p class="summary">\(HTML.escape(chart.summary)), one bar per attempt that ended. Hover over one for details.\(cut)</p>
            <div class="chart">\(chart.svg)</div>
            <h2>Graph</h2>
            """
        if snapshot.jobs.count <= DependencyGraph.limit {
            body += "<div class=\"chart\">\(DependencyGraph.svg(snapshot.jobs))</div>"
        } else {
            body += DependencyGraph.summary(snapshot.jobs)
        }
        return html(
            layout.page(title: "Run \(id) \(record.name)", section: "Runs", body: body, status: notice(request)))
    }

    /// The most attempts a run's page draws in its timeline: a running run of 100,000 jobs made a page
    /// of 23.6 MB, fetched again by its live update every 2 seconds.
    static let timelineLimit = 2_000

    /// The attempts that ended last (at most `limit` that started; of those that ended at the same time,
    /// the later jobs' and attempts'), and how many started and ended in all.
    static func latestAttempts(
        _ attempts: [DurableJobID: [AttemptRecord]], limit: Int
    ) -> (attempts: [DurableJobID: [AttemptRecord]], ended: Int) {
        let all = attempts.flatMap { job, list in list.filter { $0.started != nil }.map { (job, $0) } }
        guard all.count > limit else { return (attempts, all.count) }
        let latest = all.sorted { a, b in
            (a.1.ended, a.0.rawValue, a.1.attempt) > (b.1.ended, b.0.rawValue, b.1.attempt)
        }.prefix(limit)
        var kept: [DurableJobID: [AttemptRecord]] = [:]
        for (job, attempt) in latest.reversed() { kept[job, default: []].append(attempt) }
        return (kept, all.count)
    }

    // MARK: a job

    func job(_ id: Int64, _ request: Request) async throws -> Response {
        let job = DurableJobID(id)
        let explanation = try await store.explain(job: job)
        let run = try await store.run(of: job)
        let record = try await store.record(of: run)
        let attempts = try await store.attempts(of: job)
        let payload = try await store.payload(of: job)
        var body = """
            <h1>Job \(id) <span class="name">\(HTML.escape(explanation.name))</span> \(HTML.badge(explanation.state.rawValue))</h1>
            <section\(explanation.state.isFinished ? "" : " data-live")>
            <dl class="facts"><dt>Run</dt><dd><a href="/runs/\(run.rawValue)">\(run.rawValue) \(HTML.escape(record.name))</a></dd>\
            <dt>Kind</dt><dd>\(HTML.escape(explanation.kind))</dd>\
            <dt>Attempt</dt><dd>\(explanation.attempts) of \(explanation.maxAttempts)</dd>\
            \(explanation.addedBy.map { "<dt>Added by</dt><dd><a href=\"/jobs/\($0.rawValue)\">job \($0.rawValue)</a></dd>" } ?? "")\
            \(explanation.waitingFor.isEmpty ? "" : "<dt>Waiting for</dt><dd>\(explanation.waitingFor.map { HTML.escape($0.description) }.joined(separator: "<br>"))</dd>")\
            \(explanation.lastError.map { "<dt>\(explanation.state == .succeeded ? "Error of an earlier attempt" : "Last error")</dt><dd class=\"error\"><pre>\(HTML.escape($0))</pre></dd>" } ?? "")</dl>
            """
        var actions = ""
        if !explanation.state.isFinished { actions += button("/jobs/\(id)/cancel", "Cancel the job", confirm: true) }
        if explanation.state == .failed || explanation.state == .cancelled {
            actions += button("/jobs/\(id)/retry", "Retry the job")
        }
        if !actions.isEmpty { body += "<div class=\"actions\">\(actions)</div>" }
        body += "<h2>Attempts</h2>"
        if attempts.isEmpty {
            body +=
                explanation.state.isFinished
                ? "<p class=\"empty\">It never ran: it was \(explanation.state) before it started.</p>"
                : "<p class=\"empty\">No attempt has ended yet.</p>"
        } else {
            body += """
                <table class="attempts"><thead><tr><th>#</th><th>Outcome</th><th>Then</th><th>Worker</th><th>Started</th><th>Ended</th><th>Took</th><th>Error</th></tr></thead><tbody>
                """
            for attempt in attempts {
                body += """
                    <tr><td class="number">\(attempt.attempt)</td><td>\(HTML.badge(attempt.outcome.rawValue))</td><td>\(attempt.result.rawValue)</td>\
                    <td>\(HTML.escape(attempt.worker ?? ""))</td><td>\(clock.stamp(attempt.started))</td><td>\(clock.stamp(attempt.ended))</td>\
                    <td>\(attempt.started.map { HTML.escape(TimeText.duration(attempt.ended.timeIntervalSince($0))) } ?? "")</td>\
                    <td class="error">\(attempt.error.map { "<pre>\(HTML.escape($0))</pre>" } ?? "")</td></tr>
                    """
            }
            body += "</tbody></table>"
        }
        body += "<h2>Input</h2>"
        if let from = payload.inputFrom {
            body += "<p>The output of <a href=\"/jobs/\(from.rawValue)\">job \(from.rawValue)</a>.</p>"
        } else {
            body += Self.json(payload.input)
        }
        body += "<h2>Output</h2>" + (payload.output.map { Self.json($0) } ?? "<p class=\"empty\">None yet.</p>")
        body += "</section>"
        return html(
            layout.page(title: "Job \(id) \(explanation.name)", section: "Runs", body: body, status: notice(request)))
    }

    /// Stored JSON, indented when it parses, cut at ``payloadLimit`` bytes.
    static func json(_ data: Data?) -> String {
        guard let data else { return "<p class=\"empty\">None.</p>" }
        var text = String(decoding: data.prefix(payloadLimit), as: UTF8.self)
        if data.count <= payloadLimit,
            let value = try? JSONSerialization.jsonObject(with: data, options: .fragmentsAllowed),
            let pretty = try? JSONSerialization.data(
                withJSONObject: value,
                options: [.prettyPrinted, .sortedKeys, .fragmentsAllowed, .withoutEscapingSlashes])
        {
            text = String(decoding: pretty, as: UTF8.self)
        }
        let cut =
            data.count > payloadLimit
            ? "<p class=\"note\">The first \(payloadLimit) of \(data.count) bytes; `baton job --json` prints all.</p>"
            : ""
        return "<pre class=\"json\">\(HTML.escape(text))</pre>\(cut)"
    }

    // MARK: workers and schedules

    func workers() async throws -> Response {
        let workers = try await store.workers()
        var body = "<h1>Workers</h1><section data-live>"
        if workers.isEmpty {
            body += "<p class=\"empty\">No worker is registered, and no job is running.</p>"
        } else {
            body += """
                <table class="workers"><thead><tr><th>Worker</th><th>Kinds</th><th>Registered until</th><th>Running jobs</th></tr></thead><tbody>
                """
            for worker in workers {
                let leases = worker.leases.map { lease in
                    "<a href=\"/jobs/\(lease.job.rawValue)\">\(HTML.short(lease.name, 40))</a> [\(HTML.escape(lease.kind))] of <a href=\"/runs/\(lease.run.rawValue)\">run \(lease.run.rawValue)</a>, attempt \(lease.attempt)\(lease.expires.map { ", lease until \(clock.stamp($0))" } ?? "")"
                }.joined(separator: "<br>")
                body += """
                    <tr><td>\(HTML.escape(worker.id))</td><td>\(worker.kinds.map(HTML.escape).joined(separator: ", "))</td>\
                    <td>\(worker.expires.map { clock.stamp($0) } ?? "<span class=\"error\">not registered (its registration lapsed)</span>")</td>\
                    <td>\(leases.isEmpty ? "none" : leases)</td></tr>
                    """
            }
            body += "</tbody></table>"
        }
        body += "</section>"
        return html(layout.page(title: "Workers", section: "Workers", body: body))
    }

    func schedules(_ request: Request) async throws -> Response {
        let listing = try await store.scheduleListing()
        var body = "<h1>Schedules</h1><section data-live>"
        if listing.schedules.isEmpty && listing.unreadable.isEmpty {
            body += "<p class=\"empty\">No schedules.</p>"
        } else {
            body += """
                <table class="schedules"><thead><tr><th>Name</th><th>Timing</th><th>Catch-up</th><th>State</th><th>Next tick</th><th>Last tick</th><th></th></tr></thead><tbody>
                """
            // By name, a schedule this program cannot read among the others.
            for entry in listing.entries {
                switch entry {
                case .readable(let record): body += scheduleRow(record)
                case .unreadable(let schedule): body += unreadableRow(schedule)
                }
            }
            body += "</tbody></table>"
        }
        body += "</section>"
        return html(layout.page(title: "Schedules", section: "Schedules", body: body, status: notice(request)))
    }

    /// The row of a schedule: its timing, state and ticks, and a pause or resume.
    private func scheduleRow(_ record: ScheduleRecord) -> String {
        let name = record.schedule.name
        let toggle =
            record.paused
            ? button("/schedules/resume", "Resume", fields: ["schedule": HTML.hex(name)])
            : button("/schedules/pause", "Pause", fields: ["schedule": HTML.hex(name)])
        return """
            <tr><td>\(HTML.escape(name))</td><td>\(HTML.escape(record.schedule.timing.description))</td>\
            <td>\(HTML.escape("\(record.schedule.catchUp)\(record.schedule.overlap == .skip ? ", one run at a time" : "")"))</td><td>\(HTML.badge(record.paused ? "paused" : "active"))</td>\
            <td>\(clock.stamp(record.nextTick))</td><td>\(clock.stamp(record.lastTick))</td><td>\(toggle)</td></tr>
            """
    }

    /// The row of a schedule this program cannot read (a newer version's timing): its state and ticks,
    /// the reason, and a pause (resuming needs its timing: the program that wrote it resumes it).
    private func unreadableRow(_ schedule: UnreadableSchedule) -> String {
        let toggle =
            schedule.paused ? "" : button("/schedules/pause", "Pause", fields: ["schedule": HTML.hex(schedule.name)])
        return """
            <tr class="unreadable"><td>\(HTML.escape(schedule.name))</td>\
            <td colspan="2" class="error">\(HTML.escape(schedule.reason))</td>\
            <td>\(HTML.badge(schedule.paused ? "paused" : "active"))</td>\
            <td>\(clock.stamp(schedule.nextTick))</td><td>\(clock.stamp(schedule.lastTick))</td><td>\(toggle)</td></tr>
            """
    }

    // MARK: actions

    func act(_ action: Action, request: Request, context: some RequestContext) async throws -> Response {
        guard dashboard.configuration.allowActions else {
            throw Failure(
                status: .forbidden,
                message:
                    "This dashboard is read-only; start it with --allow-actions to cancel, retry, delete, pause or resume."
            )
        }
        // A form of this dashboard's own pages: its origin, when the browser says, and its CSRF token.
        if let origin = request.headers[.origin] {
            let host = origin.split(separator: "://", maxSplits: 1).last.map(String.init)
            let ours =
                dashboard.configuration.isLoopback
                ? Guard<BasicRequestContext>.isLoopbackAuthority(host) : host == request.head.authority
            guard ours else {
                throw Failure(status: .forbidden, message: "A form of another site (\(origin)) was refused.")
            }
        }
        var request = request
        let form = QueryItems(String(buffer: try await request.collectBody(upTo: 65_536)))
        guard let token = form["csrf"], sameSecret(token, dashboard.csrf) else {
            throw Failure(
                status: .forbidden,
                message:
                    "The form's CSRF token is missing or not this dashboard's (it changes when the dashboard restarts): reload the page and try again."
            )
        }
        func id() throws -> Int64 { try Dashboard.number(context, of: "run or job") }
        switch action {
        case .cancelRun:
            // A run or job that had finished is said so (from a page shown before it finished), as the
            // command says, rather than "Cancelled".
            let run = DurableRunID(try id())
            guard try await store.snapshot(of: run).jobs.contains(where: { !$0.state.isFinished }) else {
                return .redirect(to: "/runs/\(run.rawValue)?notice=already-finished", type: .normal)
            }
            try await store.cancel(run: run, reason: "cancelled from the dashboard")
            return .redirect(to: "/runs/\(run.rawValue)?notice=cancelled", type: .normal)
        case .retryRun:
            let count = try await store.retry(run: DurableRunID(try id()))
            return .redirect(
                to: "/runs/\(try id())?notice=\(count == 0 ? "nothing-to-retry" : "retried")", type: .normal)
        case .deleteRun:
            try await store.delete(run: DurableRunID(try id()))
            return .redirect(to: "/?notice=deleted", type: .normal)
        case .cancelJob:
            let job = DurableJobID(try id())
            guard try await !store.explain(job: job).state.isFinished else {
                return .redirect(to: "/jobs/\(job.rawValue)?notice=already-finished", type: .normal)
            }
            try await store.cancel(job: job, reason: "cancelled from the dashboard")
            return .redirect(to: "/jobs/\(job.rawValue)?notice=cancelled", type: .normal)
        case .retryJob:
            try await store.retry(job: DurableJobID(try id()))
            return .redirect(to: "/jobs/\(try id())?notice=retried", type: .normal)
        case .pauseSchedule, .resumeSchedule:
            // Found by the store by its name: a listing of every schedule would fail on any one this
            // program cannot read (and that one too can be paused).
            // The pages send the name as hex (`schedule`): an attribute shows control characters escaped,
            // and a browser sends its line breaks as CRLF, so a name with either was not found.
            guard let name = form["schedule"].flatMap(HTML.unhex) ?? form["name"] else {
                throw Failure(status: .notFound, message: "There is no schedule of that name.")
            }
            do {
                try await store.setSchedule(named: name, paused: action == .pauseSchedule)
            } catch let error as DurableError where error.code == .misuse {
                throw Failure(status: .notFound, message: "There is no schedule of that name.")
            }
            return .redirect(to: "/schedules?notice=\(action == .pauseSchedule ? "paused" : "resumed")", type: .normal)
        }
    }
}
