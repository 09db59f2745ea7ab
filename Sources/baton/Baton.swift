import ArgumentParser
import BatonCLI
import BatonDashboard
import BatonDurable
import BatonObservability
import Foundation
import Logging
import NIOCore

/// `baton`: see and repair the runs of a durable job store, SQLite or PostgreSQL.
///
/// The commands are thin: they parse arguments and call ``BatonTool``, which tests run in-process.
@main
struct Baton: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "baton",
        abstract: "See and repair the runs of a Baton job store.",
        discussion: """
            The store is --store, else $\(StoreAddress.environmentVariable): sqlite:PATH (a SQLiteJobStore \
            file) or postgres://user[:password]@host[:port]/database (a PostgresJobStore; --schema names its \
            schema, default baton). A read never creates a store. Every read command takes --json.
            """,
        subcommands: [
            Runs.self, Explain.self, Jobs.self, Job.self, Timeline.self, Cancel.self, Retry.self, Prune.self,
            Schedules.self, DashboardCommand.self,
        ]
    )

    /// The parser's own output (help, usage errors) goes through stdio, not `writeToStandardOutput`: it
    /// is checked at exit, so that it too ends the program with status 1 and a message when it could not
    /// be written.
    static func main() async {
        atexit {
            // Every stdio stream (standard error is unbuffered): what is left is standard output's.
            guard fflush(nil) != 0 else { return }
            let failure = errno
            if failure == EPIPE { _exit(141) }
            writeToStandardError(
                "baton: could not write to standard output"
                    + ": \(String(cString: strerror(failure))).\n")
            _exit(1)
        }
        await main(nil)
    }
}

struct StoreOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The job store: sqlite:PATH or postgres://…", valueName: "address"))
    var store: String?
    @Option(help: ArgumentHelp("The PostgreSQL schema of the store (default baton).", valueName: "name"))
    var schema: String?

    func validate() throws {
        _ = try usageChecked { try address() }
    }

    func address() throws(BatonCLIError) -> StoreAddress {
        try StoreAddress.resolve(option: store, schema: schema, environment: ProcessInfo.processInfo.environment)
    }
}

/// Runs a command against the store. On failure prints `baton: <one line>` to standard error and exits
/// with 1; a usage error is printed as the parser prints its own and exits with 64.
func running(
    _ command: any ParsableCommand.Type, _ options: StoreOptions,
    _ body: @escaping @Sendable (BatonTool, any JobStore) async throws -> Void
) async throws {
    let tool = BatonTool(write: { text in writeToStandardOutput(text) })
    do {
        try await options.address().withStore { store in try await body(tool, store) }
    } catch let error as BatonCLIError where error.isUsage {
        let usage = Baton.usageString(for: command)
        writeToStandardError(
            "Error: \(error.message)\nUsage: \(usage)\n  See 'baton \(command._commandName) --help' for more information.\n"
        )
        throw ExitCode.validationFailure
    } catch {
        // (Messages quote job names, which come from users: shown escaped, like every other output.)
        writeToStandardError("baton: \(TimeText.printable(BatonTool.message(for: error)))\n")
        throw ExitCode.failure
    }
}

/// Turns a usage ``BatonCLIError`` found while validating into the parser's `ValidationError` (exit 64).
func usageChecked<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as BatonCLIError where error.isUsage {
        throw ValidationError(error.message)
    }
}

struct Runs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List runs, newest first, with the counts of runs by state.")
    @OptionGroup var options: StoreOptions
    @Option(help: "Only runs in this state: running, succeeded, failed or cancelled.") var state: String?
    @Option(help: "Only runs of this name.") var name: String?
    @Option(help: ArgumentHelp("Only runs created since then: an age (30m, 12h, 7d) or a date.", valueName: "when"))
    var since: String?
    @Option(help: ArgumentHelp("The page after this run (what `More:` says).", valueName: "run")) var before: Int64?
    @Option(help: "How many runs (1 to 1000).") var limit = 50
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if let state, RunState(rawValue: state) == nil {
            throw ValidationError("--state \(state): give running, succeeded, failed or cancelled")
        }
        guard (1...1000).contains(limit) else { throw ValidationError("--limit \(limit): give 1 to 1000") }
        if let since {
            _ = try usageChecked { try TimeText.moment(since, now: Date(), timeZone: .current, option: "--since") }
        }
    }

    func run() async throws {
        let filter = RunFilter(
            state: state.flatMap(RunState.init(rawValue:)), name: name,
            createdSince: try since.map { try TimeText.moment($0, now: Date(), timeZone: .current, option: "--since") },
            before: before.map { DurableRunID($0) }, limit: limit)
        let json = json
        try await running(Self.self, options) { tool, store in try await tool.runs(store, filter: filter, json: json) }
    }
}

struct Explain: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Each job of a run: its state, attempt, what it waits for and its last error.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The run's number.") var run: Int64
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        let (run, json) = (DurableRunID(run), json)
        try await running(Self.self, options) { tool, store in try await tool.explain(store, run: run, json: json) }
    }
}

struct Jobs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A run's jobs in the order they were added, a page at a time, optionally in one state.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The run's number.") var run: Int64
    @Option(help: "Only jobs in this state: pending, ready, running, succeeded, failed or cancelled.") var state:
        String?
    @Option(help: ArgumentHelp("The page after this job (what `More:` says).", valueName: "job")) var after: Int64?
    @Option(help: "How many jobs (1 to 1000).") var limit = 100
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        if let state, DurableJobState(rawValue: state) == nil {
            throw ValidationError(
                "--state \(state): give pending, ready, running, succeeded, failed or cancelled")
        }
        guard (1...1000).contains(limit) else { throw ValidationError("--limit \(limit): give 1 to 1000") }
    }

    func run() async throws {
        let filter = JobFilter(
            run: DurableRunID(run), state: state.flatMap(DurableJobState.init(rawValue:)),
            after: after.map { DurableJobID($0) }, limit: limit)
        let json = json
        try await running(Self.self, options) { tool, store in try await tool.jobs(store, filter: filter, json: json) }
    }
}

struct Job: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A job's state, output and every attempt with its worker (not kept for a success) and error.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The job's number.") var job: Int64
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        let (job, json) = (DurableJobID(job), json)
        try await running(Self.self, options) { tool, store in try await tool.job(store, job: job, json: json) }
    }
}

struct Timeline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write the Gantt page of a run's attempts (one self-contained HTML file).")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The run's number.") var run: Int64
    @Option(name: .shortAndLong, help: ArgumentHelp("The page to write.", valueName: "file")) var output: String

    func validate() throws {
        if let problem = OutputFile.problem(output, example: "run.html") {
            throw ValidationError("-o \(output)\(problem)")
        }
        if try usageChecked({ try options.address() }).isOverwritten(by: output) {
            throw ValidationError(
                "-o \(output) is the job store's own file (or one of its side files); give another file, such as run.html"
            )
        }
    }

    func run() async throws {
        let (run, output) = (DurableRunID(run), output)
        try await running(Self.self, options) { tool, store in
            let page = try await tool.timeline(store, run: run)
            do {
                try OutputFile.write(page, to: output)
            } catch {
                throw BatonCLIError("cannot write \(output): \(error.localizedDescription)")
            }
            tool.write("Wrote the timeline of run \(run.rawValue) to \(output).\n")
        }
    }
}

struct Cancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Cancel a run's unfinished jobs, or one job (--job) and the jobs that need it.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The run's number.") var run: Int64?
    @Option(help: ArgumentHelp("Cancel this job instead of a run.", valueName: "job")) var job: Int64?
    @Option(help: "Why (kept with the jobs).") var reason = "cancelled with the baton command"

    func validate() throws {
        guard (run == nil) != (job == nil) else { throw ValidationError("give a run, or --job JOB (not both)") }
    }

    func run() async throws {
        let (run, job, reason) = (run.map { DurableRunID($0) }, job.map { DurableJobID($0) }, reason)
        try await running(Self.self, options) { tool, store in
            try await tool.cancel(store, run: run, job: job, reason: reason)
        }
    }
}

struct Retry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a run's failed and cancelled jobs again, or one job (--job) and what it cancelled.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The run's number.") var run: Int64?
    @Option(help: ArgumentHelp("Retry this job instead of a run.", valueName: "job")) var job: Int64?

    func validate() throws {
        guard (run == nil) != (job == nil) else { throw ValidationError("give a run, or --job JOB (not both)") }
    }

    func run() async throws {
        let (run, job) = (run.map { DurableRunID($0) }, job.map { DurableJobID($0) })
        try await running(Self.self, options) { tool, store in try await tool.retry(store, run: run, job: job) }
    }
}

struct Prune: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete the runs that finished before a time.")
    @OptionGroup var options: StoreOptions
    @Option(
        help: ArgumentHelp("An age (7d, 12h) or a date: runs that finished before it are deleted.", valueName: "when"))
    var before: String
    @Flag(help: "Print JSON.") var json = false

    func validate() throws {
        _ = try usageChecked { try TimeText.moment(before, now: Date(), timeZone: .current, option: "--before") }
    }

    func run() async throws {
        let date = try TimeText.moment(before, now: Date(), timeZone: .current, option: "--before")
        let json = json
        try await running(Self.self, options) { tool, store in
            try await tool.prune(store, finishedBefore: date, json: json)
        }
    }
}

struct Schedules: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List schedules, or pause or resume one.",
        subcommands: [List.self, Pause.self, Resume.self], defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every schedule, paused or not, and its next tick.")
        @OptionGroup var options: StoreOptions
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let json = json
            try await running(Self.self, options) { tool, store in try await tool.schedules(store, json: json) }
        }
    }

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop a schedule's ticks until it is resumed.")
        @OptionGroup var options: StoreOptions
        @Argument(help: "The schedule's name.") var name: String

        func run() async throws {
            let name = name
            try await running(Self.self, options) { tool, store in
                try await tool.setSchedule(store, named: name, paused: true)
            }
        }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Let a paused schedule tick again.")
        @OptionGroup var options: StoreOptions
        @Argument(help: "The schedule's name.") var name: String

        func run() async throws {
            let name = name
            try await running(Self.self, options) { tool, store in
                try await tool.setSchedule(store, named: name, paused: false)
            }
        }
    }
}

struct DashboardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dashboard",
        abstract: "Serve a web dashboard of the store's runs, jobs, workers and schedules.",
        discussion: """
            Listens on 127.0.0.1 (this machine only) unless --host says otherwise, and is read-only unless \
            --allow-actions. With --token (or $BATON_DASHBOARD_TOKEN) every request needs the token: open the \
            address printed at start, which carries it once and sets a cookie. Ctrl-C stops it.
            """)
    @OptionGroup var options: StoreOptions
    @Option(help: "The port to listen on (0: any free port).") var port = 8080
    @Option(help: "The address to listen on; anything but a loopback address exposes the store to the network.")
    var host = "127.0.0.1"
    @Flag(help: "Offer and accept cancel, retry, delete, pause and resume.") var allowActions = false
    @Option(help: ArgumentHelp("A secret that every request must carry.", valueName: "secret")) var token: String?

    func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port \(port): give 0 to 65535") }
        let configuration = Dashboard.Configuration(host: host, port: port, allowActions: allowActions)
        if !configuration.isLoopback, allowActions, resolvedToken == nil {
            throw ValidationError(
                "--allow-actions on \(host) lets anyone who reaches this machine cancel and delete runs: give --token too (or listen on 127.0.0.1)"
            )
        }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-")
        if let token = resolvedToken, token.count < 8 || !token.allSatisfy(allowed.contains) {
            // Named as given: a token from the environment is not a mistake in --token.
            let source = token == self.token ? "--token" : "$BATON_DASHBOARD_TOKEN"
            throw ValidationError(
                "\(source): give at least 8 characters of letters, digits and . _ ~ - (it travels in a cookie and an address)"
            )
        }
    }

    /// A query value: everything but RFC 3986's unreserved characters percent-encoded.
    static func queryValue(_ text: String) -> String {
        var unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        unreserved.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }

    var resolvedToken: String? {
        token ?? ProcessInfo.processInfo.environment["BATON_DASHBOARD_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
    }

    func run() async throws {
        let configuration = Dashboard.Configuration(
            host: host, port: port, allowActions: allowActions, token: resolvedToken)
        let address = try usageChecked { try options.address() }
        try await running(Self.self, options) { _, store in
            let dashboard = Dashboard(store: store, storeName: address.description, configuration: configuration)
            var logger = Logger(label: "baton.dashboard")
            logger.logLevel = .warning
            let app = dashboard.application(logger: logger) { port in
                let shown = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
                let tokenPart = configuration.token.map { "?token=" + Self.queryValue($0) } ?? ""
                var lines = [
                    "Dashboard of \(address) at http://\(shown):\(port)/\(tokenPart)",
                    configuration.allowActions
                        ? "Actions are on (cancel, retry, delete, pause, resume)."
                        : "Read-only (--allow-actions to repair runs).",
                ]
                if !configuration.isLoopback && configuration.token == nil {
                    lines.append(
                        "Warning: listening on \(configuration.host) without --token: anyone who reaches this machine can read the store."
                    )
                }
                lines.append("Ctrl-C stops it.")
                writeToStandardError(lines.joined(separator: "\n") + "\n")
            }
            do {
                try await app.runService()
            } catch let error as IOError where error.errnoCode == EADDRINUSE || error.errnoCode == EADDRNOTAVAIL {
                // NIO's own words named a system call, not the port.
                throw BatonCLIError(
                    error.errnoCode == EADDRINUSE
                        ? "port \(configuration.port) on \(configuration.host) is in use (another dashboard?); give another with --port, or 0 for any free one"
                        : "\(configuration.host) is not an address of this machine; give one it has, such as 127.0.0.1")
            }
        }
    }
}

/// Writes `text` to standard output. Output that could not be written must not look written: at a
/// closed pipe (`| head` with SIGPIPE ignored) the command ends quietly with status 141, as SIGPIPE
/// would have ended it; on any other failure (a full disk, an I/O error) it says so on standard error
/// and exits with 1.
func writeToStandardOutput(_ text: String) {
    guard let failure = writeAll(text, to: STDOUT_FILENO) else { return }
    if failure == EPIPE { exit(141) }
    writeToStandardError(
        "baton: could not write to standard output: \(String(cString: strerror(failure))). What was not written is lost.\n"
    )
    exit(1)
}

/// Writes `text` to standard error; a failure there has nowhere left to be told.
func writeToStandardError(_ text: String) { _ = writeAll(text, to: STDERR_FILENO) }

/// Writes all of `text` to `descriptor` (see `OutputFile.writeAll(_:to:)`).
private func writeAll(_ text: String, to descriptor: Int32) -> Int32? {
    OutputFile.writeAll(Array(text.utf8), to: descriptor)
}
